#!/usr/bin/env bash
# Install MariaDB 11.8 LTS (Debian sid's mariadb-server-core) so that myaccel's sandboxes, tests
# and catalog checks can run it next to Debian 12's MariaDB 10.11, only when it is missing.
#
# It uses the minimal sid tree that scripts/ensure-mysql.sh bootstraps ($ROOT/sid) but does NOT
# install into it: in sid, mariadb-server-core Conflicts/Replaces mysql-server-core (measured:
# `apt-get -s install mariadb-server-core` in the tree removes mysql-server-core and
# mysql-client-core), so the two servers cannot share one dpkg database. Instead:
#   1. apt in the sid tree, with a private package list, names the packages the tree lacks
#      for mariadb-server-core + mariadb-client-core (`apt-get -s install`: the Inst lines)
#      and downloads them (`apt-get download`; about 15 MB);
#   2. `dpkg-deb -x` extracts them into $PREFIX/root (nothing is installed; the tree's dpkg
#      database and files are unchanged);
#   3. the install prefix runs from the host, like $ROOT/mysql-9.7:
#        sbin/mariadbd, bin/my_print_defaults, resolveip, mariadb, mariadb-upgrade, mariadb-check
#              copies whose ELF interpreter is sid's and whose DT_RPATH is $PREFIX/root's libraries, then the
#              sid tree's (patchelf; DT_RPATH also serves the plugins' dlopen);
#        bin/mariadb-install-db   the package's script;
#        share                    a link to $PREFIX/root/usr/share (share/mariadb/...);
#        lib/plugin               empty (server-core has no server plugins; never the host's),
#                                 lib/mysql/plugin a link to it (mariadb-install-db's path).
# `myaccel sandbox init NAME --flavor mariadb --version 11.8` finds that prefix (or pass
# --basedir $ROOT/mariadb-11.8).
#
# ROOT defaults to /opt/myaccel (override with MYACCEL_MYSQL_ROOT, as for MySQL). Idempotent: a
# prefix whose mariadbd answers --version is left alone. Needs root (chroot); without root it
# warns and exits 0 (the MariaDB 11.8 tests then skip).
set -euo pipefail

ROOT="${MYACCEL_MYSQL_ROOT:-/opt/myaccel}"
SID="$ROOT/sid"
SERIES=11.8
PREFIX="$ROOT/mariadb-$SERIES"
PACKAGES="mariadb-server-core mariadb-client-core"

version_of() { "$1" --version | sed 's/.*Ver \([^ ]*\).*/\1/'; }

if [ -x "$PREFIX/sbin/mariadbd" ] && "$PREFIX/sbin/mariadbd" --version >/dev/null 2>&1; then
  echo "mariadb: present ($(version_of "$PREFIX/sbin/mariadbd") in $PREFIX)"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "warning: MariaDB $SERIES is not installed and installing it needs root (chroot into $SID);" >&2
  echo "  run: sudo bash $0   (until then the MariaDB $SERIES tests are skipped)" >&2
  exit 0
fi
if [ ! -x "$SID/usr/bin/apt-get" ]; then
  # the sid tree comes with the MySQL install (debootstrap); make it first
  bash "$(dirname "$0")/ensure-mysql.sh"
fi
if ! command -v patchelf >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends patchelf >/dev/null \
    || { echo "error: cannot install patchelf with apt-get; run apt-get update first" >&2; exit 1; }
fi

start=$(date +%s)
work="/tmp/myaccel-mariadb-$$"          # inside the sid tree: $SID$work
trap 'rm -rf "$SID$work" "$PREFIX.tmp"' EXIT
mkdir -p "$SID$work/lists/partial" "$SID$work/debs"
echo 'Acquire::Check-Valid-Until "false";' >"$SID/etc/apt/apt.conf.d/99myaccel-no-valid-until"
echo "mariadb: downloading $PACKAGES and the libraries the sid tree lacks (about 10 s)"
# shellcheck disable=SC2016  # expanded inside the chroot
if ! chroot "$SID" sh -c '
    set -e
    o="-o Dir::State::Lists='"$work"'/lists -q"
    apt-get $o update
    pkgs=$(apt-get $o -s install --no-install-recommends '"$PACKAGES"' | awk "/^Inst /{print \$2}")
    echo "packages: $pkgs"
    cd '"$work"'/debs && apt-get $o download $pkgs' >"$ROOT/mariadb-install.log" 2>&1; then
  echo "error: downloading $PACKAGES in the sid tree failed (see $ROOT/mariadb-install.log)" >&2
  echo "hint: check that the Debian archive is reachable (the tree's sources.list)" >&2
  exit 1
fi

rm -rf "$PREFIX.tmp"
mkdir -p "$PREFIX.tmp/bin" "$PREFIX.tmp/sbin" "$PREFIX.tmp/lib/mysql" "$PREFIX.tmp/root"
for deb in "$SID$work"/debs/*.deb; do
  dpkg-deb -x "$deb" "$PREFIX.tmp/root"
done
R="$PREFIX.tmp/root"
if [ ! -x "$R/usr/sbin/mariadbd" ]; then
  echo "error: the downloaded packages hold no usr/sbin/mariadbd (see $ROOT/mariadb-install.log)" >&2
  exit 1
fi
interp=$(patchelf --print-interpreter "$R/usr/sbin/mariadbd")   # /lib64/ld-linux-x86-64.so.2, ...
triple=$(basename "$(ls -d "$SID"/usr/lib/*-linux-gnu | head -n 1)")  # x86_64-linux-gnu, aarch64-linux-gnu
# the final paths (the prefix is renamed into place below)
rpath="$PREFIX/root/usr/lib/$triple:$PREFIX/root/lib/$triple:$SID/usr/lib/$triple:$SID/lib/$triple"
for exe in usr/sbin/mariadbd usr/bin/my_print_defaults usr/bin/resolveip usr/bin/mariadb \
    usr/bin/mariadb-upgrade usr/bin/mariadb-check; do
  [ -f "$R/$exe" ] || continue
  dest="$PREFIX.tmp/${exe#usr/}"   # sbin/mariadbd (where mariadb-install-db --basedir looks), bin/...
  cp "$R/$exe" "$dest"
  patchelf --set-interpreter "$SID$interp" --force-rpath --set-rpath "$rpath" "$dest"
done
cp "$R/usr/bin/mariadb-install-db" "$PREFIX.tmp/bin/mariadb-install-db"
ln -s "$PREFIX/root/usr/share" "$PREFIX.tmp/share"   # share/mariadb, as mariadb-install-db looks
# server-core ships no server plugins (they are in mariadb-plugin-*): an empty plugin
# directory of its own, so that 11.8 never loads the host's 10.11 plugins (/usr/lib/mysql/plugin)
if [ -d "$R/usr/lib/mysql/plugin" ]; then
  ln -s "$PREFIX/root/usr/lib/mysql/plugin" "$PREFIX.tmp/lib/plugin"
else
  mkdir -p "$PREFIX.tmp/lib/plugin"
fi
ln -s ../plugin "$PREFIX.tmp/lib/mysql/plugin"   # where mariadb-install-db --basedir looks
rm -rf "$PREFIX"
mv "$PREFIX.tmp" "$PREFIX"
"$PREFIX/sbin/mariadbd" --version >/dev/null
echo "mariadb: $(version_of "$PREFIX/sbin/mariadbd") ready in $PREFIX" \
     "($(( $(date +%s) - start )) s, $(du -sh "$PREFIX" | cut -f1) on disk)"
