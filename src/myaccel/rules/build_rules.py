"""Build layer: what a rebuild of the server binary would gain, from the binary's facts."""

from __future__ import annotations

from myaccel.rules.base import RuleContext, Skip, recommend, rule
from myaccel.rules.model import Recommendation

MCPU = {
    "kunpeng920": "-mcpu=tsv110",
    "neoverse-n1": "-mcpu=neoverse-n1",
    "neoverse-n2": "-mcpu=neoverse-n2",
    "neoverse-v1": "-mcpu=neoverse-v1",
    "neoverse-v2": "-mcpu=neoverse-v2",
}


# What a PGO+LTO rebuild gave, by flavor and series, measured here or published: the build
# rule cites the closest row for the probed server (same flavor, same series first).
REBUILD_GAINS: tuple[tuple[str, str, str, str], ...] = (
    (
        "mariadb",
        "10.11",
        "+45% read-only, +30% read-write TPS against a plain build of the same tree",
        "measured here: MariaDB 10.11.18 PGO+LTO, sysbench 8 threads, 8 x 100k rows, "
        "5+5 interleaved runs (docs/building.md)",
    ),
    (
        "mysql",
        "9.7",
        "+6.5% mean over a generic training profile",
        "Oracle's PGO-built MySQL 9.7 binaries (published figure)",
    ),
    (
        "percona",
        "8.4",
        "up to +47% read-only",
        "community PGO builds of Percona Server 8.4 (published figure)",
    ),
    (
        "mysql",
        "8.0",
        "+27% to +31% QPS at 2 to 64 cores",
        "seeds/003 (TDSQL-C, a MySQL 8.0 kernel, PGO+LTO)",
    ),
)
GENERIC_REBUILD_GAIN = ("+6% to +30%", "published PGO ranges; seeds/003: +27-31% QPS")


def rebuild_headroom(ctx: RuleContext) -> tuple[str, str]:
    """(expected gain, its source) of a PGO+LTO rebuild for the probed server."""
    if ctx.facts.server is None:
        return GENERIC_REBUILD_GAIN
    try:
        sv = ctx.version
    except Skip:
        return GENERIC_REBUILD_GAIN
    same_flavor = [row for row in REBUILD_GAINS if row[0] == sv.flavor]
    for _flavor, series, gain, source in same_flavor:
        if series == sv.series:
            return gain, source
    if same_flavor:
        _, series, gain, source = same_flavor[0]
        return f"{gain} (measured on {series}, nearest to {sv.series})", source
    return GENERIC_REBUILD_GAIN


def rebuild_advice(ctx: RuleContext, **fields: object) -> Recommendation:
    """A build-layer recommendation: advisory (a human rebuilds the server), at the risk of
    a rebuild."""
    return recommend(ctx, action="advisory", risk="rebuild", **fields)


def _binary(ctx: RuleContext):  # type: ignore[no-untyped-def]
    b = ctx.facts.binary
    if b is None:
        raise Skip("no binary facts (probe the server or pass --binary)")
    return b


@rule(
    "build-lse",
    "build",
    "Inline LSE atomics",
    "KNOWLEDGE.md section 5; mysql-server PR #302 (up to 4x RO on 64-core Graviton2)",
)
def lse(ctx: RuleContext) -> list[Recommendation]:
    """On CPUs with ARMv8.1 atomics, LL/SC loops collapse under contention and outline
    helpers add a call and a branch per atomic; a build for the detected core inlines
    CAS/LDADD/SWP."""
    b = _binary(ctx)
    c = ctx.facts.cpu
    if c.arch.value != "aarch64":
        raise Skip("not aarch64")
    if not c.has_lse.value:
        raise Skip("this CPU has no LSE atomics: LL/SC or outline atomics are right")
    at = b.atomics.value
    if at is None or at.klass not in ("llsc", "outline"):
        raise Skip(f"binary atomics: {at.klass if at else b.atomics.unknown}")
    flag = MCPU.get(c.family.value or "", "-march=armv8.1-a")
    effect = (
        "up to 4x read-only TPS on 64 cores (LL/SC -> LSE)"
        if at.klass == "llsc"
        else "a few % (no call and branch per atomic)"
    )
    return [
        rebuild_advice(
            ctx,
            title="Rebuild with inline LSE atomics",
            target="build:lse",
            current=f"{at.klass} ({at.helper_calls} helper calls, {at.exclusive_stores} LL/SC stores)",
            proposed=f"build with {flag} (inline casal/ldaddal/swpal)",
            rationale="the CPU has atomics; the binary does not use them inline",
            evidence={"cpu.has_lse": "true", "binary.atomics.class": at.klass},
            expected_effect=effect,
            effect_source="mysql-server PR #302 (outline atomics, Graviton2); seeds/000, seeds/001",
            verify="myaccel probe --binary NEW: atomics inline-lse",
            confidence="high" if at.klass == "llsc" else "medium",
        )
    ]


@rule(
    "build-pgo-lto",
    "build",
    "PGO + LTO build",
    "seeds/003 (TDSQL-C +27-31%); KNOWLEDGE.md section 5",
)
def pgo_lto(ctx: RuleContext) -> list[Recommendation]:
    """A profile-guided, link-time-optimized build lays out hot code together and inlines
    across files: fewer i-cache and iTLB misses (TDSQL-C: +27-31% QPS)."""
    b = _binary(ctx)
    if b.pgo.value and b.lto.value:
        raise Skip("binary already shows PGO and LTO")
    gain, source = rebuild_headroom(ctx)
    return [
        rebuild_advice(
            ctx,
            title="Rebuild with PGO and LTO",
            target="build:pgo,lto",
            current=f"LTO {b.lto.value if b.lto.known else 'unknown'}, PGO {b.pgo.value if b.pgo.known else 'unknown'}",
            proposed="myaccel build --opt pgo,lto (train on your workload)",
            rationale="the binary shows no PGO/LTO traces",
            evidence={"binary.lto": str(b.lto.value), "binary.pgo": str(b.pgo.value)},
            expected_effect=gain,
            effect_source=source,
            verify="myaccel verify-build; A/B the builds",
            confidence="medium",
        )
    ]


@rule(
    "build-cacheline",
    "build",
    "128-byte cache line on Kunpeng 920",
    "seeds/004; KNOWLEDGE.md section 5",
)
def cacheline(ctx: RuleContext) -> list[Recommendation]:
    """Kunpeng 920's L3 uses 128-byte lines; MySQL pads hot structures for 64 bytes, so
    neighbours false-share. MariaDB has CPU_LEVEL1_DCACHE_LINESIZE; MySQL needs a patch."""
    c = ctx.facts.cpu
    caches = c.caches.value or []
    lines = {ch.line_size_bytes for ch in caches if ch.line_size_bytes}
    if c.family.value != "kunpeng920" and 128 not in lines:
        raise Skip("no 128-byte cache lines on this CPU")
    return [
        rebuild_advice(
            ctx,
            title="Build for a 128-byte cache line",
            target="build:cacheline",
            current="64-byte padding",
            proposed="MariaDB: -DCPU_LEVEL1_DCACHE_LINESIZE=128; MySQL: patch the InnoDB cache line constant",
            rationale="hot InnoDB structures padded for 64 bytes share 128-byte lines",
            evidence={
                "cpu.family": str(c.family.value),
                "cache.line_sizes": ",".join(str(x) for x in sorted(lines)),
            },
            expected_effect="+3-4% published (seeds/004)",
            effect_source="seeds/004",
            verify="myaccel verify-build (cache line in the generated config)",
            confidence="medium",
        )
    ]


@rule(
    "build-text-alignment",
    "build",
    "2 MiB aligned text for code huge pages",
    "KNOWLEDGE.md section 4",
)
def text_alignment(ctx: RuleContext) -> list[Recommendation]:
    """Code huge pages need the text segment aligned to 2 MiB (-Wl,-zmax-page-size=0x200000)."""
    b = _binary(ctx)
    if b.text_huge_page_ready.value:
        raise Skip("text already 2 MiB aligned")
    if not ctx.facts.kernel.file_thp.value:
        raise Skip("the kernel cannot map file text with huge pages anyway")
    ctx.require_2mib_pmd()
    return [
        rebuild_advice(
            ctx,
            title="Link with 2 MiB text alignment",
            target="build:text-align",
            current=hex(b.text_segment_align.value or 0),
            proposed="-Wl,-zmax-page-size=0x200000",
            rationale="lets the kernel map the code with 2 MiB pages",
            evidence={
                "binary.text_segment_align": str(b.text_segment_align.value),
                "kernel.file_thp": "true",
            },
            expected_effect="+5-11% with code huge pages (seeds/000, seeds/001)",
            effect_source="seeds/000, seeds/001",
            verify="myaccel probe --binary NEW: huge-page ready",
        )
    ]
