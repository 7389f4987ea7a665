#!/usr/bin/env bash
# Acceptance of the arm64 package on this x86-64 host (docs/packaging.md): lists its
# aarch64 extension modules, then runs `myaccel --version` (and imports the compiled
# libraries) from the unpacked package under qemu-user, on Debian 12's own arm64 python3.
#
#   bash packaging/arm64-smoke.sh dist/myaccel_0.1.0_arm64.deb [WORKDIR]
#
# The arm64 Python comes from Debian's packages (apt-get download, dpkg-deb -x: nothing is
# installed, no chroot, no binfmt_misc); they are cached under WORKDIR/debs. Needs arm64 as
# a dpkg foreign architecture (dpkg --add-architecture arm64; apt-get update) and qemu-user.
set -euo pipefail

deb=$(readlink -f "${1:?usage: $0 myaccel_VERSION_arm64.deb [WORKDIR]}")
work=${2:-${MYACCEL_HOME:-$HOME/.local/share/myaccel}/arm64-smoke}
qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)
[ -n "$qemu" ] || { echo "error: no qemu-aarch64 (apt-get install qemu-user-static)" >&2; exit 4; }
dpkg --print-foreign-architectures | grep -qx arm64 \
  || { echo "error: dpkg has no arm64 architecture: dpkg --add-architecture arm64 && apt-get update" >&2; exit 4; }

# Debian 12's python3 for arm64 and the libraries it and the bundled wheels link (the
# closure of `apt-cache depends --recurse python3-minimal libpython3.11-stdlib`, less
# dpkg, perl and tar, which running python needs not).
packages=(
  python3-minimal python3.11-minimal libpython3.11-minimal libpython3.11-stdlib
  libc6 libgcc-s1 gcc-12-base libstdc++6 zlib1g libexpat1 libffi8 libbz2-1.0 liblzma5 libssl3
  libsqlite3-0 libcrypt1 libuuid1 libtirpc3 libnsl2 libdb5.3 libncursesw6 libtinfo6
  libreadline8 libgssapi-krb5-2 libk5crypto3 libkeyutils1 libkrb5-3 libkrb5support0
  libcom-err2 libmd0 libzstd1 libselinux1 libpcre2-8-0 libacl1
)
mkdir -p "$work/debs"
started=$SECONDS
(cd "$work/debs" && for p in "${packages[@]}"; do
  compgen -G "${p}_*_arm64.deb" >/dev/null || compgen -G "${p}_*_all.deb" >/dev/null \
    || apt-get download -q -o APT::Sandbox::User=root "$p:arm64" >/dev/null
done)
root="$work/root"
rm -rf "$root"
mkdir -p "$root"
for d in "$work"/debs/*.deb; do dpkg-deb -x "$d" "$root"; done
dpkg-deb -x "$deb" "$root"  # the package under test, into the same tree
echo "arm64 root: $root ($(du -sh "$root" | cut -f1), $((SECONDS - started)) s)"

modules=$(dpkg-deb --contents "$deb" | awk '/aarch64-linux-gnu\.so$/ {print $NF}')
echo "== aarch64 extension modules in the package (dpkg-deb --contents: $(wc -l <<<"$modules"), a few of them)"
grep -E '/(numpy/_core/_multiarray_umath|pydantic_core/_pydantic_core|scipy/special/_ufuncs|psutil/_psutil_linux|matplotlib/_path)\.' <<<"$modules"
file -L "$root/usr/lib/myaccel/python/numpy/_core/_multiarray_umath.cpython-311-aarch64-linux-gnu.so" | sed "s|$root||"

# The launcher's own #! line is /usr/bin/python3 -I: the same, through qemu, with the
# tree as the emulated root for the dynamic loader and the libraries (-L).
run() {
  /usr/bin/time -f "  (%e s, max RSS %M KiB)" "$qemu" -L "$root" "$root/usr/bin/python3" -I "$@"
}
echo "== myaccel --version (qemu-aarch64, Debian's arm64 python3)"
run "$root/usr/bin/myaccel" --version
echo "== the compiled libraries load (numpy, scipy.stats, pydantic_core, psutil, matplotlib Agg)"
run -c "
import sys; sys.path.insert(0, '$root/usr/lib/myaccel/python')
import platform, numpy, scipy.stats, pydantic_core, psutil, matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot
print(platform.machine(), 'python', platform.python_version(), 'numpy', numpy.__version__,
      'scipy', scipy.__version__, 'sum', int(numpy.arange(10).sum()),
      'U p', round(float(scipy.stats.mannwhitneyu([1, 2, 3], [4, 5, 6]).pvalue), 3))
"
