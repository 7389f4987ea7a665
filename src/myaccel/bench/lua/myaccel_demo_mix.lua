-- myaccel_demo_mix: the known demo workload of myaccel.capture.demo (the shop schema and
-- its five statement classes) issued by sysbench 1.0.x instead of Python clients, so that
-- a capture of it and its replay (also sysbench) cost the client the same CPU per
-- statement: a closed-loop comparison at the same concurrency is then fair.
--
-- myaccel (capture/demo.py, SysbenchDriver) runs it as
--
--   sysbench myaccel_demo_mix.lua --mysql-db=shop --items=2000 --mix=W1,W2,W3,W4,W5
--     --threads=N --time=D [--config-file=F] run
--
-- Each sysbench thread holds one connection (autocommit, text protocol: literals in the
-- SQL, as PyMySQL sends them) and each event issues ONE statement, the class drawn with
-- probability proportional to its weight in --mix (the demo's MIX, in order):
--
--   1 SELECT name, price FROM items WHERE id = I
--   2 SELECT id, name FROM items WHERE price BETWEEN P AND P+2 LIMIT 10    (P = I mod 90)
--   3 UPDATE items SET stock = stock - 1 WHERE id = I
--   4 INSERT INTO orders (item_id, qty) VALUES (I, Q)                       (Q in 1..5)
--   5 SELECT COUNT(*), SUM(qty) FROM orders WHERE item_id = I
--
-- with I uniform in 1..--items: the Python driver's statements and parameter ranges.

sysbench.cmdline.options = {
  items = { "rows of shop.items (ids 1..items)", 2000 },
  mix = { "the five classes' weights, in the order above", "50,15,15,10,10" },
}

local cumulative = {}
local total = 0

local function parse_mix(text)
  local out = {}
  for w in string.gmatch(text, "[^,]+") do
    local n = tonumber(w)
    if n == nil or n < 0 then
      error("myaccel_demo_mix: --mix wants five non-negative numbers, got " .. text, 0)
    end
    out[#out + 1] = n
  end
  if #out ~= 5 then
    error("myaccel_demo_mix: --mix wants five weights, got " .. text, 0)
  end
  return out
end

local con = nil
local items = 2000

function thread_init()
  items = tonumber(sysbench.opt.items) or 2000
  total = 0
  for i, w in ipairs(parse_mix(sysbench.opt.mix)) do
    total = total + w
    cumulative[i] = total
  end
  if total <= 0 then
    error("myaccel_demo_mix: the --mix weights add up to 0", 0)
  end
  con = sysbench.sql.driver():connect()
end

function thread_done()
  if con then
    con:disconnect()
  end
end

function event()
  local r = sysbench.rand.uniform_double() * total
  local i = sysbench.rand.uniform(1, items)
  if r < cumulative[1] then
    con:query(string.format("SELECT name, price FROM items WHERE id = %d", i))
  elseif r < cumulative[2] then
    local p = i % 90
    con:query(
      string.format("SELECT id, name FROM items WHERE price BETWEEN %d AND %d LIMIT 10", p, p + 2)
    )
  elseif r < cumulative[3] then
    con:query(string.format("UPDATE items SET stock = stock - 1 WHERE id = %d", i))
  elseif r < cumulative[4] then
    con:query(
      string.format(
        "INSERT INTO orders (item_id, qty) VALUES (%d, %d)",
        i,
        sysbench.rand.uniform(1, 5)
      )
    )
  else
    con:query(string.format("SELECT COUNT(*), SUM(qty) FROM orders WHERE item_id = %d", i))
  end
end
