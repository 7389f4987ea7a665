#!/usr/bin/env bash
# `make demo`: a sandbox MariaDB from the distribution's binaries, the probe of this
# machine and server, and a short sysbench smoke run. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
MYACCEL=.venv/bin/myaccel
NAME=${MYACCEL_DEMO_SANDBOX:-demo}

echo "== sandbox '$NAME'"
if $MYACCEL sandbox status "$NAME" >/dev/null 2>&1; then
  $MYACCEL sandbox start "$NAME"
else
  $MYACCEL sandbox init "$NAME"
fi

echo
echo "== probe"
$MYACCEL probe --sandbox "$NAME"

echo
echo "== sysbench smoke run (read-only and read-write, 8 threads, 15 s each)"
$MYACCEL bench --sandbox "$NAME" --profile quick --runs 1 --time 15 --warmup 3
echo
echo "The sandbox keeps running: stop it with '$MYACCEL sandbox stop $NAME'," \
     "remove it with '$MYACCEL sandbox destroy $NAME'."
