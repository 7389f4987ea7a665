#!/usr/bin/env bash
# Install the Debian/Ubuntu packages myaccel and its tests need, but only those whose
# command is missing: a machine that already has everything is left alone (no apt at all).
set -euo pipefail

# command-to-check : package providing it
needs=(
  "python3:python3"
  "mariadbd:mariadb-server"
  "mariadb-install-db:mariadb-server"
  "mariadb:mariadb-client"
  "sysbench:sysbench"
  "perf:linux-perf"
  "numactl:numactl"
  "valgrind:valgrind"
  "aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu"
  "aarch64-linux-gnu-objdump:binutils-aarch64-linux-gnu"
  "qemu-aarch64:qemu-user"
  "mysqltuner:mysqltuner"
  "ethtool:ethtool"
  "fio:fio"                                    # storage measured for the I/O rules (facts/iomeasure.py)
  "gcc:gcc"
  "make:make"
  "g++:g++"                                    # myaccel build (kvlab fixture, tests/integration/test_build_fixture.py)
  "cmake:cmake"
  "ninja:ninja-build"
  "aarch64-linux-gnu-g++:g++-aarch64-linux-gnu" # cross builds of the fixture (atomics classes)
  "chromium:chromium"   # headless check of report.html (tests/integration/test_report_chromium.py)
  "mariadb-backup:mariadb-backup"   # myaccel clone of a MariaDB server (hot copy: --backup, --prepare)
)

missing=()
for pair in "${needs[@]}"; do
  cmd=${pair%%:*}; pkg=${pair##*:}
  if ! command -v "$cmd" >/dev/null 2>&1 && ! [ -x "/usr/sbin/$cmd" ]; then
    case " ${missing[*]-} " in *" $pkg "*) ;; *) missing+=("$pkg");; esac
  fi
done
# BOLT (myaccel build --opt bolt): Debian's bolt-16 puts llvm-bolt under /usr/lib/llvm-16/bin.
# Only where the distribution has it (Debian 12); elsewhere the BOLT stage skips with its reason.
if ! compgen -G "/usr/lib/llvm-*/bin/llvm-bolt" >/dev/null && ! command -v llvm-bolt >/dev/null 2>&1 \
   && apt-cache show bolt-16 >/dev/null 2>&1; then
  missing+=("bolt-16")
fi
# python3 -m venv needs ensurepip, shipped separately on Debian.
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  missing+=("python3-venv")
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: all present"
  exit 0
fi

echo "system packages missing: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
  else
    echo "error: installing packages needs root; run as root or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# The server package may try to start the distribution's own mariadb service; myaccel never
# uses it (sandboxes have their own datadir, socket and port), so a refusal there is harmless.
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "system packages: installed ${missing[*]}"
