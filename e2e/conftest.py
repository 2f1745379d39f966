"""The e2e drills: on the real local control plane by default, on kind with ``--with-e2e``.

Drills marked ``realk8s`` as well as ``e2e`` run on every ``make test``: against the
local control plane (``kooper.controlplane``: real kube-apiserver, etcd and
kube-controller-manager, pods as local processes), with the chart installed as on
kind. With ``--with-e2e`` (``make e2e``) the same drills, and the kind-only ones, run
on a kind cluster instead (hack/kind/cluster.sh: Docker installed and started where
this runs as root on Debian, kind and helm built from their pinned Go modules, the node
image pulled or built offline); where Docker cannot be had they skip with one line
saying why, unless ``KOOPER_REQUIRE_KIND`` is set, which makes that an error. Kind-only
drills skip with one line without ``--with-e2e``.
The offline unit tests in this folder (invariants, recorder) always run.

Environment: ``KOOPER_E2E_CLUSTER`` reuses an existing kind cluster of that name (it is
then never deleted); otherwise the suite creates (first deleting any left over) the one
``KOOPER_KIND_CLUSTER`` names, as hack/kind/cluster.sh does (default ``kooper-e2e``), and
``KOOPER_E2E_KEEP=1`` keeps it.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator

import pytest

from e2e import demo, kind, localcluster, tools

ROOT = pathlib.Path(__file__).resolve().parents[1]
NAMESPACE = kind.NAMESPACE
COMPARISON = ROOT / "out" / "e2e" / "comparison.txt"
REQUIRE_KIND = "KOOPER_REQUIRE_KIND"
"""Set (as .ci/run does): kind must run, so what would skip the kind drills fails instead."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--with-e2e",
        action="store_true",
        default=False,
        help="run the kind e2e drills (needs docker, kind, kubectl, helm)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    e2e_items = [item for item in items if item.get_closest_marker("e2e")]
    if not e2e_items:
        return
    if not config.getoption("--with-e2e"):
        reason = "e2e: kind-only drill: pass --with-e2e (make e2e) to run it on kind"
        e2e_items = [item for item in e2e_items if not item.get_closest_marker("realk8s")]
    else:
        missing = tools.kind_unavailable()
        if not missing:
            return
        if os.environ.get(REQUIRE_KIND):
            raise pytest.UsageError(f"{REQUIRE_KIND} is set but kind cannot run: {missing}")
        reason = f"e2e: {missing}"
    for item in e2e_items:
        item.add_marker(pytest.mark.skip(reason=reason))


def pytest_sessionstart(session: pytest.Session) -> None:
    # A table from an earlier run must not pass for this run's.
    COMPARISON.unlink(missing_ok=True)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if COMPARISON.exists():
        terminalreporter.write_sep("=", "kooper analyze: rolling restart, compatible vs eager")
        terminalreporter.write_line(COMPARISON.read_text())


@pytest.fixture(scope="session")
def kube(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tools.Kube]:
    """A cluster with the chart installed: kind with ``--with-e2e``, else the local one."""
    if request.config.getoption("--with-e2e"):
        with kind.cluster(os.environ.get("KOOPER_KIND_CLUSTER") or "kooper-e2e") as kube:
            yield kube
        return
    handle = localcluster.shared(request.config, tmp_path_factory)
    kube = localcluster.kube_of(handle)
    # Watching only its namespace: tests/integration runs a release of its own on the same cluster.
    localcluster.install_chart(
        kube, namespace=NAMESPACE,
        values={"image": {"repository": "kooper", "tag": "0.1.0"},
                "operator": {"watchNamespace": NAMESPACE}})
    yield kube  # the local cluster stops at the session's end (localcluster)


@pytest.fixture(scope="module")
def group(kube: tools.Kube) -> demo.Demo:
    """The examples/ group, applied and balanced once per module (drills reset it)."""
    g = demo.Demo(kube, NAMESPACE)
    g.apply_examples()
    g.wait_balanced(demo.REPLICAS, timeout_s=600)
    return g
