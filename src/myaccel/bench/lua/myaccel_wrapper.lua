#!/usr/bin/env sysbench
-- myaccel wrapper: runs any sysbench workload with machine-readable reports.
--
--   MYACCEL_WORKLOAD=oltp_read_only sysbench /path/to/myaccel_wrapper.lua [options] run
--   sysbench /path/to/myaccel_wrapper.lua --myaccel-workload=oltp_read_only [options] run
--
-- The workload is a built-in name (found on sysbench's package.path, e.g.
-- /usr/share/sysbench) or a path to a .lua script. All of the workload's own
-- options and commands (prepare, run, cleanup, prewarm, help) work unchanged;
-- see myaccel_report.lua for the line format.

-- Find myaccel_report.lua next to this script, whatever the current directory.
local script = (sysbench.cmdline and sysbench.cmdline.script_path) or ""
local here = script:match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path

local report = require("myaccel_report")
report.load_workload()
report.install()
