#!/usr/bin/env bash
# Install what `make dist` needs (docs/packaging.md), but only what is missing: lintian to
# check the packages, qemu-user and file for the arm64 package's smoke run
# (packaging/arm64-smoke.sh), and arm64 as a dpkg foreign architecture, from which that run
# downloads Debian's arm64 python3 (apt-get download; nothing arm64 is installed).
set -euo pipefail

needs=(
  "lintian:lintian"
  "qemu-aarch64-static:qemu-user-static"
  "file:file"
  "dpkg-deb:dpkg"
)
missing=()
for pair in "${needs[@]}"; do
  cmd=${pair%%:*}; pkg=${pair##*:}
  if ! command -v "$cmd" >/dev/null 2>&1; then
    case " ${missing[*]-} " in *" $pkg "*) ;; *) missing+=("$pkg");; esac
  fi
done
foreign=0
dpkg --print-foreign-architectures | grep -qx arm64 || foreign=1

if [ ${#missing[@]} -eq 0 ] && [ $foreign -eq 0 ]; then
  echo "dist packages: all present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
  else
    echo "error: needs root: apt-get install -y ${missing[*]-}; dpkg --add-architecture arm64" >&2
    exit 1
  fi
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
[ $foreign -eq 0 ] || $SUDO dpkg --add-architecture arm64
$SUDO apt-get update -q
[ ${#missing[@]} -eq 0 ] || $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "dist packages: installed ${missing[*]-}$([ $foreign -eq 1 ] && echo " (arm64 architecture added)")"
