"""``helm uninstall`` leaves no leader Lease and no kopf peering object behind.

Neither is a release object Helm deletes: the operator makes the Lease at run time, and
the peering object is a post-install hook. Both carry an ownerReference to the
operator's Deployment (``shell.ownership``), so the real kube-controller-manager's
garbage collector deletes them once the Deployment goes. The release here is not
named ``kooper`` and shares its namespace with a second one: each elects on a Lease of
its own. An uninstall is what Helm does: delete the release's objects except the hooks
and the kept CRDs.
"""

from __future__ import annotations

import pytest
import yaml
from e2e import localcluster
from tests.integration.conftest import get_json, wait_for

pytestmark = pytest.mark.realk8s

NS = "it-uninstall"
VALUES = {"image": {"repository": "kooper", "tag": "0.1.0"},
          "operator": {"watchNamespace": NS},
          "replicaCount": 1, "kopfPeering": {"enabled": True}}


def owners(obj):
    return [(r["kind"], r["name"]) for r in obj["metadata"].get("ownerReferences") or []]


def exists(k, kind: str, name: str) -> bool:
    return name in [line.split("/", 1)[1]
                    for line in k.kubectl("-n", NS, "get", kind, "-o", "name").split()]


def test_two_releases_lead_on_their_own_lease_and_uninstall_takes_lease_and_peering(k, crds):
    for release in ("team-a", "team-b"):
        # The second release's shared objects (the kopf CRDs, the worker ServiceAccount)
        # are the first's; it watches the same namespace only to share it for this test.
        localcluster.install_chart(k, namespace=NS, release=release, values=VALUES)
    try:
        for release in ("team-a", "team-b"):
            lease = f"{release}-kooper-operator-leader"
            wait_for(f"{release} leads on {lease}", lambda lease=lease: exists(
                k, "leases.coordination.k8s.io", lease))
            wait_for(f"{release}'s Lease owned by its Deployment", lambda lease=lease, r=release:
                     owners(get_json(k, "-n", NS, "leases.coordination.k8s.io", lease))
                     == [("Deployment", f"{r}-kooper")])
            wait_for(f"{release}'s KopfPeering owned by its Deployment", lambda r=release:
                     owners(get_json(k, "-n", NS, "kopfpeerings.kopf.dev", f"{r}-kooper"))
                     == [("Deployment", f"{r}-kooper")])
        assert not exists(k, "leases.coordination.k8s.io", "kooper-operator-leader")

        docs = localcluster.render_chart(VALUES, release="team-a", namespace=NS)
        release_objects = [d for d in docs if d["kind"] != "CustomResourceDefinition"
                           and "helm.sh/hook" not in (d["metadata"].get("annotations") or {})
                           and d["metadata"]["name"] != "kooper-worker"]  # team-b's too
        k.kubectl("delete", "-n", NS, "--wait=false", "-f", "-",
                  input_text=yaml.safe_dump_all(release_objects))
        wait_for("team-a's Lease collected", lambda: not exists(
            k, "leases.coordination.k8s.io", "team-a-kooper-operator-leader"), timeout_s=180)
        wait_for("team-a's KopfPeering collected", lambda: not exists(
            k, "kopfpeerings.kopf.dev", "team-a-kooper"), timeout_s=180)
        # The other release keeps its own.
        assert exists(k, "leases.coordination.k8s.io", "team-b-kooper-operator-leader")
        assert exists(k, "kopfpeerings.kopf.dev", "team-b-kooper")
    finally:
        k.kubectl("delete", "namespace", NS, "--timeout=180s", timeout=200)
