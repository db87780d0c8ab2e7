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
# KUBERNETES=X.Y.Z: every target builds and runs that Kubernetes release instead of the pinned one
# (localcluster/versions.toml), cached beside it; `make compat` needs it.
ifdef KUBERNETES
export ZEROSCALER_KUBERNETES := $(KUBERNETES)
endif

.PHONY: help install controlplane promql-check flux-apply image release push release-tools lint format test unit chart compat demo bench chaos cluster cluster-down clean package-check

help:
	@echo "make demo          a kopf operator on a local Kubernetes: sleeps, wakes on a Backup, reconciles"
	@echo "make test          lint-free code, unit tests and system tests on a real local control plane"
	@echo "make compat KUBERNETES=1.34.4  the compatibility subset of the system tests on that release"
	@echo "make lint          ruff, ruff format --check, mypy --strict, import-linter"
	@echo "make unit          pure logic only: seconds, nothing built"
	@echo "make chart         the chart rendered by the pinned helm under many value sets (part of make test)"
	@echo "make bench         benchmarks (tables in the terminal, plots in bench/results/)"
	@echo "make chaos         fault scenarios in full on a control plane of their own (CHAOS_ARGS=\"etcd relist\")"
	@echo "make cluster       start a local control plane in the background; prints its kubeconfig"
	@echo "make cluster-down  stop it"
	@echo "make controlplane  build (or reuse) the control-plane binaries"
	@echo "make image         build zeroscaler's container image archive (dist/zeroscaler-image.tar)"
	@echo "make package-check the wheel and sdist built, each installed (with and without the server extra) into fresh virtualenvs"
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

# The chart tests' rules checker: Prometheus's own rules reader and PromQL parser in a command of
# ours (localcluster/go/promql-check), built from its committed go.mod/go.sum, cached like flux-apply.
promql-check: install
	@$(PY) -m localcluster promql-check >/dev/null

# Flux's drift correction for the tests: Flux's own server-side apply library (fluxcd/pkg/ssa) in
# a command of ours, built from its committed go.mod/go.sum and cached like the examples.
flux-apply: install
	@$(PY) -m localcluster flux-apply >/dev/null

# Debian packages and PyPI: outside the loopback-only namespace too. No Docker daemon needed.
# Rebuilt when the pins or the code in it change.
IMAGE_TAR := dist/zeroscaler-image.tar
IMAGE_INPUTS := pyproject.toml $(wildcard image/*.lock) \
	$(shell find image oci zeroscaler webhook controller certs -name '*.py' 2>/dev/null)

$(IMAGE_TAR): $(STAMP) $(IMAGE_INPUTS)
	@$(PY) -m image build --out $@ >/dev/null

# The demo's example operator: the same Debian base, its own locked wheels and module.
OPERATOR_TAR := dist/backup-operator-image.tar
OPERATOR_INPUTS := image/debian.lock examples/backup-operator/requirements.lock \
	examples/backup-operator/operator.py $(shell find image oci -name '*.py' 2>/dev/null)

$(OPERATOR_TAR): $(STAMP) $(OPERATOR_INPUTS)
	@$(PY) -m image build --image backup-operator --out $@ >/dev/null

# The example Go operator (controller-runtime, its own webhooks): a static binary built from its
# committed go.mod and go.sum (the Go module proxy, so outside the namespace), in an image of its own.
GO_OPERATOR_TAR := dist/widget-operator-image.tar
GO_OPERATOR_INPUTS := $(wildcard examples/widget-operator/*.go examples/widget-operator/go.*) \
	image/static.py oci/archive.py localcluster/build.py

$(GO_OPERATOR_TAR): $(STAMP) $(GO_OPERATOR_INPUTS)
	@$(PY) -m image build --image widget-operator --out $@ >/dev/null

# cert-manager's own certificate controllers under a main of ours (examples/cert-manager): the
# proof that a due time wakes an operator with a timer. Its CRDs are cached beside the binary.
CERT_MANAGER_TAR := dist/cert-manager-controllers-image.tar
CERT_MANAGER_INPUTS := $(wildcard examples/cert-manager/*.go examples/cert-manager/go.*) \
	image/static.py oci/archive.py localcluster/build.py

$(CERT_MANAGER_TAR): $(STAMP) $(CERT_MANAGER_INPUTS)
	@$(PY) -m image build --image cert-manager --out $@ >/dev/null

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
# Two workers, a control plane each (tests/conftest.py says how the tests are shared out).
TEST_WORKERS ?= 2
test: install controlplane promql-check flux-apply release-tools $(IMAGE_TAR) $(OPERATOR_TAR) \
	$(GO_OPERATOR_TAR) $(CERT_MANAGER_TAR) $(RELEASE_SUMS) $(PACKAGE_STAMP)
	$(ISOLATE) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder \
		-m "$(TEST_MARKERS)" $(PYTEST_ARGS)

# The compatibility run: what a Kubernetes release can break for a user, on that release. The
# control plane itself and discovery both ways (test_cluster, test_discovery), the webhook called
# by the API server, the controller's watches, sleeps and wakes, the chart installed by helm onto
# the real node, and the CLI; the real node proves the kubelet of that release runs our pods.
# Left out: benchmarks, long fault scenarios and the demo, which test zeroscaler, not the release.
COMPAT_TESTS := tests/system/test_cluster.py tests/system/test_discovery.py \
	tests/system/test_webhook.py tests/system/test_controller.py tests/system/test_chart.py \
	tests/system/test_chart_programs.py \
	tests/system/test_cli.py tests/system/test_real_node.py
compat: install
	@test -n "$(KUBERNETES)" || { echo "make compat needs KUBERNETES=X.Y.Z, e.g. KUBERNETES=1.34.4 (proven ones: docs/compatibility.md)"; exit 2; }
	@$(MAKE) --no-print-directory test PYTEST_ARGS="$(COMPAT_TESTS) $(PYTEST_ARGS)"

# Pure: nothing is built or started, so it needs only the virtualenv.
unit: install
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# `helm template` with the pinned Helm 3, which the control-plane build provides (with Helm 4).
chart: install controlplane promql-check
	$(PY) -m pytest tests/chart $(PYTEST_ARGS)

# Images and binaries are built first, outside the loopback-only namespace.
demo: install controlplane $(IMAGE_TAR) $(OPERATOR_TAR)
	$(ISOLATE) $(PY) -m demo $(DEMO_ARGS)

bench: install controlplane $(IMAGE_TAR)
	$(ISOLATE) $(PY) -m bench

# Kills the API server, etcd and controllers of its own cluster; bounded in time per scenario.
chaos: install controlplane
	$(ISOLATE) $(PY) -m chaos $(CHAOS_ARGS)

# As a user installs it: the wheel and the sdist built (`python -m build`), each installed into
# fresh virtualenvs (PyPI, so outside the loopback-only namespace): with the server extra (what the
# image runs: every console script must start) and the command alone (`pipx install`: the command
# runs, the servers name the extra). One import package in each. The command-only virtualenvs stay
# for the system tests, which run `zeroscaler status` from them against the local cluster.
PACKAGE_DIR := dist/package-check
PACKAGE_STAMP := $(PACKAGE_DIR)/.checked
PACKAGE_INPUTS := pyproject.toml README.md LICENSE testkit/programs/package_check.py \
	$(shell find zeroscaler controller webhook certs -name '*.py' 2>/dev/null)
$(PACKAGE_STAMP): $(STAMP) $(PACKAGE_INPUTS)
	@rm -rf $(PACKAGE_DIR) && mkdir -p $(PACKAGE_DIR)
	$(PY) -m build --sdist --wheel --outdir $(PACKAGE_DIR)/dist . >/dev/null
	@set -e; for from in whl tar.gz; do \
	  file=$$(ls $(PACKAGE_DIR)/dist/*.$$from); \
	  for kind in server cli; do \
	    venv=$(PACKAGE_DIR)/$$kind-$$from; extra=$$([ $$kind = server ] && echo '[server]' || true); \
	    echo "package-check: $$(basename $$file)$$extra into an empty virtualenv"; \
	    $(PYTHON) -m venv $$venv; \
	    $$venv/bin/python -m pip install --quiet --disable-pip-version-check "$$file$$extra"; \
	    $$venv/bin/python testkit/programs/package_check.py $$kind; \
	  done; \
	  rm -rf $(PACKAGE_DIR)/server-$$from; \
	done
	@touch $@

package-check: $(PACKAGE_STAMP)

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
