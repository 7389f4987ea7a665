#!/usr/bin/env bash
# Install the Debian packages the lab needs (make lab-test, docs/lab.md), but only those whose
# command is missing: a machine that already has everything is left alone (no apt at all).
set -euo pipefail

# command-to-check : package providing it
needs=(
  "qemu-img:qemu-utils"                  # the qcow2 overlay of the cached image
  "debootstrap:debootstrap"              # the guest's Debian 12 tree, from Debian packages only
  "mkfs.ext4:e2fsprogs"                  # the tree into a raw image (mkfs.ext4 -d, no loop mount)
  "ssh:openssh-client"
  "scp:openssh-client"
  "ssh-keygen:openssh-client"
  "ip:iproute2"                          # the multiqueue NIC's network namespace (lab/netns.py)
  "ping:iputils-ping"                    # traffic to that NIC from its namespace
)
# `ensure-lab-deps.sh arm64`: the aarch64 lab (make lab-arm-test) instead of the x86 one
case "${1:-amd64}" in
  amd64)
    needs+=("qemu-system-x86_64:qemu-system-x86")      # the guest, under TCG
    ;;
  arm64)
    needs+=(
      "qemu-system-aarch64:qemu-system-arm"           # the guest (-M virt), under TCG
      "qemu-aarch64-static:qemu-user-static"          # debootstrap's second stage via binfmt_misc
      "update-binfmts:binfmt-support"
      "cmake:cmake"                                   # myaccel build --cross aarch64 (kvlabd)
      "aarch64-linux-gnu-g++:g++-aarch64-linux-gnu"
    )
    ;;
  *) echo "usage: $0 [amd64|arm64]" >&2; exit 2 ;;
esac

missing=()
for pair in "${needs[@]}"; do
  cmd=${pair%%:*}; pkg=${pair##*:}
  if ! command -v "$cmd" >/dev/null 2>&1 && ! [ -x "/usr/sbin/$cmd" ]; then
    case " ${missing[*]-} " in *" $pkg "*) ;; *) missing+=("$pkg");; esac
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "lab packages: all present"
  exit 0
fi

echo "lab packages missing: ${missing[*]}"
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
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "lab packages: installed ${missing[*]}"
