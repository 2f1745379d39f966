"""The e2e drills: on the real local control plane by default, on kind with ``--with-e2e``.

Drills marked ``realk8s`` as well as ``e2e`` run on every ``make test``: against the
local control plane (``kooper.controlplane``: real kube-apiserver, etcd and
kube-controller-manager, pods as local processes), with the chart installed as on
kind. With ``--with-e2e`` (``make e2e``) the same drills, and the kind-only ones, run
on a kind cluster instead; without Docker, kind, kubectl or helm they are skipped
with one line naming what is missing. Kind-only drills skip with one line otherwise.
The offline unit tests in this folder (invariants, recorder) always run.

Environment: ``KOOPER_E2E_CLUSTER`` reuses an existing kind cluster of that name (it is
then never deleted); ``KOOPER_E2E_KEEP=1`` keeps the cluster the suite created.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
from collections.abc import Iterator

import pytest

from e2e import localcluster, tools

ROOT = pathlib.Path(__file__).resolve().parents[1]
NAMESPACE = "kooper"
OPERATOR_IMAGE = "kooper:0.1.0"
WORKER_IMAGE = "kooper-worker:0.1.0"
COMPARISON = ROOT / "out" / "e2e" / "comparison.txt"


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
        missing = tools.missing_tools()
        if not missing:
            return
        reason = f"e2e: missing {', '.join(missing)}"
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
        yield from _kind()
        return
    handle = localcluster.shared(request.config, tmp_path_factory)
    kube = localcluster.kube_of(handle)
    # Watching only its namespace: tests/integration runs a release of its own on the same cluster.
    localcluster.install_chart(
        kube, namespace=NAMESPACE,
        values={"image": {"repository": "kooper", "tag": "0.1.0"},
                "operator": {"watchNamespace": NAMESPACE}})
    yield kube  # noqa: PT022 - the local cluster stops at the session's end (localcluster)


def _kind() -> Iterator[tools.Kube]:
    """A kind cluster with both images loaded and the chart installed (the CRDs with it)."""
    reuse = os.environ.get("KOOPER_E2E_CLUSTER")
    name = reuse or "kooper-e2e"
    created = False
    if not reuse:
        clusters = tools.run("kind", "get", "clusters").split()
        if name not in clusters:
            tools.run(
                "kind",
                "create",
                "cluster",
                "--name",
                name,
                "--config",
                str(ROOT / "e2e" / "kind-config.yaml"),
                "--wait",
                "120s",
                timeout=900,
            )
            created = True
    kube = tools.Kube(f"kind-{name}")
    try:
        for target, image in (("operator", OPERATOR_IMAGE), ("worker", WORKER_IMAGE)):
            tools.run("docker", "build", "--target", target, "-t", image, str(ROOT), timeout=1800)
            tools.run("kind", "load", "docker-image", image, "--name", name, timeout=600)
        kube.helm(
            "upgrade",
            "--install",
            "kooper",
            str(ROOT / "charts" / "kooper"),
            "--namespace",
            NAMESPACE,
            "--create-namespace",
            "--set",
            "image.repository=kooper",
            "--set",
            "image.tag=0.1.0",
            "--set",
            "image.pullPolicy=Never",
            "--wait",
            "--timeout",
            "5m",
        )
        yield kube
    finally:
        if created and not os.environ.get("KOOPER_E2E_KEEP"):
            with contextlib.suppress(subprocess.CalledProcessError):
                tools.run("kind", "delete", "cluster", "--name", name, timeout=300)
