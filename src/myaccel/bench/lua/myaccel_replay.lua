-- myaccel_replay: replays a captured statement mix with sysbench 1.0.x.
--
-- A script written by myaccel (bench/replay.py) sets the global MYACCEL_REPLAY, then runs
-- this file:
--
--   MYACCEL_REPLAY = { classes = { { w = COUNT, schema = "NAME", sql = { "SQL", ... } }, ... } }
--
-- Each sysbench event issues ONE statement: a class drawn with probability proportional to
-- its captured count (w), one of its captured examples (literals included) drawn
-- uniformly. A class whose schema differs from the connection's current one is preceded
-- by USE. Errors follow sysbench's --mysql-ignore-errors (myaccel passes "all" for
-- replays unless told otherwise): an ignored error restarts the event.
--
-- Sequence mode (MYACCEL_REPLAY.traces = { { { schema = "NAME", sql = "SQL" }, ... }, ... }):
-- sysbench thread i replays captured connection (i mod #traces) + 1 statement by statement
-- in its captured order (a transaction's statements stay together, on one connection),
-- from the start again when it reaches the end.

local R = MYACCEL_REPLAY
if type(R) ~= "table" or type(R.classes) ~= "table" or #R.classes == 0 then
  error("myaccel_replay: MYACCEL_REPLAY holds no statement class", 0)
end

local cumulative = {}
local total = 0
for i, c in ipairs(R.classes) do
  total = total + c.w
  cumulative[i] = total
end

-- The first class whose cumulative weight reaches r (binary search).
local function class_at(r)
  local lo, hi = 1, #cumulative
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if cumulative[mid] < r then
      lo = mid + 1
    else
      hi = mid
    end
  end
  return R.classes[lo]
end

local con = nil
local schema = nil
local trace = nil
local pos = 0

function thread_init(thread_id)
  local drv = sysbench.sql.driver()
  con = drv:connect()
  schema = nil
  if type(R.traces) == "table" and #R.traces > 0 then
    trace = R.traces[(thread_id or sysbench.tid or 0) % #R.traces + 1]
    pos = 0
  end
end

function thread_done()
  if con then
    con:disconnect()
  end
end

local function use(name)
  if name ~= "" and name ~= schema then
    con:query("USE `" .. name .. "`")
    schema = name
  end
end

function event()
  if trace then
    pos = pos % #trace + 1
    local s = trace[pos]
    use(s.schema)
    con:query(s.sql)
    return
  end
  local c = class_at(sysbench.rand.uniform(1, total))
  use(c.schema)
  local n = #c.sql
  local sql = n == 1 and c.sql[1] or c.sql[sysbench.rand.uniform(1, n)]
  con:query(sql)
end
