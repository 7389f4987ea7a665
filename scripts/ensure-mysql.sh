#!/usr/bin/env bash
# Install MySQL 9.7 (Debian sid's mysql-server-core) so that myaccel's sandboxes, tests and demo
# can run a real MySQL next to the distribution's MariaDB, only when it is missing.
#
# Debian 12 ships MariaDB only. Debian sid has MySQL 9.7 LTS, built against sid's newer glibc,
# so it cannot run on the host's libraries. This script:
#   1. bootstraps a minimal sid tree with debootstrap          -> $ROOT/sid      (~30 s, ~230 MB)
#   2. installs mysql-server-core and mysql-client-core in it   -> (~10 s, ~55 MB)
#   3. makes an install prefix that runs from the host          -> $ROOT/mysql-9.7
#        bin/mysqld   a copy of sid's mysqld whose ELF interpreter and DT_RPATH point into the
#                     sid tree (patchelf), so the process is named mysqld and its plugins
#                     (dlopen) find sid's libraries too (DT_RPATH applies to them; DT_RUNPATH
#                     would not);
#        share, lib/plugin   links into the sid tree.
# `myaccel sandbox init NAME --flavor mysql` finds that prefix (or --basedir $ROOT/mysql-9.7).
#
# ROOT defaults to /opt/myaccel (override with MYACCEL_MYSQL_ROOT). Idempotent: a prefix whose
# mysqld answers --version is left alone. Needs root (debootstrap, chroot).
set -euo pipefail

ROOT="${MYACCEL_MYSQL_ROOT:-/opt/myaccel}"
SID="$ROOT/sid"
PREFIX="$ROOT/mysql-9.7"
MIRROR="${MYACCEL_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if [ -x "$PREFIX/bin/mysqld" ] && "$PREFIX/bin/mysqld" --version >/dev/null 2>&1; then
  echo "mysql: present ($("$PREFIX/bin/mysqld" --version | sed 's/.*Ver \([^ ]*\).*/\1/') in $PREFIX)"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  # Not fatal for a developer without root: the MySQL tests skip (CI runs as root and fails them).
  echo "warning: MySQL 9.7 is not installed and installing it needs root (debootstrap, chroot);" >&2
  echo "  run: sudo bash $0   (until then the MySQL tests are skipped)" >&2
  exit 0
fi
for tool in debootstrap patchelf; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$tool" >/dev/null \
      || { echo "error: cannot install $tool with apt-get; run apt-get update first" >&2; exit 1; }
  fi
done

start=$(date +%s)
mkdir -p "$ROOT"
if [ ! -x "$SID/usr/bin/apt-get" ]; then
  echo "mysql: bootstrapping a minimal Debian sid tree in $SID (about 30 s)"
  rm -rf "$SID"
  if ! debootstrap --variant=minbase sid "$SID" "$MIRROR" >"$ROOT/debootstrap.log" 2>&1; then
    echo "error: debootstrap of Debian sid from $MIRROR failed (see $ROOT/debootstrap.log)" >&2
    echo "hint: check that the Debian archive is reachable, or set MYACCEL_DEBIAN_MIRROR" >&2
    exit 1
  fi
fi
# The archive's sid snapshot may be frozen with an expired Release file.
echo 'Acquire::Check-Valid-Until "false";' >"$SID/etc/apt/apt.conf.d/99myaccel-no-valid-until"
if [ ! -x "$SID/usr/sbin/mysqld" ]; then
  echo "mysql: installing mysql-server-core and mysql-client-core in the sid tree (about 10 s)"
  mounted=0
  if ! mountpoint -q "$SID/proc"; then mount --bind /proc "$SID/proc" && mounted=1; fi
  trap '[ "$mounted" = 1 ] && umount "$SID/proc" || true' EXIT
  chroot "$SID" sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      --no-install-recommends mysql-server-core mysql-client-core && apt-get clean && rm -rf /var/lib/apt/lists/*' \
      >"$ROOT/mysql-install.log" 2>&1 || {
    echo "error: apt-get install mysql-server-core in the sid tree failed (see $ROOT/mysql-install.log)" >&2
    exit 1
  }
  [ "$mounted" = 1 ] && umount "$SID/proc"
  mounted=0
fi

rm -rf "$PREFIX.tmp"
mkdir -p "$PREFIX.tmp/bin" "$PREFIX.tmp/lib"
cp "$SID/usr/sbin/mysqld" "$PREFIX.tmp/bin/mysqld"
interp=$(patchelf --print-interpreter "$SID/usr/sbin/mysqld")   # /lib64/ld-linux-x86-64.so.2, ...
triple=$(basename "$(ls -d "$SID"/usr/lib/*-linux-gnu | head -n 1)")  # x86_64-linux-gnu, aarch64-linux-gnu
patchelf --set-interpreter "$SID$interp" \
  --force-rpath --set-rpath "$SID/usr/lib/$triple:$SID/lib/$triple" "$PREFIX.tmp/bin/mysqld"
ln -s "$SID/usr/share/mysql" "$PREFIX.tmp/share"
ln -s "$SID/usr/lib/mysql/plugin" "$PREFIX.tmp/lib/plugin"
"$PREFIX.tmp/bin/mysqld" --version >/dev/null
rm -rf "$PREFIX"
mv "$PREFIX.tmp" "$PREFIX"
echo "mysql: $("$PREFIX/bin/mysqld" --version | sed 's/.*Ver \([^ ]*\).*/\1/') ready in $PREFIX" \
     "($(( $(date +%s) - start )) s, $(du -sh "$ROOT" | cut -f1) on disk)"
