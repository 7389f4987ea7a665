"""The lab: real Debian 12 systemd guests under qemu (TCG) for myaccel's host-facing layers.

Test infrastructure only, never part of the installed myaccel. `make lab-test` builds a
cached guest image with debootstrap (`image.py`), boots it with a declared topology
(`topology.py`, `guest.py`), installs myaccel's wheel in it (`install.py`) and runs the
integration tests of `lab/tests/` against it over ssh on 127.0.0.1. See docs/lab.md.
"""
