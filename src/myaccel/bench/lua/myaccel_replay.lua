-- myaccel_replay: replays a captured statement mix with sysbench 1.0.x.
--
-- A script written by myaccel (bench/replay.py) sets the global MYACCEL_REPLAY, then runs
-- this file. Every statement in it passed myaccel's check of what a replay may issue
-- (capture/sqlguard.py: one DML statement each, on the captured schemas); names = "utf8mb4"
-- when one of them holds text outside ASCII (each connection then says SET NAMES):
--
--   MYACCEL_REPLAY = { classes = { { w = COUNT, id = "ID", schema = "NAME",
--                                    sql = { STATEMENT, ... } }, ... } }
--
-- A STATEMENT is a string, or a template: a list of strings and holes filled at each
-- execution (bench/placeholders.py, bench/keys.py): { k = "int", n = DIGITS, neg = true },
-- { k = "dec", n = I, f = F }, { k = "float" }, { k = "str", n = LEN },
-- { k = "digits", n = LEN }, { k = "date" }, { k = "datetime" }, { k = "time" },
-- { k = "hex", n = LEN }, { k = "bits", n = LEN }, and { k = "key", t = I }: a key of its
-- own for an insert's primary key (MYACCEL_REPLAY.keys[I] = { db = "S", tbl = "T",
-- col = "C" }): base + k * threads + thread, base above MAX(col) when the thread starts.
--
-- Each sysbench event issues ONE statement: a class dealt from a shuffled deck in which
-- each class has cards in proportion to its captured count (w), one of its captured
-- examples drawn uniformly. A class whose
-- schema differs from the connection's current one is preceded by USE. A statement that
-- fails with an error sysbench ignores (--mysql-ignore-errors; myaccel passes "all" for
-- replays) is counted apart, per class and per error number, and the event ends there:
-- it is not retried (a retry would issue another statement and skew the mix). With
-- session_len = N (a capture of short connections), the thread opens a new connection
-- after each statement with probability 1/N: sessions of N statements on average, as the
-- captured application's.
--
-- Sequence mode (MYACCEL_REPLAY.traces = { { { schema = "NAME", sql = STATEMENT, c = CLASS },
-- ... }, ... }, the captured sessions, and pool = { { TRACE, ... }, ... }, the sessions of
-- each pool thread): sysbench thread i replays the sessions of pool[(i mod #pool) + 1] one
-- after another, each statement by statement in its captured order, from the first again
-- after the last; with reconnect = true each session runs on a new connection.
--
-- Timed mode (sequence mode plus MYACCEL_REPLAY.timed = true, gap_from = "end" or "start",
-- and g = MICROSECONDS in each step): before a statement the thread waits until g after the
-- end (gap_from "end": the captured client's time between statements) or the start
-- (gap_from "start": the captured schedule, kept cumulatively and made up within the
-- log's 1 s resolution) of the previous statement it issued, or not at all when that time
-- has passed (closed loop: a slower server makes the thread fall behind). The wait is
-- outside sysbench's event, so an event's latency is the statement's alone; usleep's
-- overshoot is measured (up to 2 ms a sleep) and taken off later waits, and a wait that
-- ends early sleeps the rest: never early. A thread's first statement is issued
-- at once; a session's first step waits the captured time between the pool thread's
-- sessions. A wait that would end after the run's --time ends the thread instead (a long
-- idle gap does not hold the run past its end).
--
-- At its end each thread prints one line, the statements it issued after the warm-up:
--   MYACCEL_REPLAY {"v":1,"ok":{"CLASS":N,...},"err":{"CLASS":N,...},"errno":{"1062":N,...},
--                   "sessions":N}

local R = MYACCEL_REPLAY
if type(R) ~= "table" or type(R.classes) ~= "table" or #R.classes == 0 then
  error("myaccel_replay: MYACCEL_REPLAY holds no statement class", 0)
end

local total = 0
for _, c in ipairs(R.classes) do
  total = total + c.w
end

-- The mix as a deck of DECK cards (fewer when the capture counted fewer statements): each
-- class has cards in proportion to its count (largest remainders), and a thread deals its
-- own shuffled copy, reshuffled when dealt out. Every dealt deck is the captured mix to
-- the card (a draw with replacement strayed by ~0.5 point per class over 10,000 events).
local DECK = 1000
local deck_cards = {}
do
  local size = math.min(DECK, total)
  local rest = {}
  for i, c in ipairs(R.classes) do
    local exact = c.w * size / total
    local n = math.floor(exact)
    for _ = 1, n do
      deck_cards[#deck_cards + 1] = i
    end
    rest[#rest + 1] = { i = i, r = exact - n }
  end
  table.sort(rest, function(a, b)
    return a.r > b.r or (a.r == b.r and a.i < b.i)
  end)
  local k = 1
  while #deck_cards < size and k <= #rest do
    deck_cards[#deck_cards + 1] = rest[k].i
    k = k + 1
  end
end
local deck, dealt = {}, 0

local function deal()
  if dealt == 0 or dealt >= #deck then
    for i = 1, #deck_cards do
      deck[i] = deck_cards[i]
    end
    for i = #deck, 2, -1 do -- Fisher-Yates, on sysbench's generator (--rand-seed)
      local j = sysbench.rand.uniform(1, i)
      deck[i], deck[j] = deck[j], deck[i]
    end
    dealt = 0
  end
  dealt = dealt + 1
  return deck[dealt]
end

local ffi = require("ffi")
pcall(ffi.cdef, "struct timespec { long tv_sec; long tv_nsec; };")
pcall(ffi.cdef, "int clock_gettime(int clk_id, struct timespec *tp);")
pcall(ffi.cdef, "int usleep(unsigned int usec);")
local ts = ffi.new("struct timespec")
local function now_us()
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts.tv_sec) * 1e6 + tonumber(ts.tv_nsec) / 1e3
end

local drv = nil
local con = nil
local schema = nil
local sessions = nil -- sequence mode: this thread's sessions (lists of steps)
local si, pos = 1, 0 -- the current session and step
local events_in_session = 0
local tid = 0
local nthreads = 1
local keybase = {}
local keyk = 0
local ok_n, err_n, errno_n = {}, {}, {}
local sessions_n = 0
local count_from = nil -- when the warm-up ends (us)

local function connect()
  if con then
    con:disconnect()
  end
  con = drv:connect()
  if R.names then
    -- statements outside ASCII: read as the UTF-8 they are (set by myaccel, not the file)
    con:query("SET NAMES " .. R.names)
  end
  schema = nil
  events_in_session = 0
  sessions_n = sessions_n + 1
end

local function quote_name(name)
  return "`" .. (name:gsub("`", "``")) .. "`"
end

function thread_init(thread_id)
  drv = sysbench.sql.driver()
  tid = thread_id or sysbench.tid or 0
  nthreads = tonumber(sysbench.opt and sysbench.opt.threads) or 1
  connect()
  for i, k in ipairs(R.keys or {}) do
    local row = con:query_row(
      "SELECT COALESCE(MAX(" .. quote_name(k.col) .. "), 0) FROM " .. quote_name(k.db) .. "." .. quote_name(k.tbl)
    )
    local top = tonumber(row) or 0
    keybase[i] = (math.floor(top / nthreads) + 1) * nthreads
  end
  local warm = tonumber(sysbench.opt and sysbench.opt.warmup_time) or 0
  count_from = now_us() + warm * 1e6
  if type(R.traces) == "table" and #R.traces > 0 then
    local mine = R.pool and R.pool[tid % #R.pool + 1] or { tid % #R.traces + 1 }
    sessions = {}
    for _, t in ipairs(mine) do
      sessions[#sessions + 1] = R.traces[t]
    end
    si, pos = 1, 0
  end
end

local function json_counts(t)
  local parts = {}
  for k, v in pairs(t) do
    parts[#parts + 1] = string.format("%q:%d", tostring(k), v)
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

function thread_done()
  io.write(
    'MYACCEL_REPLAY {"v":1,"ok":' .. json_counts(ok_n) .. ',"err":' .. json_counts(err_n)
      .. ',"errno":' .. json_counts(errno_n) .. ',"sessions":' .. sessions_n .. "}\n"
  )
  if con then
    con:disconnect()
  end
end

local function use(name)
  if name ~= "" and name ~= schema then
    con:query("USE " .. quote_name(name))
    schema = name
  end
end

-- Values of a hole's shape (bench/placeholders.py).
local function digits(n, lead)
  local t = {}
  for i = 1, n do
    local lo = (i == 1 and lead and n > 1) and 1 or 0
    t[i] = string.char(48 + sysbench.rand.uniform(lo, 9))
  end
  return table.concat(t)
end

local function letters(n)
  local t = {}
  for i = 1, n do
    t[i] = string.char(97 + sysbench.rand.uniform(0, 25))
  end
  return table.concat(t)
end

local HEX = "0123456789abcdef"
local function fill(h)
  local k = h.k
  if k == "key" then
    local v = keybase[h.t] + keyk * nthreads + tid
    keyk = keyk + 1
    return string.format("%.0f", v)
  elseif k == "int" then
    return (h.neg and "-" or "") .. digits(h.n, true)
  elseif k == "dec" then
    return (h.neg and "-" or "") .. digits(math.max(h.n, 1), true) .. "." .. digits(math.max(h.f, 1), false)
  elseif k == "float" then
    return string.format("%.6g", sysbench.rand.uniform_double() * 1000)
  elseif k == "str" then
    return "'" .. letters(h.n) .. "'"
  elseif k == "digits" then
    return "'" .. digits(h.n, false) .. "'"
  elseif k == "date" then
    return string.format("'%04d-%02d-%02d'", sysbench.rand.uniform(2020, 2026), sysbench.rand.uniform(1, 12), sysbench.rand.uniform(1, 28))
  elseif k == "datetime" then
    return string.format(
      "'%04d-%02d-%02d %02d:%02d:%02d'",
      sysbench.rand.uniform(2020, 2026), sysbench.rand.uniform(1, 12), sysbench.rand.uniform(1, 28),
      sysbench.rand.uniform(0, 23), sysbench.rand.uniform(0, 59), sysbench.rand.uniform(0, 59)
    )
  elseif k == "time" then
    return string.format("'%02d:%02d:%02d'", sysbench.rand.uniform(0, 23), sysbench.rand.uniform(0, 59), sysbench.rand.uniform(0, 59))
  elseif k == "hex" then
    local t = {}
    for i = 1, math.max(h.n, 1) do
      local d = sysbench.rand.uniform(1, 16)
      t[i] = HEX:sub(d, d)
    end
    return "0x" .. table.concat(t)
  else -- bits
    local t = {}
    for i = 1, math.max(h.n, 1) do
      t[i] = sysbench.rand.uniform(0, 1) == 1 and "1" or "0"
    end
    return "0b" .. table.concat(t)
  end
end

local function text_of(s)
  if type(s) == "string" then
    return s
  end
  local out = {}
  for i, p in ipairs(s) do
    out[i] = type(p) == "string" and p or fill(p)
  end
  return table.concat(out)
end

-- Issue a statement of class c: an error sysbench ignores is counted, not retried.
local function issue(sql, c)
  local ok, err = pcall(con.query, con, sql)
  local counting = count_from ~= nil and now_us() >= count_from
  local id = R.classes[c] and R.classes[c].id or "?"
  if ok then
    if counting then
      ok_n[id] = (ok_n[id] or 0) + 1
    end
    return
  end
  if type(err) == "table" and err.errcode == sysbench.error.RESTART_EVENT then
    if counting then
      err_n[id] = (err_n[id] or 0) + 1
      local no = tostring(err.sql_errno or (err.connection and err.connection.sql_errno) or 0)
      errno_n[no] = (errno_n[no] or 0) + 1
    end
    return
  end
  error(err, 0)
end

-- Sequence mode: the next step of this thread's sessions (a new session opens a new
-- connection when R.reconnect); the step, and whether it starts a session.
local function next_step()
  pos = pos + 1
  local new = false
  if pos > #sessions[si] then
    pos = 1
    si = si % #sessions + 1
    new = true
  end
  return sessions[si][pos], new
end

-- Timed mode: the wait before a step.
local last_start, last_end = nil, nil
local overshoot = 0 -- usleep's mean overshoot (us)
local OVERSHOOT_CAP_US = 2000 -- the most one sleep teaches (us)
local sched = nil -- gap_from "start": when the schedule had the last step start (us)
local deadline = nil -- the run's end (us), with --time
local pending = nil -- the step chosen by the timed loop, issued by event()
local pending_new = false

-- Wait until the step is due; true when it is due after the run's end (waited until then).
local function wait_for(step)
  local base = R.gap_from == "start" and last_start or last_end
  if base == nil then
    return false
  end
  local due = base + (step.g or 0)
  if R.gap_from == "start" then
    -- the captured schedule (start to start) is kept cumulatively: a statement that ran
    -- longer than its gap is made up by the next ones, up to the log's 1 s resolution
    -- (within its second a connection's statements were as close as the log can tell);
    -- a thread further behind than that slides its schedule (it never bursts to catch up)
    sched = math.max((sched or last_start) + (step.g or 0), now_us() - 1e6)
    due = sched
  end
  if deadline and due > deadline then
    local left = deadline - now_us()
    if left >= 1 then
      ffi.C.usleep(math.floor(left))
    end
    return true
  end
  local ask = due - now_us() - overshoot
  if ask >= 1 then
    local t0 = now_us()
    ffi.C.usleep(math.floor(ask))
    -- a stall of the whole host (tens of ms) is not usleep's overshoot: learned whole, it
    -- made the next waits that much short (a 60 ms gap issued after 52.9 ms on a loaded
    -- host); capped, the mean follows usleep's own lateness
    local over = math.min(now_us() - t0 - math.floor(ask), OVERSHOOT_CAP_US)
    overshoot = math.max(0, overshoot + (over - overshoot) / 16)
  end
  -- never early: what the learned overshoot took off beyond this sleep's own is waited now
  local left = due - now_us()
  if left >= 1 then
    ffi.C.usleep(math.floor(left))
  end
  return false
end

if R.timed then
  -- sysbench's own event loop, with the wait before each event
  function thread_run(thread_id)
    local limit = tonumber(sysbench.opt and sysbench.opt.time) or 0
    deadline = limit > 0 and now_us() + limit * 1e6 or nil
    while ffi.C.sb_more_events(thread_id) do
      pending, pending_new = next_step()
      if wait_for(pending) then
        break
      end
      ffi.C.sb_event_start(thread_id)
      local success, ret
      repeat
        success, ret = pcall(event, thread_id)
        if not success then
          if type(ret) == "table" and ret.errcode == sysbench.error.RESTART_EVENT then
            if sysbench.hooks.before_restart_event then
              sysbench.hooks.before_restart_event(ret)
            end
          else
            error(ret, 2)
          end
        end
      until success
      last_end = now_us()
      if ret then
        break
      end
      ffi.C.sb_event_stop(thread_id)
    end
  end
end

function event()
  if sessions then
    local s, new
    if pending then
      s, new = pending, pending_new
      pending = nil
    else
      s, new = next_step()
    end
    if new and R.reconnect then
      connect()
    end
    use(s.schema)
    last_start = now_us()
    issue(text_of(s.sql), s.c)
    return
  end
  if R.session_len and events_in_session > 0 and sysbench.rand.uniform_double() * R.session_len < 1 then
    connect() -- sessions of session_len statements on average (geometric lengths)
  end
  events_in_session = events_in_session + 1
  local ci = deal()
  local c = R.classes[ci]
  use(c.schema)
  local n = #c.sql
  issue(text_of(n == 1 and c.sql[1] or c.sql[sysbench.rand.uniform(1, n)]), ci)
end
