"""Shared fixtures for the offline chart checks: a real Helm, the CRDs, the examples.

Helm comes from the ``helm-python-sdk`` package (the project's ``test`` extra): it
bundles Helm's own Go SDK as a shared library, so ``lint`` and ``render`` here are
Helm's code, not a re-implementation, and nothing is downloaded at test time.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kooper"
CRDS = ROOT / "crds"
EXAMPLES = ROOT / "examples"
KUBE_VERSION = "1.37.0"
"""The newest Kubernetes version kubernetes-validate ships schemas for (pinned in pyproject)."""

RELEASE = "kooper"
NAMESPACE = "kooper-system"

NON_DEFAULT_VALUES: dict[str, Any] = {
    "operator": {
        "watchNamespace": "team-a",
        "extraArgs": ["--verbose"],
        "extraEnv": [{"name": "KOOPER_LOG", "value": "debug"}],
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "ops", "effect": "NoSchedule"}
        ],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
                            ]
                        }
                    ]
                }
            }
        },
        "priorityClassName": "system-cluster-critical",
        "podAnnotations": {"example.com/team": "ops"},
    },
    "image": {"repository": "registry.invalid/kooper", "digest": "sha256:" + "a" * 64},
    "imagePullSecrets": [{"name": "pull-secret"}],
    "metrics": {
        "serviceMonitor": {
            "enabled": True,
            "labels": {"release": "prometheus"},
            "scrapeTimeout": "10s",
        },
        "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"},
                           "severity": "critical", "for": {"membersFenced": "1m"}},
        "dashboard": {"enabled": True, "annotations": {"grafana_folder": "kooper"}},
    },
    "podDisruptionBudget": {"minAvailable": 1},
    "workers": {"namespaces": ["team-a", "team-b"]},
    "crds": {"keep": False},
    "kopfPeering": {"crds": {"enabled": False}},
}
"""Every optional branch of the templates at once."""


def _helm() -> Any:
    try:
        import helm_python  # the test extra's Helm
    except ImportError as exc:  # a declared dependency: fail loudly, never download
        pytest.fail(
            "Helm is missing: install the test extra (pip install -e '.[test]', which pins "
            f"helm-python-sdk) to run the chart checks ({exc})",
            pytrace=False,
        )
    return helm_python


@pytest.fixture(scope="session")
def helm() -> Any:
    """The ``helm_python`` module (Helm's Go SDK through ctypes)."""
    return _helm()


Rendered = dict[str, list[dict[str, Any]]]
"""Template path → the Kubernetes objects it rendered."""


def parse_manifests(rendered: dict[str, str]) -> Rendered:
    out: Rendered = {}
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        out[path] = [doc for doc in yaml.safe_load_all(text) if doc]
    return out


@pytest.fixture(scope="session")
def render(helm: Any) -> Callable[..., Rendered]:
    """Render the chart offline with values; raises Helm's error on bad values."""
    chart = helm.Chart.load(str(CHART))

    def _render(values: dict[str, Any] | None = None, *, name: str = RELEASE,
                namespace: str = NAMESPACE) -> Rendered:
        return parse_manifests(chart.render(values or {}, name=name, namespace=namespace))

    return _render


@pytest.fixture(scope="session")
def render_text(helm: Any) -> Callable[..., dict[str, str]]:
    chart = helm.Chart.load(str(CHART))

    def _render(values: dict[str, Any] | None = None) -> dict[str, str]:
        return dict(chart.render(values or {}, name=RELEASE, namespace=NAMESPACE))

    return _render


def objects(rendered: Rendered) -> Iterator[dict[str, Any]]:
    for docs in rendered.values():
        yield from docs


def find(rendered: Rendered, kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [
        o
        for o in objects(rendered)
        if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]


def load_yaml_docs(path: pathlib.Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


@pytest.fixture(scope="session")
def crds() -> dict[str, dict[str, Any]]:
    """The source CRDs by kind."""
    out = {}
    for path in sorted(CRDS.glob("*.yaml")):
        (crd,) = load_yaml_docs(path)
        out[crd["spec"]["names"]["kind"]] = crd
    return out


@pytest.fixture(scope="session")
def examples() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs.extend(load_yaml_docs(path))
    return docs
