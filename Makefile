# myaccel: the two set-up commands are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test system-test lint typecheck unit integration system-deps venv clean bench-probe fleet-local-test fleet-test lab-test lab-ci-test lab-arm-test lab-package-test lab-package-arm-test dist dist-wheel dist-amd64 dist-arm64

system-deps:
	@bash scripts/ensure-system-deps.sh
	@bash scripts/ensure-profile-tools.sh
	@bash scripts/ensure-mysql.sh
	@bash scripts/ensure-mariadb.sh

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

lint: venv
	$(BIN)/ruff check src tests ansible lab packaging
	$(BIN)/ruff format --check src tests ansible lab packaging

typecheck: venv
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest -q -m 'not integration' tests

integration: system-deps venv
	$(BIN)/pytest -q -m integration tests

# Two pytest workers, then the tests that assert a measured performance effect, alone: a
# verdict needs the machine to itself (the other worker's tests are load on 2 CPUs). Whole
# files per worker, the slowest first (tests/conftest.py SLOWEST_FIRST). The end-to-end
# tests marked `system` are left to `make system-test`.
test: system-deps venv lint typecheck
	$(BIN)/pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=60 -m 'not alone and not system' tests
	$(BIN)/pytest -q -m 'alone and not system' tests

# The end-to-end tests too slow for `make test`'s 25 minutes (marker `system`): accelerate
# --versions across a MariaDB upgrade, the Debian package built and read back, MySQL 9.7's
# accelerate on a sandbox and on an existing server, the guard through a 60 s stall, `ab
# --instructions` under callgrind, `simulate` under callgrind and cachegrind, the fleet
# collection's playbooks against stand-in hosts. CI (.ci/run) runs them after `make test`,
# about 8 minutes.
system-test: system-deps venv
	$(BIN)/pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=20 -m system tests

# The Ansible collection (ansible/): first against three local hosts, each with its own
# sandbox (the gates: a canary down, a failed health check, a held class; about 150 s:
# `make fleet-local-test`, run by CI after `make system-test`), then over real SSH against two
# lab guests of two hardware classes, the role installing the Debian package
# (ansible/tests/fleet_ssh_test.py; about 23 minutes under TCG, the lab's image cached or
# built first). `make fleet-test` runs both; its SSH part is not in .ci/run (CI's 90
# minutes: docs/fleet.md). Bounded: SIGINT after 60 min, SIGKILL 5 minutes later.
fleet-local-test: system-deps venv
	$(BIN)/python ansible/tests/fleet_test.py

fleet-test: fleet-local-test
	@bash scripts/ensure-lab-deps.sh
	timeout --signal=INT --kill-after=300 3600 $(BIN)/python ansible/tests/fleet_ssh_test.py

# The lab (docs/lab.md): a Debian 12 systemd guest under qemu (TCG), its image cached under
# $MYACCEL_LAB_CACHE (/var/cache/myaccel-lab), myaccel's wheel installed in it, checked over
# ssh. Not part of `make test`: its tests live in lab/tests, outside pytest's testpaths.
lab-test: venv
	@bash scripts/ensure-lab-deps.sh
	$(BIN)/pytest -q -m lab --timeout 3600 --durations=0 -p no:cacheprovider lab/tests

# What CI (.ci/run) runs of the lab: every `lab` test but those marked `lab_long`: the whole
# accelerate of the guest's systemd server with a swapped binary (313 s to 1,294 s under TCG)
# and the two OS-crash points of the matrix (223 s and 250 s, each after its own boot; the
# kernel-crash test stays). 19 minutes on the development VM (lab-test: 44).
lab-ci-test: venv
	@bash scripts/ensure-lab-deps.sh
	$(BIN)/pytest -q -m 'lab and not lab_long' --timeout 3600 --durations=0 -p no:cacheprovider lab/tests

# The aarch64 lab (docs/lab.md, "The aarch64 lab"): Debian 12 arm64 guests on qemu's virt board,
# -cpu neoverse-n1 (LSE) then cortex-a72 (no LSE), 2 NUMA nodes each. Not in `make test`, not
# in `make lab-test` (marker lab_arm, not lab), not in .ci/run. Bounded: SIGINT after 90 min
# (pytest then stops the guest), SIGKILL 5 minutes later.
lab-arm-test: venv
	@bash scripts/ensure-lab-deps.sh arm64
	timeout --signal=INT --kill-after=300 5400 $(BIN)/pytest -q -m lab_arm --timeout 3600 --durations=0 -p no:cacheprovider lab/tests

# Issue 36, acceptance 1 (docs/lab.md, "The package in a fresh guest"): the amd64 .deb, built
# as dist-amd64 builds it (zstd, no lintian; or MYACCEL_LAB_DEB=FILE), installed with apt in
# a fresh guest of its own (apt pulls the Recommends from Debian through qemu's user network),
# then doctor, probe, plan, accelerate as root and doctor, probe, plan --facts as a user. Not
# in `make lab-test` (marker lab_package, not lab) nor in .ci/run. Bounded: SIGINT after 60
# min (pytest then stops the guest), SIGKILL 5 minutes later.
lab-package-test: venv
	@bash scripts/ensure-lab-deps.sh
	timeout --signal=INT --kill-after=300 3600 $(BIN)/pytest -q -m lab_package --timeout 3000 --durations=0 -p no:cacheprovider lab/tests/test_package.py

# Issue 36, acceptance 2 in the aarch64 lab (docs/lab.md, "The arm64 package in the aarch64
# guest"): the arm64 .deb, built as dist-arm64 builds it (zstd, no lintian; or
# MYACCEL_LAB_DEB_ARM64=FILE), installed with apt in a fresh neoverse-n1 guest, then its
# compiled libraries imported, `myaccel --version`, doctor, probe and plan as root. Not in
# .ci/run (aarch64 TCG: about 40 minutes; the image's debootstrap 30 more when not cached).
# Bounded: SIGINT after 90 min, SIGKILL 5 minutes later.
lab-package-arm-test: venv
	@bash scripts/ensure-lab-deps.sh arm64
	timeout --signal=INT --kill-after=300 5400 $(BIN)/pytest -q -m lab_package --timeout 5000 --durations=0 -p no:cacheprovider lab/tests/test_package_arm.py

# The wheel and the Debian packages for amd64 and arm64 (docs/packaging.md), in dist/:
# each .deb bundles the pinned Python libraries (packaging/requirements.lock) from PyPI's
# manylinux wheels for its architecture (arm64 cross-built here), then lintian checks it.
# Not part of `make test`. `make dist-arm64` also runs packaging/arm64-smoke.sh.
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' src/myaccel/__init__.py)
DIST_WHEEL := dist/myaccel-$(VERSION)-py3-none-any.whl

dist: dist-amd64 dist-arm64
	@ls -l dist/

dist-wheel: venv
	@bash scripts/ensure-dist-deps.sh
	@mkdir -p build && rm -f dist/myaccel-*.whl
	@start=$$SECONDS; $(BIN)/python -m build --wheel --outdir dist . >build/wheel.log 2>&1 \
	  || { tail -20 build/wheel.log; exit 1; }; \
	  echo "built $(DIST_WHEEL) in $$((SECONDS - start)) s"

dist-amd64: dist-wheel
	$(BIN)/python packaging/build_deb.py --arch amd64 --wheel $(DIST_WHEEL)

dist-arm64: dist-wheel
	$(BIN)/python packaging/build_deb.py --arch arm64 --wheel $(DIST_WHEEL)
	bash packaging/arm64-smoke.sh dist/myaccel_$(VERSION)_arm64.deb

demo: system-deps venv
	@bash scripts/demo.sh

bench-probe: venv
	$(BIN)/python scripts/bench_probe.py
	@test -f scripts/bench_binary.py && $(BIN)/python scripts/bench_binary.py || true

clean:
	rm -rf $(VENV) build dist .mypy_cache .pytest_cache .ruff_cache
