"""Build layer: compose, run and verify optimized builds (PGO, LTO, LSE, BOLT, cache line)
of MySQL-family server trees and of the kvlab test fixture.

Modules: ``tree`` (flavor/version detection and per-flavor CMake adapters), ``flags``
(architecture and optimization flags from probe facts), ``deps`` (offline dependency check),
``manifest`` (the ``myaccel.build/1`` record), ``runner`` (resumable stages with logs),
``stages`` (the pipeline's units), ``pgo``, ``bolt``, ``train``, ``verify``, ``measure``,
``patch``.
"""
