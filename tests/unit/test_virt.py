"""Guest detection and the newer CPU parts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sysroot_tree import sysroot_tree

from myaccel.facts.cpu import collect_cpu
from myaccel.facts.sysroot import Sysroot
from myaccel.facts.virt import collect_hypervisor
from myaccel.model import known, unknown

SYSROOTS = Path(__file__).parent.parent / "fixtures" / "sysroots"


ARM_FLAGS = known(["fp", "asimd", "atomics", "crc32"], "/proc/cpuinfo")
X86_FLAGS = known(["fpu", "sse2", "lm", "avx2"], "/proc/cpuinfo")


@pytest.mark.parametrize(
    ("files", "flags", "expected"),
    [
        (
            {
                "/sys/class/dmi/id/sys_vendor": "Amazon EC2\n",
                "/sys/class/dmi/id/product_name": "m6g.4xlarge\n",
            },
            ARM_FLAGS,
            "nitro",
        ),
        (
            {
                "/sys/class/dmi/id/sys_vendor": "Amazon EC2\n",
                "/sys/class/dmi/id/product_name": "m6g.metal\n",
            },
            ARM_FLAGS,
            "none",
        ),
        (
            {
                "/sys/class/dmi/id/sys_vendor": "Alibaba Cloud\n",
                "/sys/class/dmi/id/product_name": "Alibaba Cloud ECS\n",
            },
            ARM_FLAGS,
            "kvm",
        ),
        (
            {
                "/sys/class/dmi/id/sys_vendor": "Huawei\n",
                "/sys/class/dmi/id/product_name": "TaiShan 200 (Model 2280)\n",
            },
            ARM_FLAGS,
            "none",
        ),
        ({"/sys/class/dmi/id/sys_vendor": "QEMU\n"}, ARM_FLAGS, "qemu"),  # KVM or TCG
        ({"/sys/hypervisor/type": "xen\n"}, X86_FLAGS, "xen"),
        ({"/proc/device-tree/hypervisor/compatible": "xen,xen-4.17\0xen,xen\0"}, ARM_FLAGS, "xen"),
        ({}, known([*X86_FLAGS.get([]), "hypervisor"], "/proc/cpuinfo"), "guest"),
        ({}, X86_FLAGS, "none"),
    ],
)
def test_hypervisor_signals(
    tmp_path: Path, files: dict[str, str], flags: object, expected: str
) -> None:
    sr = sysroot_tree(tmp_path, files)
    got = collect_hypervisor(sr, flags)  # type: ignore[arg-type]
    assert got.known and got.value == expected, got


def test_arm_without_any_signal_is_unknown_with_a_reason(tmp_path: Path) -> None:
    got = collect_hypervisor(sysroot_tree(tmp_path, {}), ARM_FLAGS)
    assert not got.known and "no hypervisor signal" in (got.unknown or "")
    got = collect_hypervisor(sysroot_tree(tmp_path, {}), unknown("cannot read", "/proc/cpuinfo"))
    assert not got.known


def test_this_vm_is_a_guest() -> None:
    cpu = collect_cpu(Sysroot(SYSROOTS / "this-vm"))
    assert cpu.hypervisor.known and cpu.hypervisor.value != "none"


@pytest.mark.parametrize(
    ("part", "model", "family"),
    [
        ("0xd02", "Kunpeng 920B (HIP09)", "hisilicon-hip09"),
        ("0xd06", "HiSilicon HIP12", "hisilicon-hip12"),
    ],
)
def test_new_hisilicon_parts_decode(tmp_path: Path, part: str, model: str, family: str) -> None:
    src = SYSROOTS / "kunpeng920-2s"
    dst = tmp_path / "root"
    shutil.copytree(src, dst, symlinks=True)
    cpuinfo = dst / "proc" / "cpuinfo"
    cpuinfo.write_text(cpuinfo.read_text().replace("CPU part\t: 0xd01", f"CPU part\t: {part}"))
    cpu = collect_cpu(Sysroot(dst))
    assert cpu.model.value == model and cpu.family.value == family
    assert cpu.vendor.value == "HiSilicon"


@pytest.mark.parametrize(
    ("part", "model", "family"),
    [
        ("0x662", "Phytium FTC662", "phytium-ftc662"),
        ("0x862", "Phytium FTC862", "phytium-ftc862"),
        ("0x303", "Phytium FTC310", "phytium-ftc310"),
        ("0x999", "Phytium part 0x999", "phytium"),
    ],
)
def test_phytium_decodes(tmp_path: Path, part: str, model: str, family: str) -> None:
    """Issue 34: implementer 0x70 read as "unknown implementer 0x70", family arm-other. The
    cpuinfo is SYNTH (the Kunpeng tree's, with Phytium's implementer and an ARMv8.0 Features
    line: no atomics, so no LSE)."""
    src = SYSROOTS / "kunpeng920-2s"
    dst = tmp_path / "root"
    shutil.copytree(src, dst, symlinks=True)
    cpuinfo = dst / "proc" / "cpuinfo"
    text = cpuinfo.read_text().replace("CPU implementer\t: 0x48", "CPU implementer\t: 0x70")
    text = text.replace("CPU part\t: 0xd01", f"CPU part\t: {part}")
    text = "\n".join(
        "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid"
        if line.startswith("Features")
        else line
        for line in text.splitlines()
    )
    cpuinfo.write_text(text + "\n")
    cpu = collect_cpu(Sysroot(dst))
    assert cpu.vendor.value == "Phytium"
    assert cpu.model.value == model and cpu.family.value == family
    assert cpu.has_lse.value is False
