-- myaccel_report: machine-readable report lines for sysbench 1.0.x.
--
-- Each report becomes ONE line, written with ONE io.write call (the reporting,
-- checkpoint and main threads share stdout and would interleave otherwise):
--
--   MYACCEL {"v":1,"kind":"interval",...}     every --report-interval
--   MYACCEL {"v":1,"kind":"checkpoint",...}   every --report-checkpoints entry
--   MYACCEL {"v":1,"kind":"summary",...}      once, at the end of the run
--
-- The human-readable reports stay: the hooks first call sysbench's own C
-- reporters (db_report_intermediate / db_report_cumulative, exported by the
-- sysbench binary) through the LuaJIT FFI, so the text is byte-for-byte what
-- sysbench prints without hooks. If the FFI route is unavailable (or
-- MYACCEL_NO_FFI=1 is set, which tests use), both reports fall back to a Lua
-- rendition of the 1.0.20 layout, each written in one io.write (the summary
-- lacks the "Threads fairness" section, whose per-thread data Lua cannot see). Reports run with thread cancellation
-- disabled so that the end of the run cannot cut one in half (see below).
--
-- Field meanings (counts are for the report window of dt seconds; latencies
-- are milliseconds; "pct" is the --percentile rank that lat_ms_pct refers to):
--   t, dt            time since start, length of the window (s)
--   threads          worker threads running (summary: --threads)
--   events, reads, writes, other, errors, reconnects    counts in the window
--   tps, qps, reads_per_s, writes_per_s, other_per_s, err_per_s, reconn_per_s
--   lat_ms_pct, pct  latency percentile over the window
--   lat_ms_min, lat_ms_avg, lat_ms_max, lat_ms_sum     (checkpoint/summary)
--   queue_length, concurrency                          (interval, --rate only)
-- A number that is not finite (e.g. a rate over an empty window) is null.

local M = {}

M.PREFIX = "MYACCEL "
M.SCHEMA = 1

local ffi_ok, ffi = pcall(require, "ffi")
local c_reporters = nil -- nil: not tried yet; false: unavailable; table: ok

-- Layout of sb_stat_t in sysbench 1.0.x (src/sysbench.h). Declared under our
-- own name so that it can never clash with a declaration made by sysbench.
local STAT_CDEF = [[
typedef struct {
  uint32_t threads_running;
  double   time_interval;
  double   time_total;
  double   latency_pct;
  double   latency_min;
  double   latency_max;
  double   latency_avg;
  double   latency_sum;
  uint64_t events;
  uint64_t reads;
  uint64_t writes;
  uint64_t other;
  uint64_t errors;
  uint64_t reconnects;
  uint64_t queue_length;
  uint64_t concurrency;
} myaccel_sb_stat_t;
void db_report_intermediate(myaccel_sb_stat_t *stat);
void db_report_cumulative(myaccel_sb_stat_t *stat);
]]

local function load_c_reporters()
  if c_reporters ~= nil then
    return c_reporters
  end
  c_reporters = false
  if not ffi_ok or os.getenv("MYACCEL_NO_FFI") then
    return c_reporters
  end
  local ok = pcall(ffi.cdef, STAT_CDEF)
  if not ok then
    return c_reporters
  end
  local ok_i, f_i = pcall(function() return ffi.C.db_report_intermediate end)
  local ok_c, f_c = pcall(function() return ffi.C.db_report_cumulative end)
  if ok_i and ok_c then
    c_reporters = { intermediate = f_i, cumulative = f_c }
  end
  return c_reporters
end

local function num(v)
  if type(v) ~= "number" then
    return 0
  end
  return v
end

local function to_c_stat(stat)
  local s = ffi.new("myaccel_sb_stat_t")
  s.threads_running = num(stat.threads_running)
  s.time_interval = num(stat.time_interval)
  s.time_total = num(stat.time_total)
  s.latency_pct = num(stat.latency_pct)
  s.latency_min = num(stat.latency_min)
  s.latency_max = num(stat.latency_max)
  s.latency_avg = num(stat.latency_avg)
  s.latency_sum = num(stat.latency_sum)
  s.events = num(stat.events)
  s.reads = num(stat.reads)
  s.writes = num(stat.writes)
  s.other = num(stat.other)
  s.errors = num(stat.errors)
  s.reconnects = num(stat.reconnects)
  s.queue_length = num(stat.queue_length)
  s.concurrency = num(stat.concurrency)
  return s
end

-- ------------------------------------------------------------ JSON encoding

local function finite(x)
  return type(x) == "number" and x == x and x ~= math.huge and x ~= -math.huge
end

local function json_number(x)
  if not finite(x) then
    return "null"
  end
  if x == math.floor(x) and math.abs(x) < 2 ^ 53 then
    return string.format("%.0f", x)
  end
  return string.format("%.10g", x)
end

local function json_string(s)
  s = tostring(s):gsub('[%c"\\]', function(c)
    if c == '"' then
      return '\\"'
    elseif c == "\\" then
      return "\\\\"
    end
    return string.format("\\u%04x", c:byte())
  end)
  return '"' .. s .. '"'
end

-- Encode an array of {key, value} pairs as a JSON object (keeps key order).
local function json_object(pairs_list)
  local parts = {}
  for i, kv in ipairs(pairs_list) do
    local k, v = kv[1], kv[2]
    local enc
    if type(v) == "number" then
      enc = json_number(v)
    elseif type(v) == "boolean" then
      enc = v and "true" or "false"
    elseif v == nil then
      enc = "null"
    else
      enc = json_string(v)
    end
    parts[i] = json_string(k) .. ":" .. enc
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

M.json_object = json_object

-- --------------------------------------------------------------- records

local function opt(name)
  local o = sysbench.opt
  if type(o) == "table" then
    return o[name]
  end
  return nil
end

local function per_s(count, seconds)
  if not finite(seconds) or seconds <= 0 then
    return nil
  end
  return num(count) / seconds
end

local function ms(seconds)
  if type(seconds) ~= "number" then
    return nil
  end
  return seconds * 1000
end

local function common_fields(kind, stat, threads)
  local dt = stat.time_interval
  local queries = num(stat.reads) + num(stat.writes) + num(stat.other)
  return {
    { "v", M.SCHEMA },
    { "kind", kind },
    { "t", stat.time_total },
    { "dt", dt },
    { "threads", threads },
    { "events", num(stat.events) },
    { "reads", num(stat.reads) },
    { "writes", num(stat.writes) },
    { "other", num(stat.other) },
    { "errors", num(stat.errors) },
    { "reconnects", num(stat.reconnects) },
    { "tps", per_s(stat.events, dt) },
    { "qps", per_s(queries, dt) },
    { "reads_per_s", per_s(stat.reads, dt) },
    { "writes_per_s", per_s(stat.writes, dt) },
    { "other_per_s", per_s(stat.other, dt) },
    { "err_per_s", per_s(stat.errors, dt) },
    { "reconn_per_s", per_s(stat.reconnects, dt) },
    { "lat_ms_pct", ms(stat.latency_pct) },
    { "pct", opt("percentile") },
  }
end

function M.interval_record(stat)
  local f = common_fields("interval", stat, stat.threads_running)
  if num(opt("rate")) > 0 then
    f[#f + 1] = { "queue_length", num(stat.queue_length) }
    f[#f + 1] = { "concurrency", num(stat.concurrency) }
  end
  return json_object(f)
end

-- The final cumulative report runs in the main thread (sysbench.tid 0, no
-- worker left running); checkpoint reports run in a background thread whose
-- id is >= --threads.
function M.is_checkpoint(stat)
  local nthreads = num(opt("threads"))
  return nthreads > 0 and num(sysbench.tid) >= nthreads and num(stat.threads_running) > 0
end

function M.cumulative_record(stat)
  local checkpoint = M.is_checkpoint(stat)
  -- threads_running is 0 once the workers are done: the summary reports --threads.
  local threads = checkpoint and stat.threads_running or opt("threads")
  local f = common_fields(checkpoint and "checkpoint" or "summary", stat, threads)
  f[#f + 1] = { "lat_ms_min", ms(stat.latency_min) }
  f[#f + 1] = { "lat_ms_avg", ms(stat.latency_avg) }
  f[#f + 1] = { "lat_ms_max", ms(stat.latency_max) }
  f[#f + 1] = { "lat_ms_sum", ms(stat.latency_sum) }
  f[#f + 1] = { "workload", M.workload_name }
  f[#f + 1] = { "sysbench", sysbench.version }
  return json_object(f)
end

function M.emit(record)
  io.write(M.PREFIX .. record .. "\n")
  io.stdout:flush()
end

-- ------------------------------------------------------ human-readable text

-- Fallback for the cumulative report when the C reporter cannot be called:
-- the 1.0.20 layout of db_report_cumulative() for the fields Lua can see.
local function lua_cumulative_text(stat)
  local dt = num(stat.time_interval)
  local queries = num(stat.reads) + num(stat.writes) + num(stat.other)
  local function rate(x)
    return dt > 0 and x / dt or 0
  end
  local L = {
    "SQL statistics:",
    "    queries performed:",
    string.format("        read:                            %.0f", num(stat.reads)),
    string.format("        write:                           %.0f", num(stat.writes)),
    string.format("        other:                           %.0f", num(stat.other)),
    string.format("        total:                           %.0f", queries),
    string.format("    transactions:                        %-6.0f (%.2f per sec.)",
      num(stat.events), rate(num(stat.events))),
    string.format("    queries:                             %-6.0f (%.2f per sec.)",
      queries, rate(queries)),
    string.format("    ignored errors:                      %-6.0f (%.2f per sec.)",
      num(stat.errors), rate(num(stat.errors))),
    string.format("    reconnects:                          %-6.0f (%.2f per sec.)",
      num(stat.reconnects), rate(num(stat.reconnects))),
    "",
    "General statistics:",
    string.format("    total time:                          %.4fs", num(stat.time_total)),
    string.format("    total number of events:              %.0f", num(stat.events)),
    "",
    "Latency (ms):",
    string.format("         min: %39.2f", num(stat.latency_min) * 1000),
    string.format("         avg: %39.2f", num(stat.latency_avg) * 1000),
    string.format("         max: %39.2f", num(stat.latency_max) * 1000),
    string.format("         %dth percentile: %27.2f", num(opt("percentile")),
      num(stat.latency_pct) * 1000),
    string.format("         sum: %39.2f", num(stat.latency_sum) * 1000),
    "",
  }
  return table.concat(L, "\n") .. "\n"
end

-- Fallback for the intermediate report: the layout of db_report_intermediate()
-- in ONE io.write. (sysbench.report_default() is not used: it prints
-- "err/s" without the colon and uses print(), which writes the newline
-- separately, so a checkpoint report can land in the middle of the line.)
local function lua_intermediate_text(stat)
  local dt = num(stat.time_interval)
  local function rate(x)
    return dt > 0 and num(x) / dt or 0
  end
  local t = string.format("[ %.0fs ] ", num(stat.time_total))
  local text = t .. string.format(
    "thds: %d tps: %4.2f qps: %4.2f (r/w/o: %4.2f/%4.2f/%4.2f) lat (ms,%d%%): %4.2f " ..
      "err/s: %4.2f reconn/s: %4.2f\n",
    num(stat.threads_running), rate(stat.events),
    rate(num(stat.reads) + num(stat.writes) + num(stat.other)),
    rate(stat.reads), rate(stat.writes), rate(stat.other),
    num(opt("percentile")), num(stat.latency_pct) * 1000,
    rate(stat.errors), rate(stat.reconnects))
  if num(opt("rate")) > 0 then
    text = text .. t .. string.format("queue length: %d, concurrency: %d\n",
      num(stat.queue_length), num(stat.concurrency))
  end
  return text
end

-- The human lines of one report (kind: "intermediate" or "cumulative"): sysbench's own C
-- reporter when it can be loaded, else the Lua copy of its layout.
local function human_report(kind, lua_text)
  return function(stat)
    local c = load_c_reporters()
    if c then
      c[kind](to_c_stat(stat))
    else
      io.write(lua_text(stat))
    end
  end
end

-- ------------------------------------------------------------------ hooks

-- sysbench cancels the reporting thread (pthread_cancel) when the run ends; a
-- cancellation point inside a report (the write() behind a flush) could cut it
-- between the human line and the MYACCEL line. Reports therefore run with
-- cancellation disabled; a pending cancel takes effect at the thread's next
-- cancellation point, after the report is complete.
local cancel_guard = nil -- nil: not tried; false: unavailable; else the C function

local function load_cancel_guard()
  if cancel_guard ~= nil then
    return cancel_guard
  end
  cancel_guard = false
  if ffi_ok then
    pcall(ffi.cdef, "int pthread_setcancelstate(int state, int *oldstate);")
    local ok, f = pcall(function() return ffi.C.pthread_setcancelstate end)
    if ok then
      cancel_guard = f
    end
  end
  return cancel_guard
end

local PTHREAD_CANCEL_DISABLE = 1 -- glibc

local function without_cancellation(fn, stat)
  local guard = load_cancel_guard()
  local old = nil
  if guard then
    old = ffi.new("int[1]")
    if guard(PTHREAD_CANCEL_DISABLE, old) ~= 0 then
      old = nil
    end
  end
  pcall(fn, stat)
  if old then
    guard(old[0], nil)
  end
end

-- A report hook printing sysbench's human lines, then emitting the MYACCEL record. Each
-- part is protected: a failure in one must not lose the other.
local function report_hook(human, record)
  local function report(stat)
    pcall(human, stat)
    local ok, rec = pcall(record, stat)
    if ok then
      M.emit(rec)
    end
  end
  return function(stat)
    without_cancellation(report, stat)
  end
end

M.report_intermediate =
  report_hook(human_report("intermediate", lua_intermediate_text), M.interval_record)
M.report_cumulative =
  report_hook(human_report("cumulative", lua_cumulative_text), M.cumulative_record)

function M.install()
  sysbench.hooks.report_intermediate = M.report_intermediate
  sysbench.hooks.report_cumulative = M.report_cumulative
  M.instrument()
end

-- ------------------------------------------------- what each thread ran

-- Issue 35, defect 3: a rare run of oltp_read_write / oltp_write_only made no DELETE and no
-- INSERT at all (the server's own row counters agree). To tell where they went, each worker
-- thread counts its events and its calls of the workload's statement groups, and at its end
-- prints one line with those counts and the options it ran with:
--
--   MYACCEL {"v":1,"kind":"thread","tid":0,"events":567,"opt.delete_inserts":1,...,
--            "calls.execute_delete_inserts":567,...}
--
-- The groups are the global functions of sysbench's oltp_common.lua that a workload's
-- event() calls by name; a workload without them (or a script of one's own) gets only the
-- events. The wrappers add one Lua call per group and event.
M.GROUPS = {
  "execute_point_selects", "execute_simple_ranges", "execute_sum_ranges",
  "execute_order_ranges", "execute_distinct_ranges", "execute_index_updates",
  "execute_non_index_updates", "execute_delete_inserts",
}
M.OPTIONS = {
  "point_selects", "simple_ranges", "sum_ranges", "order_ranges", "distinct_ranges",
  "index_updates", "non_index_updates", "delete_inserts", "range_selects", "skip_trx",
  "auto_inc", "secondary",
}

local function counted(fn, counts, name)
  return function(...)
    counts[name] = counts[name] + 1
    return fn(...)
  end
end

function M.thread_record(counts, events)
  local f = { { "v", M.SCHEMA }, { "kind", "thread" }, { "tid", num(sysbench.tid) },
              { "events", events } }
  for _, name in ipairs(M.OPTIONS) do
    local v = opt(name)
    if v ~= nil then
      f[#f + 1] = { "opt." .. name, v }
    end
  end
  for _, name in ipairs(M.GROUPS) do
    if counts[name] ~= nil then
      f[#f + 1] = { "calls." .. name, counts[name] }
    end
  end
  return json_object(f)
end

function M.instrument()
  local counts, events = {}, 0
  for _, name in ipairs(M.GROUPS) do
    local fn = rawget(_G, name)
    if type(fn) == "function" then
      counts[name] = 0
      _G[name] = counted(fn, counts, name)
    end
  end
  local event = rawget(_G, "event")
  if type(event) ~= "function" then
    return
  end
  _G.event = function(...)
    events = events + 1
    return event(...)
  end
  local done = rawget(_G, "thread_done")
  _G.thread_done = function(...)
    pcall(function() M.emit(M.thread_record(counts, events)) end)
    if type(done) == "function" then
      return done(...)
    end
  end
end

-- ------------------------------------------------------ workload loading

M.ENV_WORKLOAD = "MYACCEL_WORKLOAD"
M.OPTION = "myaccel-workload"

-- The workload named on the command line (--myaccel-workload=X) or in the
-- environment (MYACCEL_WORKLOAD=X); the command line wins.
function M.requested_workload()
  local argv = sysbench.cmdline and sysbench.cmdline.argv
  if type(argv) == "table" then
    for _, a in pairs(argv) do
      local v = tostring(a):match("^%-%-myaccel[-_]workload=(.+)$")
      if v then
        return v
      end
    end
  end
  local env = os.getenv(M.ENV_WORKLOAD)
  if env and env ~= "" then
    return env
  end
  return nil
end

-- Resolve a workload name (oltp_read_only) or path (/x/y.lua) to a file.
function M.resolve_workload(name)
  if name:find("/", 1, true) then
    return name
  end
  local mod = name:gsub("%.lua$", "")
  if package.searchpath then
    local found = package.searchpath(mod, package.path)
    if found then
      return found
    end
  end
  for tmpl in package.path:gmatch("[^;]+") do
    local cand = tmpl:gsub("%?", mod)
    local fh = io.open(cand, "r")
    if fh then
      fh:close()
      return cand
    end
  end
  return nil
end

function M.load_workload()
  local name = M.requested_workload()
  if not name then
    error("myaccel wrapper: no workload given; set " .. M.ENV_WORKLOAD ..
      "=oltp_read_only (or a path to a .lua script) or pass --" .. M.OPTION .. "=...", 0)
  end
  local path = M.resolve_workload(name)
  if not path then
    error("myaccel wrapper: workload '" .. name .. "' not found in " .. package.path, 0)
  end
  M.workload_name = (path:match("([^/]+)%.lua$")) or name
  dofile(path)
  -- Accept --myaccel-workload=... when the workload declares its options.
  if type(sysbench.cmdline.options) == "table" then
    sysbench.cmdline.options.myaccel_workload =
      { "Workload script run by the myaccel wrapper (name or path)", name }
  end
  M.pin_option_defaults()
  return path
end

-- ------------------------------------------- option defaults kept alive
--
-- Issue 35, defect 3, found: sysbench 1.0.20 reads a workload's options
-- (sysbench.cmdline.read_cmdline_options, built into the binary) by storing,
-- for an option whose default is a number, tostring(default) in the
-- `const char *value` of an FFI struct, and copies those strings in C only
-- after the loop over every option. The FFI keeps no reference to a Lua
-- string whose pointer it stores, so the string made by tostring() belongs
-- to nothing: a garbage-collector cycle ending inside that loop frees it,
-- and the copy then reads whatever took its memory. The default becomes 0
-- (or garbage) in C, and every worker thread gets that value for the whole
-- run: oltp_read_write with delete_inserts = 0 makes 18 statements per
-- transaction, no DELETE and no INSERT, which is what the rare "not the
-- workload asked for" runs did. The options are read in sorted order and
-- delete_inserts is the first number: the options read before the collection
-- lose their string, those after get a fresh one. oltp_write_only's odd runs
-- of 4 and 3 statements are delete_inserts lost, then index_updates too.
--
-- Measured with sysbench's own loader (a probe wrapper counting the
-- collector's cycles): the first cycle ends after the workload is loaded and
-- before init(), the read lying in between, in 62 of 400 starts; a workload
-- that makes the collector run constantly gets every numeric default as 0
-- (`help` prints "[(]"). Lua strings are interned, so holding the same strings here keeps
-- them alive: tostring() inside sysbench returns these very objects (and this
-- module stays referenced from package.loaded for the life of the state).
M.pinned_defaults = {}

function M.pin_option_defaults()
  local options = sysbench.cmdline.options
  if type(options) ~= "table" then
    return
  end
  for _, def in pairs(options) do
    if type(def) == "table" then
      local default = def[2]
      if type(default) == "number" then
        M.pinned_defaults[#M.pinned_defaults + 1] = tostring(default)
      elseif type(default) == "table" then
        M.pinned_defaults[#M.pinned_defaults + 1] = table.concat(default, ",")
      end
    end
  end
end

return M
