#!/usr/bin/env bash
# `make demo`: from a bare machine to a before/after table. A sandbox MariaDB with the
# distribution's defaults, the probe of this machine and server, then `myaccel accelerate`
# (baseline benchmark, plan, tuned benchmark interleaved with the baseline, verdicts).
set -euo pipefail
cd "$(dirname "$0")/.."
MYACCEL=.venv/bin/myaccel
NAME=${MYACCEL_DEMO_SANDBOX:-demo}
PROFILE=${MYACCEL_DEMO_PROFILE:-quick}

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
echo "== accelerate (profile $PROFILE)"
$MYACCEL accelerate --sandbox "$NAME" --profile "$PROFILE"
echo
echo "The sandbox keeps running on its own defaults: '$MYACCEL sandbox stop $NAME' stops it," \
     "'$MYACCEL sandbox destroy $NAME' removes it."
