"""The real local control plane (``kooper.controlplane``) under the drills and integration tests.

One cluster per pytest session, shared by tests/integration and e2e (both conftests
call ``shared``): kube-apiserver, etcd and kube-controller-manager from the binaries
``make kube-bins`` built, and the kubelet stand-in running pods as local processes.
Without the binaries the tests skip with one line, unless ``KOOPER_REQUIRE_REALK8S``
is set (``make test`` sets it, after building them): then they fail.

``install_chart`` renders charts/kooper with the test extra's Helm and applies it
server-side, so the operator runs as the chart's Deployment (a process pod, with the
chart's ServiceAccount and RBAC), as on kind.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest
import yaml

from e2e import tools
from kooper.controlplane import binaries, host

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "kooper"
REQUIRE_ENV = "KOOPER_REQUIRE_REALK8S"

_handle: host.Handle | None = None


def shared(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> host.Handle:
    """The session's local cluster, started on first use and stopped at the session's end."""
    global _handle
    if _handle is not None:
        return _handle
    try:
        bins = binaries.locate(build=False)
    except binaries.BinariesError as exc:
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"realk8s: {exc}", pytrace=False)
        pytest.skip(f"realk8s: no control-plane binaries (make kube-bins): {exc}")
    handle = host.start(tmp_path_factory.mktemp("kube"), bin_dir=bins)

    def stop() -> None:
        global _handle
        handle.stop()
        _handle = None

    config.add_cleanup(stop)
    _handle = handle
    return handle


def kube_of(handle: host.Handle) -> tools.Kube:
    """kubectl (the one built with the control plane) against the local cluster."""
    return tools.Kube("kooper-local", kubeconfig=str(handle.kubeconfig),
                      kubectl=str(handle.kubectl))


def render_chart(values: dict[str, Any], *, release: str, namespace: str) -> list[dict[str, Any]]:
    """charts/kooper rendered by the test extra's Helm: every object, CRDs first."""
    import helm_python

    chart = helm_python.Chart.load(str(CHART))
    rendered = chart.render(values, name=release, namespace=namespace)
    docs = [doc for path, text in sorted(rendered.items()) if not path.endswith("NOTES.txt")
            for doc in yaml.safe_load_all(text) if doc]
    return sorted(docs, key=lambda d: d["kind"] != "CustomResourceDefinition")


def apply(kube: tools.Kube, docs: list[dict[str, Any]], *, namespace: str) -> str:
    """``kubectl apply --server-side`` of ``docs`` (as one YAML stream)."""
    return kube.kubectl("apply", "--server-side", "--force-conflicts", "-n", namespace, "-f", "-",
                        input_text=yaml.safe_dump_all(docs), timeout=120)


def install_chart(kube: tools.Kube, *, namespace: str, release: str = "kooper",
                  values: dict[str, Any] | None = None) -> None:
    """What ``helm upgrade --install --wait`` does for the drills: CRDs, then the rest, ready."""
    if namespace not in kube.kubectl("get", "namespaces", "-o", "name"):
        kube.kubectl("create", "namespace", namespace)
    docs = render_chart(values or {"image": {"repository": "kooper", "tag": "0.1.0"}},
                        release=release, namespace=namespace)
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    apply(kube, crds, namespace=namespace)
    kube.wait_established(*(crd["metadata"]["name"] for crd in crds))
    apply(kube, [d for d in docs if d["kind"] != "CustomResourceDefinition"], namespace=namespace)
    for deployment in (d for d in docs if d["kind"] == "Deployment"):
        kube.kubectl("-n", namespace, "rollout", "status",
                     f"deployment/{deployment['metadata']['name']}", "--timeout=180s",
                     timeout=200)
