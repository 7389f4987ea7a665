#!/usr/bin/env bash
# Install what `myaccel profile` needs beyond apt packages, only when missing:
# inferno (inferno-collapse-perf, inferno-flamegraph), the maintained Rust port of the
# FlameGraph scripts, built from crates.io into the project's venv (.venv/bin).
#
# Debug symbols: Debian's mariadbd is stripped and its -dbgsym package lives in the
# debian-debug archive, which this environment cannot reach (HTTP 400 through the proxy,
# no debuginfod). perf resolves mariadbd frames from the binary's .dynsym (the SQL layer
# is exported; InnoDB internals are not): see docs/profiling.md.
set -euo pipefail

INFERNO_VERSION=0.12.8   # keep in step with myaccel.profile.record.INFERNO_VERSION
cd "$(dirname "$0")/.."
ROOT="${INFERNO_ROOT:-$PWD/.venv}"

have() { [ -x "$ROOT/bin/$1" ] || command -v "$1" >/dev/null 2>&1; }

if have inferno-collapse-perf && have inferno-flamegraph; then
  echo "inferno: present"
  exit 0
fi

# Built once per machine: a fresh clone copies the binaries from here instead of compiling
# them again (a few minutes of two CPUs in every clean-clone CI run).
CACHE="${MYACCEL_TOOLS_CACHE:-/opt/myaccel/tools}/inferno-$INFERNO_VERSION"
copy_from_cache() {
  [ -x "$CACHE/bin/inferno-collapse-perf" ] && [ -x "$CACHE/bin/inferno-flamegraph" ] || return 1
  mkdir -p "$ROOT/bin"
  cp "$CACHE/bin/inferno-collapse-perf" "$CACHE/bin/inferno-flamegraph" "$ROOT/bin/"
  echo "inferno: $INFERNO_VERSION copied from $CACHE"
}
copy_from_cache && exit 0

CARGO="$(command -v cargo || true)"
[ -n "$CARGO" ] || CARGO="${CARGO_HOME:-$HOME/.cargo}/bin/cargo"
if [ ! -x "$CARGO" ]; then
  # Not fatal: everything but the flame graph works without it (`myaccel profile` says so).
  echo "warning: inferno (flame graphs) is missing and cargo is not installed; install Rust" >&2
  echo "  (https://rustup.rs) and run: cargo install inferno --locked --version $INFERNO_VERSION --root $ROOT" >&2
  exit 0
fi
echo "inferno: building $INFERNO_VERSION from crates.io into $CACHE (a few minutes, once per machine)"
if mkdir -p "$CACHE" 2>/dev/null && [ -w "$CACHE" ]; then
  BUILD="$CACHE.partial"
  rm -rf "$BUILD"
  nice -n 10 "$CARGO" install inferno --locked --version "$INFERNO_VERSION" --root "$BUILD" --force -q
  mkdir -p "$CACHE/bin"
  cp "$BUILD/bin/inferno-collapse-perf" "$BUILD/bin/inferno-flamegraph" "$CACHE/bin/"
  rm -rf "$BUILD"
  copy_from_cache
else  # no writable cache (not root): straight into the venv, as before
  mkdir -p "$ROOT"
  nice -n 10 "$CARGO" install inferno --locked --version "$INFERNO_VERSION" --root "$ROOT" --force -q
  rm -f "$ROOT/.crates.toml" "$ROOT/.crates2.json"
  echo "inferno: installed $INFERNO_VERSION in $ROOT/bin"
fi
