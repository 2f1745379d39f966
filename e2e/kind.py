"""A kind cluster for the drills and the kind benchmark: hack/kind/cluster.sh (Docker,
the pinned kind/helm/kubectl, the node image pulled or built offline, kooper's images
loaded), then the chart installed by the real ``helm``.

``KOOPER_E2E_CLUSTER`` reuses an existing cluster of that name (never deleted);
``KOOPER_E2E_KEEP=1`` keeps the one created here.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import subprocess
from collections.abc import Iterator

from e2e import tools

ROOT = pathlib.Path(__file__).resolve().parents[1]
NAMESPACE = "kooper"


def events_dir(name: str) -> pathlib.Path:
    """Where cluster ``name``'s nodes mount the workers' events directory from (as
    hack/kind/cluster.sh computes it)."""
    if os.environ.get("KOOPER_KIND_EVENTS"):
        return pathlib.Path(os.environ["KOOPER_KIND_EVENTS"])
    cache = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
    return cache / "kooper" / "kind-events" / name


@contextlib.contextmanager
def cluster(default_name: str) -> Iterator[tools.Kube]:
    """A kind cluster with both images loaded and the chart installed (the CRDs with it)."""
    reuse = os.environ.get("KOOPER_E2E_CLUSTER")
    name = reuse or default_name
    tools.use_kind_tools()
    if not reuse:
        # A cluster left by an interrupted run may have stopped nodes: start from nothing.
        tools.run("kind", "delete", "cluster", "--name", name, timeout=300)
    context = tools.run("bash", str(tools.KIND / "cluster.sh"), "up", name, timeout=3600).strip()
    kube = tools.Kube(context, events_dir=events_dir(name))
    try:
        install_chart(kube)
        yield kube
    finally:
        if not reuse and not os.environ.get("KOOPER_E2E_KEEP"):
            with contextlib.suppress(subprocess.CalledProcessError):
                tools.run("kind", "delete", "cluster", "--name", name, timeout=300)


OPERATOR_SPREAD = json.dumps({"podAntiAffinity": {
    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
        "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "operator"}},
        "topologyKey": "kubernetes.io/hostname"}}]}})
"""The two operator replicas on two nodes when they can be (preferred: a rolling update's
surge pod must still schedule), so a failed node takes at most one of them."""


def install_chart(kube: tools.Kube, *values: str) -> None:
    """``helm upgrade --install`` the chart with the images kind has loaded."""
    kube.helm(
        "upgrade", "--install", "kooper", str(ROOT / "charts" / "kooper"),
        "--namespace", NAMESPACE, "--create-namespace",
        "--set", "image.repository=kooper", "--set", "image.tag=0.1.0",
        "--set", "image.pullPolicy=Never",
        "--set-json", f"operator.affinity={OPERATOR_SPREAD}",
        *values,
        "--wait", "--timeout", "5m",
    )
