# zeroscaler: every target installs what it needs by itself (venv, Python packages, control plane).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ISOLATE := $(PY) -m localcluster isolate --
NETNS ?= zeroscaler-dev
PYTEST_ARGS ?=
DEMO_ARGS ?=
CHAOS_ARGS ?=

.PHONY: help install controlplane image release push release-tools lint format test unit demo bench chaos cluster cluster-down clean package-check

help:
	@echo "make demo          a kopf operator on a local Kubernetes: sleeps, wakes on a Backup, reconciles"
	@echo "make test          lint-free code, unit tests and system tests on a real local control plane"
	@echo "make lint          ruff, ruff format --check, mypy --strict, import-linter"
	@echo "make bench         benchmarks (tables in the terminal, plots in bench/results/)"
	@echo "make chaos         fault scenarios in full on a control plane of their own (CHAOS_ARGS=\"etcd relist\")"
	@echo "make cluster       start a local control plane in the background; prints its kubeconfig"
	@echo "make cluster-down  stop it"
	@echo "make controlplane  build (or reuse) the control-plane binaries"
	@echo "make image         build zeroscaler's container image archive (dist/zeroscaler-image.tar)"
	@echo "make package-check pip install . into a fresh virtualenv; its console scripts must run"
	@echo "make release       dist/release: amd64+arm64 image index, chart, manifest, SBOM, SHA256SUMS"
	@echo "make push REGISTRY=host[:port]/path  push the release's image index and chart (OCI)"

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit("Python 3.11+ is needed" if sys.version_info < (3, 11) else 0)'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# Builds need the Go module proxy, so they run outside the loopback-only namespace.
controlplane: install
	@$(PY) -m localcluster build

# Debian packages and PyPI: outside the loopback-only namespace too. No Docker daemon needed.
# Rebuilt when the pins or the code in it change.
IMAGE_TAR := dist/zeroscaler-image.tar
IMAGE_INPUTS := pyproject.toml $(wildcard image/*.lock) \
	$(shell find image zeroscaler webhook controller certs -name '*.py' 2>/dev/null)

$(IMAGE_TAR): $(STAMP) $(IMAGE_INPUTS)
	@$(PY) -m image build --out $@ >/dev/null

# The demo's example operator: the same Debian base, its own locked wheels and module.
OPERATOR_TAR := dist/backup-operator-image.tar
OPERATOR_INPUTS := image/debian.lock examples/backup-operator/requirements.lock \
	examples/backup-operator/operator.py $(shell find image -name '*.py' 2>/dev/null)

$(OPERATOR_TAR): $(STAMP) $(OPERATOR_INPUTS)
	@$(PY) -m image build --image backup-operator --out $@ >/dev/null

image: $(IMAGE_TAR)

# A release of pyproject's version (VERSION must equal it): both architectures, built outside the
# loopback-only namespace (Debian packages, PyPI). The foreign one runs under a pinned qemu.
VERSION ?= $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
RELEASE_DIR := dist/release
RELEASE_SUMS := $(RELEASE_DIR)/SHA256SUMS
RELEASE_INPUTS := $(IMAGE_INPUTS) $(shell find charts -type f 2>/dev/null)

$(RELEASE_SUMS): $(STAMP) $(RELEASE_INPUTS)
	@$(PY) -m image release --version $(VERSION) --out $(RELEASE_DIR) >/dev/null

release: install
	$(PY) -m image release --version $(VERSION) --out $(RELEASE_DIR)

# crane and the CNCF distribution registry, from their Go modules (cached like helm).
release-tools: install
	@$(PY) -m localcluster tools >/dev/null

# PLAIN_HTTP=1 for a registry without TLS. Credentials: `crane auth login`, `helm registry login`.
REGISTRY ?=
PLAIN_HTTP ?=
push: install release-tools
	@test -n "$(REGISTRY)" || { echo "usage: make push REGISTRY=host[:port]/path"; exit 2; }
	@test -f $(RELEASE_SUMS) || { echo "no release in $(RELEASE_DIR): make release first"; exit 2; }
	$(PY) -m image push --registry $(REGISTRY) --release $(RELEASE_DIR) $(if $(PLAIN_HTTP),--plain-http)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The system tests install the chart from the image, on the real node (and the demo's operator).
# Every marker runs by default, the short fault scenarios (chaos) too; `make chaos` runs them in
# full. TEST_MARKERS="not chaos" leaves them out.
TEST_MARKERS ?=
test: install controlplane release-tools $(IMAGE_TAR) $(OPERATOR_TAR) $(RELEASE_SUMS)
	$(ISOLATE) $(PY) -m pytest -m "$(TEST_MARKERS)" $(PYTEST_ARGS)

unit: install
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# Images and binaries are built first, outside the loopback-only namespace.
demo: install controlplane $(IMAGE_TAR) $(OPERATOR_TAR)
	$(ISOLATE) $(PY) -m demo $(DEMO_ARGS)

bench: install controlplane $(IMAGE_TAR)
	$(ISOLATE) $(PY) -m bench

# Kills the API server, etcd and controllers of its own cluster; bounded in time per scenario.
chaos: install controlplane
	$(ISOLATE) $(PY) -m tests.support.chaos $(CHAOS_ARGS)

# As a user installs it: `pip install .` into a fresh virtualenv (PyPI, so outside the loopback-only
# namespace); the wheel must hold one import package and every console script must start.
PACKAGE_VENV := dist/package-check
package-check:
	@rm -rf $(PACKAGE_VENV) && $(PYTHON) -m venv $(PACKAGE_VENV)
	$(PACKAGE_VENV)/bin/python -m pip install --quiet .
	$(PACKAGE_VENV)/bin/python tests/support/package_check.py
	@rm -rf $(PACKAGE_VENV) build

# A long-lived cluster for a developer lives in a named loopback-only namespace (root) or, where
# that cannot be made, on the host's loopback. nsenter, unlike `ip netns exec`, keeps /sys and so the
# cgroup hierarchies the real node needs.
cluster: install controlplane
	@if [ "$$(id -u)" = 0 ] && command -v ip >/dev/null; then \
	  ip netns add $(NETNS) 2>/dev/null || true; ip netns exec $(NETNS) ip link set lo up; \
	  nsenter --net=/run/netns/$(NETNS) $(PY) -m localcluster up; \
	  echo "clients run inside its network namespace, e.g.:"; \
	  echo "  ip netns exec $(NETNS) $$($(PY) -m localcluster build 2>/dev/null)/kubectl --kubeconfig <path above> get nodes"; \
	else $(PY) -m localcluster up; fi

cluster-down: install
	@if [ "$$(id -u)" = 0 ] && ip netns list 2>/dev/null | grep -qw $(NETNS); then \
	  nsenter --net=/run/netns/$(NETNS) $(PY) -m localcluster down; ip netns del $(NETNS); \
	else $(PY) -m localcluster down; fi

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis *.egg-info
