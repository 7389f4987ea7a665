"""Artifacts that flow between layers. Each top-level artifact carries ``schema_version``.

A ``Fact`` is one observation with the place it came from (a file under the sysroot, a
query, a command). A fact that could not be observed has ``unknown`` set to the reason and
``value`` None; a known fact may still have the value None where None means "none" (for
example no cgroup memory limit).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from myaccel.artifacts import artifact
from myaccel.cpulist import check_cpu_list, parse_cpu_list

T = TypeVar("T")

FACTS_SCHEMA = "myaccel.facts/1"


class Frozen(BaseModel):
    """An artifact's part that is read or built once: unknown fields are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Strict(BaseModel):
    """A document changed in place (a journal, a sandbox's state): unknown fields are an
    error, as in ``Frozen``."""

    model_config = ConfigDict(extra="forbid")


# A kernel CPU list (``0-3,8``), checked wherever the model holds one: live facts are checked
# by their readers, a facts file (``plan --facts F``) only here; a bad one is a clear error
# naming the field (``server.cpus_allowed.value: '0-' is not a CPU number or range``)
CpuListText = Annotated[str, AfterValidator(check_cpu_list)]

# A Fact added to facts/1 after documents of it were written: those read it as unknown.
NOT_PROBED = "not probed (facts of an older myaccel)"


def added_later(kind: type[T]) -> Any:
    """The default of a ``Fact[kind]`` field that older facts documents lack."""
    return Field(default_factory=lambda: Fact[kind](unknown=NOT_PROBED))  # type: ignore[valid-type]


class Fact(Frozen, Generic[T]):
    value: T | None = None
    source: str = ""
    unknown: str | None = None

    @property
    def known(self) -> bool:
        return self.unknown is None

    def get(self, default: T) -> T:
        """The value, or ``default`` when unknown or None."""
        return default if self.value is None else self.value


def same_named(source: object, names: Iterable[str]) -> dict[str, Any]:
    """``source``'s attributes ``names`` as keyword arguments: for a result that carries
    fields of its input under the same names."""
    return {name: getattr(source, name) for name in names}


def known(value: T, source: str) -> Fact[T]:
    return Fact[T](value=value, source=source)


def unknown(reason: str, source: str = "") -> Fact[Any]:
    return Fact[Any](value=None, source=source, unknown=reason)


# ---------------------------------------------------------------- CPU


class NumaNode(Frozen):
    node: int
    cpus: CpuListText
    cpu_count: int
    memory_total_bytes: int | None = None
    # this node's row of the firmware's distance table (node*/distance: 10 local, larger
    # farther), one entry per node; None when not readable
    distances: list[int] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> NumaNode:
        listed = len(parse_cpu_list(self.cpus))
        if self.cpu_count != listed:
            raise ValueError(
                f"node {self.node}: cpu_count {self.cpu_count} but cpus lists {listed}"
            )
        if self.memory_total_bytes is not None and self.memory_total_bytes < 0:
            raise ValueError(f"node {self.node}: memory_total_bytes is negative")
        return self


class CacheLevel(Frozen):
    level: int
    type: str  # Data, Instruction, Unified
    size_bytes: int | None = None
    line_size_bytes: int | None = None
    shared_cpu_count: int | None = None
    instances: int | None = None  # distinct shared_cpu_list groups among online CPUs


class CpuFacts(Frozen):
    arch: Fact[str]
    vendor: Fact[str]
    model: Fact[str]
    family: Fact[str]  # stable id: kunpeng920, neoverse-n1, neoverse-n2, ..., x86-intel, x86-amd
    implementer: Fact[str]
    part: Fact[str]
    model_name: Fact[str]
    logical_cpus: Fact[int]
    online_cpus: Fact[CpuListText]
    sockets: Fact[int]
    cores_per_socket: Fact[int]
    threads_per_core: Fact[int]
    physical_cores: Fact[int]
    numa_nodes: Fact[list[NumaNode]]
    caches: Fact[list[CacheLevel]]
    features: Fact[list[str]]
    has_lse: Fact[bool]
    has_sve: Fact[bool]
    has_crc32: Fact[bool]
    has_avx2: Fact[bool]
    has_avx512: Fact[bool]
    governor: Fact[str]
    # the hypervisor of a guest, "none" on bare metal (facts/virt.py)
    hypervisor: Fact[str] = added_later(str)
    # Armv8.5 speculation barrier (HWCAP_SB, Features token "sb")
    has_sb: Fact[bool] = added_later(bool)

    @model_validator(mode="after")
    def _square_distances(self) -> CpuFacts:
        nodes = self.numa_nodes.value or []
        for n in nodes:
            if n.distances is not None and (
                len(n.distances) != len(nodes) or any(d <= 0 for d in n.distances)
            ):
                raise ValueError(
                    f"node {n.node}: distances {n.distances} is not a row of {len(nodes)} "
                    "positive numbers"
                )
        return self


# ---------------------------------------------------------------- memory


class MemoryFacts(Frozen):
    total_bytes: Fact[int]
    available_bytes: Fact[int]
    swap_total_bytes: Fact[int]
    swap_free_bytes: Fact[int]
    cgroup_version: Fact[str]
    cgroup_path: Fact[str]
    cgroup_limit_bytes: Fact[int]  # known None = no limit
    effective_limit_bytes: Fact[int]  # min(RAM, cgroup limit)
    hugepages_total: Fact[int]
    hugepages_free: Fact[int]
    hugepage_size_bytes: Fact[int]
    # the PMD-level huge page (THP and a 2 MiB-aligned text's page): 2 MiB with 4K base
    # pages, 32 MiB with 16K, 512 MiB with arm64's 64K (kernel arm64 hugetlbpage docs)
    pmd_page_bytes: Fact[int] = added_later(int)
    thp_enabled: Fact[str]
    thp_defrag: Fact[str]
    thp_shmem_enabled: Fact[str]
    thp_hugetext_enabled: Fact[str]
    swappiness: Fact[int]
    dirty_ratio: Fact[int]
    dirty_background_ratio: Fact[int]
    dirty_bytes: Fact[int]
    dirty_background_bytes: Fact[int]
    dirty_expire_centisecs: Fact[int]
    dirty_writeback_centisecs: Fact[int]
    numa_balancing: Fact[int]


# ---------------------------------------------------------------- kernel


class KernelFacts(Frozen):
    release: Fact[str]
    version_major_minor: Fact[list[int]]
    version: Fact[str]
    sched_location: Fact[str]  # procfs (< 5.13), debugfs (>= 5.13), none
    sched_knobs: dict[str, Fact[str]] = Field(default_factory=dict)
    sched_autogroup_enabled: Fact[int]
    file_thp: Fact[bool]  # CONFIG_READ_ONLY_THP_FOR_FS or a hugetext control
    madv_collapse: Fact[bool]  # kernel >= 6.1


# ---------------------------------------------------------------- storage and network


STORAGE_MEASURE_SCHEMA = "myaccel.storage-measure/1"


@artifact(STORAGE_MEASURE_SCHEMA)
class StorageMeasurement(Frozen):
    """What the datadir's device sustained in a short fio run (``facts/iomeasure.py``)."""

    schema_version: str = STORAGE_MEASURE_SCHEMA
    tool: str  # "fio 3.33"
    measured_at: str
    scratch_dir: str  # where the scratch file lived (removed afterwards)
    device_key: str  # what the cache is keyed by: block device, model, filesystem
    block_size_bytes: int
    file_size_bytes: int
    seconds_each: float
    direct_io: bool
    random_read_iops: float  # 16 KiB, queue depth 32
    random_write_iops: float  # 16 KiB, queue depth 32
    fsync_write_iops: float  # 16 KiB writes, each followed by fdatasync, queue depth 1
    fsync_latency_ms_p50: float
    fsync_latency_ms_p99: float
    cached: bool = False  # read back from the per-device cache instead of measured now


class StorageFacts(Frozen):
    path: Fact[str]
    mount_point: Fact[str]
    fs_type: Fact[str]
    mount_options: Fact[str]
    device: Fact[str]  # /dev name of the mounted source
    block_device: Fact[str]  # whole-disk name under /sys/block
    rotational: Fact[bool]
    scheduler: Fact[str]
    schedulers_available: Fact[list[str]]
    nr_requests: Fact[int]
    model: Fact[str]
    measured: Fact[StorageMeasurement] = Field(
        default_factory=lambda: Fact[StorageMeasurement](
            unknown="not measured (myaccel probe --measure-storage; plan and accelerate measure it)"
        )
    )


class Irq(Frozen):
    irq: int
    name: str
    affinity: CpuListText | None = None  # smp_affinity_list
    count: int | None = None  # interrupts so far, summed over CPUs


class NetInterface(Frozen):
    name: str
    driver: str | None = None
    operstate: str | None = None
    mtu: int | None = None
    speed_mbps: int | None = None
    rx_queues: int | None = None
    tx_queues: int | None = None
    irqs: list[Irq] = Field(default_factory=list)
    numa_node: int | None = None  # the device's node; None when the kernel says -1 or nothing


class NetworkFacts(Frozen):
    interfaces: Fact[list[NetInterface]]
    irqbalance_running: Fact[bool]


class PerfFacts(Frozen):
    perf_path: Fact[str]
    perf_version: Fact[str]
    paranoid: Fact[int]
    kptr_restrict: Fact[int]
    pmus: Fact[list[str]]
    events: Fact[dict[str, bool]]  # KNOWLEDGE section 6 events present in some PMU
    hardware_counters: Fact[bool]  # a live `perf stat -e instructions` counted


class ManagerFacts(Frozen):
    """Other tuning daemons that may already manage OS settings (we coexist, not fight)."""

    tuned_running: Fact[bool]
    tuned_profile: Fact[str]
    tuned_sysctls: Fact[dict[str, str]]  # sysctl settings of the active tuned profile
    atune_running: Fact[bool]
    bpftune_running: Fact[bool]


# ---------------------------------------------------------------- server


class ServerFacts(Frozen):
    connection: str
    flavor: Fact[str]  # mysql, mariadb, percona
    version: Fact[str]  # x.y.z
    version_string: Fact[str]  # VERSION()
    version_comment: Fact[str]
    uptime_s: Fact[int]
    datadir: Fact[str]
    data_size_bytes: Fact[int]
    pid: Fact[int]
    binary_path: Fact[str]
    cpus_allowed: Fact[CpuListText]
    mems_allowed: Fact[CpuListText]
    cgroup_limit_bytes: Fact[int]
    # CPUs worth of cgroup quota (cpu.max 400000 100000 -> 4.0); known None: no quota
    cpu_quota_cpus: Fact[float] = added_later(float)
    variables: Fact[dict[str, str]]
    status: Fact[dict[str, str]]


# ---------------------------------------------------------------- binary


class AtomicsFacts(Frozen):
    klass: str  # inline-lse, outline, llsc, none, not-applicable
    lse_instructions: int = 0
    exclusive_loads: int = 0
    exclusive_stores: int = 0
    helper_sites: int = 0  # LSE instruction followed closely by an LL/SC loop (outline helpers)
    helper_symbols: int = 0
    helper_calls: int = 0
    by_mnemonic: dict[str, int] = Field(default_factory=dict)
    instructions_scanned: int = 0
    detail: str = ""


class BinaryFacts(Frozen):
    path: str
    size_bytes: Fact[int]
    elf_class: Fact[int]
    machine: Fact[str]
    pie: Fact[bool]
    compiler: Fact[list[str]]
    build_id: Fact[str]
    stripped: Fact[bool]
    debug_info: Fact[bool]
    atomics: Fact[AtomicsFacts]
    lto: Fact[bool]
    lto_evidence: Fact[list[str]]
    pgo: Fact[bool]
    pgo_evidence: Fact[list[str]]
    instrumented: Fact[bool]  # __gcov_ / __llvm_profile symbols: a profile-generate build
    text_segment_align: Fact[int]
    text_huge_page_ready: Fact[bool]  # executable PT_LOAD aligned to 2 MiB
    relocations: Fact[bool]  # .rela.text kept (--emit-relocs), what BOLT needs
    analysis_s: float = 0.0


# ---------------------------------------------------------------- all facts


@artifact(FACTS_SCHEMA)
class Facts(Frozen):
    schema_version: str = FACTS_SCHEMA
    myaccel_version: str
    collected_at: str
    hostname: Fact[str]
    sysroot: str
    cpu: CpuFacts
    memory: MemoryFacts
    kernel: KernelFacts
    storage: StorageFacts
    network: NetworkFacts
    perf: PerfFacts
    managers: ManagerFacts | None = None
    server: ServerFacts | None = None
    binary: BinaryFacts | None = None
    # "none", or the container this probe ran in: docker, podman, kubernetes, lxc,
    # systemd-nspawn, container (facts/container.py)
    container: Fact[str] = added_later(str)
    warnings: list[str] = Field(default_factory=list)
