"""What a server binary was built with: ELF basics, atomics, LTO/PGO traces, text alignment.

``collect_binary(path)`` reads a mysqld/mariadbd (or any ELF file) and returns
``myaccel.model.BinaryFacts``. It never runs the binary and never shells out: headers come
from pyelftools, everything bulky (instruction words, symbol tables, DWARF unit headers) is
read straight from a memory map with numpy, so Debian's 25 MB arm64 mariadbd (2.2 million
instructions) takes about 0.1 s.

One module a concern:

- ``elf``: mapping the file, headers, sections, segments, symbol tables, notes, the
  separate debug file;
- ``atomics``: the aarch64 instruction scan (inline LSE, outline helpers, LL/SC loops);
- ``dwarf``: DW_AT_producer of sampled compile units;
- ``traces``: LTO, PGO and instrumentation traces from symbols, sections and producers;
- ``layout``: PIE, text segment alignment (code huge pages), kept relocations;
- ``collect``: ``collect_binary``, which runs them all, each guarded.
"""

from myaccel.facts.binary.atomics import classify_atomics
from myaccel.facts.binary.collect import DEFAULT_DEBUG_DIRS, collect_binary
from myaccel.facts.binary.layout import HUGE_PAGE_BYTES

__all__ = ["DEFAULT_DEBUG_DIRS", "HUGE_PAGE_BYTES", "classify_atomics", "collect_binary"]
