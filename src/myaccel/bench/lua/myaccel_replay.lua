-- myaccel_replay: replays a captured statement mix with sysbench 1.0.x.
--
-- A script written by myaccel (bench/replay.py) sets the global MYACCEL_REPLAY, then runs
-- this file. Every statement in it passed myaccel's check of what a replay may issue
-- (capture/sqlguard.py: one DML statement each, on the captured schemas); names = "utf8mb4"
-- when one of them holds text outside ASCII (each connection then says SET NAMES):
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
--
-- Timed mode (sequence mode plus MYACCEL_REPLAY.timed = true, gap_from = "end" or "start",
-- and g = MICROSECONDS in each step): before a statement the thread waits until g after the
-- end (gap_from "end": the captured client's time between statements) or the start
-- (gap_from "start": the captured schedule, kept cumulatively and made up within the
-- log's 1 s resolution) of the previous statement it issued, or not at all when that time
-- has passed (closed loop: a slower server makes the thread fall behind). The wait is outside sysbench's event, so an event's latency
-- is the statement's alone; usleep's overshoot is measured and taken off later waits. A
-- thread's first statement is issued at once; when its trace starts again, its first step
-- waits that step's g (0: a trace's first statement has no captured gap). A wait that
-- would end after the run's --time ends the thread instead (a long idle gap does not
-- hold the run past its end).

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
  if R.names then
    -- statements outside ASCII: read as the UTF-8 they are (set by myaccel, not the file)
    con:query("SET NAMES " .. R.names)
  end
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
    con:query("USE `" .. (name:gsub("`", "``")) .. "`")
    schema = name
  end
end

-- Timed mode: the clock (microseconds, CLOCK_MONOTONIC) and the wait before a step.
local ffi = require("ffi")
local now_us = nil
local last_start, last_end = nil, nil
local overshoot = 0 -- usleep's mean overshoot (us)
local sched = nil -- gap_from "start": when the schedule had the last step start (us)
local deadline = nil -- the run's end (us), with --time

if R.timed then
  pcall(ffi.cdef, "struct timespec { long tv_sec; long tv_nsec; };")
  pcall(ffi.cdef, "int clock_gettime(int clk_id, struct timespec *tp);")
  pcall(ffi.cdef, "int usleep(unsigned int usec);")
  local ts = ffi.new("struct timespec")
  now_us = function()
    ffi.C.clock_gettime(1, ts)
    return tonumber(ts.tv_sec) * 1e6 + tonumber(ts.tv_nsec) / 1e3
  end
end

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
    local over = now_us() - t0 - math.floor(ask)
    overshoot = math.max(0, overshoot + (over - overshoot) / 16)
  end
  return false
end

if R.timed then
  -- sysbench's own event loop, with the wait before each event
  function thread_run(thread_id)
    local limit = tonumber(sysbench.opt and sysbench.opt.time) or 0
    deadline = limit > 0 and now_us() + limit * 1e6 or nil
    while ffi.C.sb_more_events(thread_id) do
      if wait_for(trace[pos % #trace + 1]) then
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
  if trace then
    pos = pos % #trace + 1
    local s = trace[pos]
    use(s.schema)
    if now_us then
      last_start = now_us()
    end
    con:query(s.sql)
    return
  end
  local c = class_at(sysbench.rand.uniform(1, total))
  use(c.schema)
  local n = #c.sql
  local sql = n == 1 and c.sql[1] or c.sql[sysbench.rand.uniform(1, n)]
  con:query(sql)
end
