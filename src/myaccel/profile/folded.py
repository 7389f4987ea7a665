"""Folded stacks: parse, then measure self and inclusive shares per symbol, DSO and group.

Input is the "folded" format written by ``stackcollapse-perf.pl`` (FlameGraph) and
``inferno-collapse-perf``: one line per distinct stack, frames from the root (usually the
command name) to the leaf separated by ``;``, then whitespace and a sample count::

    mariadbd;start_thread;handle_one_connection;do_command;dispatch_command;... 1234

Conventions accepted in a frame (all optional, mixed freely):

- ``name_[k]`` kernel frame (``--kernel`` / ``--all``); ``_[j]`` JIT, ``_[i]`` inlined and
  ``_[w]`` waker annotations are stripped too.
- ``name [dso]``, ``name ([dso])`` or ``name (/path/to/dso)``: the DSO the symbol lives in
  (its basename is kept). ``[kernel.kallsyms]``, ``[kernel]`` and ``vmlinux*`` mark kernel
  frames.
- ``[dso]`` alone: a symbol perf could not resolve inside that DSO (stackcollapse writes
  unresolved frames so); ``[unknown]`` has no DSO.
- ``name+0x1f`` (``--addrs`` style offsets) is reduced to ``name``.
- C++ argument lists are dropped, as stackcollapse's default tidying does
  (``PolicyMutex<TTASEventMutex<GenericPolicy> >::enter(unsigned long, ...)`` becomes
  ``PolicyMutex<TTASEventMutex<GenericPolicy> >::enter``), and so are GCC clone suffixes
  (`` [clone .constprop.0]``, ``.cold``, ``.isra.0``, ``.part.0``, ``.constprop.0``).

Without ``_[k]`` or a DSO, kernel frames are recognised structurally: everything at and
after a kernel entry point (syscall, exception, interrupt, softirq and kernel-thread entry
symbols such as ``entry_SYSCALL_64``, ``el0_svc``, ``asm_sysvec_*``, ``__do_softirq``) is
kernel, and so is a whole stack whose first frame is a kernel thread's command
(``swapper``, ``kworker/...``, ``ksoftirqd/...``). Kernel stacks are unwound reliably, so
any kernel leaf sits under such an entry point.

Shares are percentages of all samples. Self = samples whose leaf is the symbol; inclusive =
samples with the symbol anywhere in the stack (recursion counted once). A group's
inclusive share is the union of the stacks containing any of its symbols, so it never
double counts a caller and its callee.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from myaccel.errors import UsageError
from myaccel.profile.records import DsoShare, GroupShare, StackSummary, SymbolShare

KERNEL_DSO = "[kernel.kallsyms]"

_COUNT = re.compile(r"^(?P<stack>.*\S)\s+(?P<count>\d+(?:\.\d+)?)\s*$")
_ANNOTATION = re.compile(r"^(?P<name>.+)_\[(?P<tag>[kjiw])\]$")
_DSO_BRACKETS = re.compile(r"^(?P<name>.*\S)\s+\[(?P<dso>[^\[\]\s]+)\]$")
_DSO_PARENS = re.compile(r"^(?P<name>.*\S)\s+\((?P<dso>[/\[][^()\s]*)\)$")
_ALONE = re.compile(r"^\[(?P<dso>[^\[\]\s]+)\]$")
_OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")
_CLONE = re.compile(r"(\s*\[clone [^\]]*\])+$")
_GCC_SUFFIX = re.compile(r"(\.(cold|isra|part|constprop|lto_priv|localalias)(\.\d+)?)+$")

# Kernel entry points: frames at and after one of these are kernel frames.
_KERNEL_ENTRY = re.compile(
    r"^(entry_SYSCALL_64\w*|entry_SYSENTER\w*|do_syscall_64|x64_sys_call|"
    r"__x64_sys_\w+|__arm64_sys_\w+|__se_sys_\w+|__do_sys_\w+|invoke_syscall|el0_svc\w*|"
    r"el0t_64_\w+|el0_sync\w*|el0_irq\w*|el0_da|el0_ia|el0_interrupt|el1h_64_\w+|"
    r"el1_interrupt|gic_handle_irq|asm_sysvec_\w+|asm_common_interrupt|asm_exc_\w+|"
    r"common_interrupt|sysvec_\w+|exc_page_fault|do_page_fault|do_mem_abort|"
    r"__irq_exit_rcu|irq_exit\w*|__do_softirq|handle_softirqs|do_softirq|"
    r"ret_from_fork\w*|"
    r"secondary_startup_64\w*|start_kernel|cpu_startup_entry|do_idle)$"
)
_KERNEL_COMM = re.compile(
    r"^(swapper(/\d+)?|kworker/.*|ksoftirqd/\d+|migration/\d+|rcu_\w+|kswapd\d*|"
    r"watchdog/\d+|irq/.*|cpuhp/\d+|idle_inject/\d+|kcompactd\d*|khugepaged|jbd2/.*|"
    r"kthreadd|kblockd)$"
)


@dataclass(frozen=True)
class Frame:
    symbol: str
    dso: str | None = None
    kernel: bool = False


@dataclass(frozen=True)
class Stack:
    frames: tuple[Frame, ...]
    count: int

    @property
    def leaf(self) -> Frame | None:
        return self.frames[-1] if self.frames else None


@dataclass(frozen=True)
class FoldedStacks:
    stacks: tuple[Stack, ...]
    skipped_lines: int = 0
    source: str = ""
    total_samples: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total_samples", sum(s.count for s in self.stacks))


@dataclass(frozen=True)
class SymbolGroup:
    id: str
    description: str
    pattern: re.Pattern[str]

    def matches(self, symbol: str) -> bool:
        return self.pattern.search(symbol) is not None


def _group(id: str, description: str, *patterns: str) -> SymbolGroup:
    return SymbolGroup(id, description, re.compile("|".join(f"(?:{p})" for p in patterns)))


# The symbol groups a profile summary measures (what `diagnose` reads). Names are matched
# after normalisation (no arguments, no offsets, no annotations).
SYMBOL_GROUPS: dict[str, SymbolGroup] = {
    g.id: g
    for g in (
        _group(
            "innodb-spin",
            "InnoDB/MariaDB mutex and rw-lock spinning (MySQL PolicyMutex/TTAS*, sync array, "
            "MVCC::view_open under trx_sys; MariaDB srw/ssux locks)",
            r"^ut_delay$",
            r"^PolicyMutex<",
            r"^TTAS(Event|Futex)?Mutex<",
            r"^TTASEventMutex",
            r"^MVCC::view_open$",
            r"^sync_array_",
            r"^mutex_spin_wait$",
            r"^rw_lock_(s|x|sx)_lock_(spin|wait)",
            r"^rw_lock_x_lock_wait",
            r"^srw_mutex_impl<.*>::wait_and_lock$",
            r"^ssux_lock_impl<.*>::(rd|wr|u)_wait$",
            r"^srw_spin_lock",
            r"^lf_backoff$|^LF_BACKOFF$",
        ),
        _group(
            "kernel-spin",
            "kernel spin locks and optimistic spinning (futex hash buckets, mmap lock, runqueues)",
            r"^(native_|__pv_)?queued_spin_lock_slowpath$",
            r"^_raw_spin_lock(_irqsave|_irq|_bh)?$",
            r"^queued_(read|write)_lock_slowpath$",
            r"^osq_lock$",
            r"^(rwsem|mutex)_spin_on_owner$",
        ),
        _group(
            "atomics-llsc",
            "aarch64 outline-atomics helpers (LL/SC loops on CPUs or builds without inline LSE)",
            r"^__aarch64_(cas|swp|ldadd|ldclr|ldeor|ldset)(1|2|4|8|16)_(relax|acq|rel|acq_rel|sync)$",
        ),
        _group(
            "ahi",
            "InnoDB adaptive hash index",
            r"^btr_search_",
            r"^ha_search_and_",
            r"^ha_insert_for_fold",
        ),
        _group(
            "net-rx",
            "network receive/transmit softirq path (NAPI polling, GRO, protocol input)",
            r"^net_rx_action$",
            r"^net_tx_action$",
            r"^__napi_poll$",
            r"^napi_",
            r"^__netif_receive_skb",
            r"^netif_receive_skb",
            r"^process_backlog$",
            r"^gro_",
            r"^virtnet_poll",
            r"^(mlx5e_napi_poll|hns3_nic_common_poll|ixgbe_poll|i40e_napi_poll|ena_io_poll)$",
        ),
        _group(
            "softirq",
            "softirq processing of any kind",
            r"^(__do_softirq|handle_softirqs|do_softirq|run_ksoftirqd)$",
        ),
        _group(
            "innodb-read-io",
            "InnoDB page reads (buffer pool misses)",
            r"^buf_read_page",
            r"^buf_read_ahead_",
            r"^fil_io$",
            r"^fil_space_t::io$",
            r"^os_aio(_func)?$",
            r"^os_file_(read|pread)",
            r"^buf_page_read_complete$",
        ),
        _group(
            "innodb-flush-io",
            "InnoDB page flushing and redo/data file syncs",
            r"^buf_flush_",
            r"^buf_do_flush_list_batch$",
            r"^fil_flush",
            r"^os_file_(flush|write|pwrite|sync)",
            r"^log_write_up_to$",
            r"^log_flush",
        ),
        _group(
            "kernel-io",
            "kernel block I/O and waits for it",
            r"^io_schedule(_timeout)?$",
            r"^blk_mq_",
            r"^submit_bio",
            r"^__blkdev_direct_IO",
            r"^iomap_dio_rw$",
            r"^(folio_wait_bit|wait_on_page_bit)",
            r"^(ext4|xfs)_file_(read|write)_iter$",
            r"^(__x64_sys|__arm64_sys)_(fsync|fdatasync|io_getevents|io_submit|io_uring_enter)$",
        ),
        _group(
            "futex-sched",
            "futex waits/wakes, sched_yield and the scheduler's context switch path",
            r"^futex_(wait|wake|q_lock)",
            r"^do_futex$",
            r"^(__x64_sys|__arm64_sys)_(futex|sched_yield)$",
            r"^do_sched_yield$",
            r"^(__)?schedule$",
            r"^finish_task_switch",
            r"^pick_next_task",
            r"^try_to_wake_up$",
            r"^(en|de)queue_task",
            r"^__switch_to$",
            r"^context_switch$",
            r"^__lll_lock_wa(it|ke)",
        ),
    )
}


def normalize_symbol(name: str) -> str:
    """Drop offsets, clone suffixes and a trailing C++ argument list."""
    s = _OFFSET.sub("", name.strip())
    s = _CLONE.sub("", s)
    s = _strip_arguments(s)
    return _GCC_SUFFIX.sub("", s) or name.strip()


def _strip_arguments(s: str) -> str:
    t = s[:-6].rstrip() if s.endswith(" const") else s
    if not t.endswith(")"):
        return s
    depth = 0
    for i in range(len(t) - 1, -1, -1):
        c = t[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                head = t[:i]
                # "(anonymous namespace)" alone, or nothing before the list: keep as is
                return head if head.strip() and not t[i:].startswith("(anonymous") else s
    return s


def _dso_basename(dso: str) -> str:
    if dso.startswith("["):
        return dso
    return dso.rsplit("/", 1)[-1] or dso


def _is_kernel_dso(dso: str) -> bool:
    return dso in ("[kernel.kallsyms]", "[kernel]", "[k]") or dso.startswith("vmlinux")


def parse_frame(raw: str) -> Frame:
    """One frame under the conventions in the module docstring (kernel = explicit only)."""
    text = raw.strip()
    kernel = False
    dso: str | None = None
    m = _ANNOTATION.match(text)
    if m:
        text = m.group("name")
        if m.group("tag") == "k":
            kernel = True
    m2 = _DSO_BRACKETS.match(text) or _DSO_PARENS.match(text)
    if m2:
        text, dso = m2.group("name"), _dso_basename(m2.group("dso").strip("[]"))
        if dso.startswith("kernel") or dso.startswith("vmlinux"):
            dso = KERNEL_DSO if dso.startswith("kernel") else dso
    else:
        m3 = _ALONE.match(text)
        if m3:
            inner = m3.group("dso")
            if _is_kernel_dso(f"[{inner}]"):
                return Frame(symbol=text, dso=KERNEL_DSO, kernel=True)
            if inner != "unknown":
                dso = _dso_basename(inner)
            return Frame(symbol=text, dso=dso, kernel=kernel)
    if dso is not None and _is_kernel_dso(dso):
        kernel = True
    if kernel and dso is None:
        dso = KERNEL_DSO
    return Frame(symbol=normalize_symbol(text), dso=dso, kernel=kernel)


def _mark_kernel(frames: list[Frame]) -> tuple[Frame, ...]:
    """Structural kernel detection: kernel-thread comm, or at/after a kernel entry point."""
    if frames and _KERNEL_COMM.match(frames[0].symbol):
        return tuple(
            Frame(f.symbol, f.dso or KERNEL_DSO, True) if not f.kernel and f.dso is None else f
            for f in frames
        )
    out: list[Frame] = []
    in_kernel = False
    for f in frames:
        if f.kernel:
            in_kernel = True
        elif f.dso is None and (in_kernel or _KERNEL_ENTRY.match(f.symbol)):
            in_kernel = True
            out.append(Frame(f.symbol, KERNEL_DSO, True))
            continue
        out.append(f)
    return tuple(out)


def parse_folded(text: str | Iterable[str], *, source: str = "") -> FoldedStacks:
    """Parse folded stack lines; identical stacks are merged.

    Blank lines and ``#`` comments are ignored; malformed lines are counted in
    ``skipped_lines``. Raises UsageError when the input has lines but none is a stack.
    """
    lines = text.splitlines() if isinstance(text, str) else text
    counts: Counter[tuple[Frame, ...]] = Counter()
    cache: dict[str, Frame] = {}
    skipped = 0
    seen = 0
    for raw_line in lines:
        line = raw_line.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        seen += 1
        m = _COUNT.match(line)
        if not m:
            skipped += 1
            continue
        count = int(float(m.group("count")))
        raw = [f for f in m.group("stack").split(";") if f.strip()]
        if not raw or count <= 0:
            skipped += 1
            continue
        frames = []
        for r in raw:
            fr = cache.get(r)
            if fr is None:
                fr = cache[r] = parse_frame(r)
            frames.append(fr)
        counts[_mark_kernel(frames)] += count
    if seen and not counts:
        raise UsageError(
            f"{source or 'input'} holds no folded stacks ({skipped} unreadable lines)",
            hint="expected 'frame;frame;frame COUNT' lines: pipe `perf script` through "
            "stackcollapse-perf.pl or inferno-collapse-perf",
        )
    stacks = tuple(Stack(frames=k, count=v) for k, v in counts.items())
    return FoldedStacks(stacks=stacks, skipped_lines=skipped, source=source)


def _pct(n: int, total: int) -> float:
    return round(100.0 * n / total, 3) if total else 0.0


def group_share(folded: FoldedStacks, group: SymbolGroup, *, top: int = 5) -> GroupShare:
    """Self (leaf matches) and inclusive (any frame matches, union) share of one group."""
    total = folded.total_samples
    self_n = incl_n = 0
    by_symbol: Counter[str] = Counter()
    for st in folded.stacks:
        leaf = st.leaf
        if leaf is not None and group.matches(leaf.symbol):
            self_n += st.count
            by_symbol[leaf.symbol] += st.count
            incl_n += st.count
        elif any(group.matches(f.symbol) for f in st.frames):
            incl_n += st.count
    return GroupShare(
        group=group.id,
        description=group.description,
        self_pct=_pct(self_n, total),
        inclusive_pct=_pct(incl_n, total),
        top_self={s: _pct(n, total) for s, n in by_symbol.most_common(top)},
    )


def summarize(
    folded: FoldedStacks,
    *,
    top_n: int = 30,
    min_pct: float = 0.1,
    groups: Mapping[str, SymbolGroup] | None = None,
) -> StackSummary:
    """Top-N tables by self and inclusive share, per symbol and DSO, plus group shares.

    ``symbols`` keeps every symbol whose inclusive share is at least ``min_pct`` percent, so
    a reader can estimate shares the top-N tables cut off.
    """
    total = folded.total_samples
    self_c: Counter[str] = Counter()
    incl_c: Counter[str] = Counter()
    dso_self: Counter[str] = Counter()
    dso_incl: Counter[str] = Counter()
    sym_dso: dict[str, str | None] = {}
    sym_kernel: dict[str, bool] = {}
    kernel_n = 0
    dso_known_n = 0
    for st in folded.stacks:
        leaf = st.leaf
        if leaf is None:
            continue
        self_c[leaf.symbol] += st.count
        if leaf.kernel:
            kernel_n += st.count
        if leaf.dso is not None:
            dso_self[leaf.dso] += st.count
            dso_known_n += st.count
        seen_syms: set[str] = set()
        seen_dsos: set[str] = set()
        for f in st.frames:
            if f.symbol not in seen_syms:
                seen_syms.add(f.symbol)
                incl_c[f.symbol] += st.count
                if sym_dso.get(f.symbol) is None:
                    sym_dso[f.symbol] = f.dso
                sym_kernel[f.symbol] = sym_kernel.get(f.symbol, False) or f.kernel
            if f.dso is not None and f.dso not in seen_dsos:
                seen_dsos.add(f.dso)
                dso_incl[f.dso] += st.count

    def share(sym: str) -> SymbolShare:
        return SymbolShare(
            symbol=sym,
            dso=sym_dso.get(sym),
            kernel=sym_kernel.get(sym, False),
            self_samples=self_c[sym],
            inclusive_samples=incl_c[sym],
            self_pct=_pct(self_c[sym], total),
            inclusive_pct=_pct(incl_c[sym], total),
        )

    def dshare(dso: str) -> DsoShare:
        return DsoShare(
            dso=dso,
            self_samples=dso_self[dso],
            inclusive_samples=dso_incl[dso],
            self_pct=_pct(dso_self[dso], total),
            inclusive_pct=_pct(dso_incl[dso], total),
        )

    by_incl = sorted(incl_c, key=lambda s: (-incl_c[s], -self_c[s], s))
    by_self = sorted((s for s in self_c if self_c[s]), key=lambda s: (-self_c[s], s))
    dsos_self = sorted((d for d in dso_self if dso_self[d]), key=lambda d: (-dso_self[d], d))
    dsos_incl = sorted(dso_incl, key=lambda d: (-dso_incl[d], d))
    floor = min_pct * total / 100.0
    gs = SYMBOL_GROUPS if groups is None else groups
    return StackSummary(
        total_samples=total,
        distinct_stacks=len(folded.stacks),
        skipped_lines=folded.skipped_lines,
        kernel_pct=_pct(kernel_n, total),
        user_pct=_pct(total - kernel_n, total) if total else 0.0,
        dso_known_pct=_pct(dso_known_n, total),
        top_n=top_n,
        min_pct=min_pct,
        top_self=[share(s) for s in by_self[:top_n]],
        top_inclusive=[share(s) for s in by_incl[:top_n]],
        top_dso_self=[dshare(d) for d in dsos_self[:top_n]],
        top_dso_inclusive=[dshare(d) for d in dsos_incl[:top_n]],
        symbols=[share(s) for s in by_incl if incl_c[s] >= floor and incl_c[s] > 0],
        groups={gid: group_share(folded, g) for gid, g in gs.items()},
    )


def format_top(summary: StackSummary, *, by: str = "self", n: int = 20) -> str:
    """A plain text table (perf-report like) of the top symbols by self or inclusive share."""
    rows = summary.top_self if by == "self" else summary.top_inclusive
    lines = [f"{'self%':>7} {'incl%':>7}  symbol [dso]"]
    for r in rows[:n]:
        if not r.dso or r.symbol == f"[{r.dso}]":
            dso = ""  # no DSO, or an unresolved frame already named after its DSO
        elif r.dso.startswith("["):
            dso = f" {r.dso}"
        else:
            dso = f" [{r.dso}]"
        lines.append(f"{r.self_pct:7.2f} {r.inclusive_pct:7.2f}  {r.symbol}{dso}")
    return "\n".join(lines)
