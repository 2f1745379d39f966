# kooper — every target installs what it needs into .venv from this repository's own files.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.kooper-installed
# Outside the repository, so a fresh clone reuses it (mypy checks each entry itself).
CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kooper

.PHONY: demo test lint pytest bench e2e kind-tier kind-drills kind-up kind-down clean venv kube-bins

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[operator,demo,analytics,test]'
	touch $(STAMP)

venv: $(STAMP)

## make demo: the embedded cluster drill (6 pods, 3 connectors) under three protocols/policies.
demo: $(STAMP)
	$(BIN)/kooper demo $(DEMO_ARGS)

## make test: lint (ruff, mypy --strict, import-linter); the builds both tiers need (the kube
## binaries, promtool, and the kind tier's tools and images: cached, so seconds when warm, and
## kept off the tiers' timing); then the whole pytest suite and the kind tier's drills side by
## side: most of either is waiting on real processes (a 2-core machine ran pytest alone at a
## load average below 1). Each tier's output is printed whole when it ends.
test: lint kube-bins promtool
	bash hack/kind/prepare.sh
	@$(MAKE) --no-print-directory -j2 --output-sync=target pytest kind-drills

lint: $(STAMP)
	$(BIN)/ruff check operator tests e2e benchmarks
	$(BIN)/mypy --cache-dir $(CACHE)/mypy
	$(BIN)/lint-imports

# The drills of the kind tier run on kind only (make kind-tier), not on the local plane too.
pytest: $(STAMP) kube-bins
	KOOPER_REQUIRE_REALK8S=1 $(BIN)/python -m pytest -q -rs -m "not kind_tier" $(PYTEST_ARGS)

## make kube-bins: build kube-apiserver, kube-controller-manager, kubectl and etcd from the
## Go modules pinned in hack/kube/go.mod into ~/.cache/kooper/ (a no-op when cached).
kube-bins:
	bash hack/kube/build.sh

## make bench: prints the benchmark numbers (not a timed test).
bench: $(STAMP) kube-bins
	$(BIN)/python benchmarks/run_all.py

## make e2e: every drill on a 3-node kind cluster (hack/kind: Docker installed and started
## where this runs as root on Debian, kind and helm from their Go modules, the node image
## pulled or built offline, all cached in ~/.cache/kooper and Docker).
e2e: $(STAMP) kube-bins
	bash hack/kind/prepare.sh
	$(BIN)/python -m pytest -q -rs e2e --with-e2e $(PYTEST_ARGS)

## make kind-tier: the kind drills make test runs (rolling restarts, a pod kill, node failures).
kind-tier: $(STAMP) kube-bins
	bash hack/kind/prepare.sh
	@$(MAKE) --no-print-directory kind-drills

# The kind tier's drills alone: make kind-tier and make test prepare what they need first.
kind-drills: $(STAMP) kube-bins
	$(BIN)/python -m pytest -q -rs e2e --with-e2e -m kind_tier $(PYTEST_ARGS)

## make kind-up / kind-down: the drills' kind cluster by hand, named by KOOPER_KIND_CLUSTER
## (default kooper-e2e; KOOPER_E2E_CLUSTER=<that name> make e2e then reuses it).
kind-up:
	bash hack/kind/cluster.sh up
kind-down:
	bash hack/kind/cluster.sh down

## make promtool: fetch Prometheus' promtool (the chart tests check the alerts and the
## dashboard with it) from Debian's prometheus package (or its Go module) into ~/.cache/kooper/
## (a no-op when cached).
.PHONY: promtool
promtool:
	bash hack/promtool/build.sh
pytest: promtool

clean:
	rm -rf $(VENV) out report
