"""The chart's objects, as the real API server admits them (``kubectl apply --dry-run=server``).

tests/chart validates the render offline against Kubernetes' OpenAPI schemas; those do
not hold the API server's own validation (a readiness probe may not set
terminationGracePeriodSeconds, requests may not exceed limits, quantities must parse) nor
Pod Security admission. Here every value set goes to the server into a namespace that
enforces the restricted Pod Security Standard, warnings counted as errors.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from e2e import localcluster, tools
from tests.chart import conftest as chart

pytestmark = pytest.mark.realk8s

OFFLINE_ONLY = {"monitoring.coreos.com/v1", "kopf.dev/v1"}
"""APIs whose CRDs the local control plane does not serve (the Prometheus Operator's) or
this check does not install (kopf's peering CRDs come with the release)."""


def value_sets(namespace: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """(release name, values) by id; every namespace the chart writes to is ``namespace``."""
    return {
        "default": ("kooper", {}),
        "non-default": ("kooper", {
            **chart.NON_DEFAULT_VALUES,
            "operator": {**chart.NON_DEFAULT_VALUES["operator"], "watchNamespace": namespace},
            "workers": {"namespaces": [namespace]},
        }),
        "longest-release-name": ("r" * 53, {}),
        # Helm accepts dots in release names; a Service name may not hold one.
        "dotted-release-name": ("my.release", {}),
        "odd": ("kooper", {
            "fullnameOverride": "ops-kooper",
            "serviceAccount": {"create": False},
            "operator": {
                "podLabels": {"example.com/team": "ops"},
                "livenessProbe": {"terminationGracePeriodSeconds": 5},
                "readinessProbe": {"successThreshold": 2},
                "resources": {"requests": {"cpu": 0.5, "memory": "1.5Gi"},
                              "limits": {"cpu": "1500m", "memory": "2e9"}},
                "podSecurityContext": {"fsGroup": 10001},
            },
        }),
        "single-with-peering": ("kooper", {"replicaCount": 1, "kopfPeering": {"enabled": True}}),
        "all-namespaces": ("kooper", {"operator": {"watchAllNamespaces": True}}),
    }


@pytest.fixture
def restricted(k: tools.Kube, namespace: str) -> str:
    k.kubectl("label", "namespace", namespace,
              "pod-security.kubernetes.io/enforce=restricted",
              "pod-security.kubernetes.io/warn=restricted")
    return namespace


@pytest.mark.parametrize("which", list(value_sets("ns")))
def test_the_api_server_admits_every_object_in_a_restricted_namespace(
        k: tools.Kube, crds: None, restricted: str, which: str) -> None:
    release, values = value_sets(restricted)[which]
    docs = [d for d in localcluster.render_chart(values, release=release, namespace=restricted)
            if d["kind"] != "CustomResourceDefinition" and d["apiVersion"] not in OFFLINE_ONLY]
    assert any(d["kind"] == "Deployment" for d in docs)
    out = k.kubectl("apply", "--dry-run=server", "--warnings-as-errors", "-f", "-",
                    input_text=yaml.safe_dump_all(docs))
    assert out.count("(server dry run)") == len(docs), out
