"""The kopf peering object goes with the operator's Deployment (``shell.ownership``):
the chart makes it in a Helm hook, which ``helm uninstall`` never deletes, so the
operator puts an ownerReference to its Deployment on it and the garbage collector
deletes it with the Deployment."""

from __future__ import annotations

import asyncio

import pytest
import yaml
from tests.shell.conftest import NS, wait_for

from kooper.sdk.connection import Connection
from kooper.shell import controller, kube, ownership, settings
from kooper.shell.login import Login

PEERING = "kopf.dev/v1/kopfpeerings"
DEPLOYMENT = "apps/v1/deployments"

KOPF_PEERING_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "kopfpeerings.kopf.dev"},
    "spec": {"scope": "Namespaced", "group": "kopf.dev",
             "names": {"kind": "KopfPeering", "plural": "kopfpeerings",
                       "singular": "kopfpeering"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                 "openAPIV3Schema": {"type": "object", "properties": {"status": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}
"""The namespaced half of the chart's templates/kopfpeering-crds.yaml."""


@pytest.fixture
def peerings(emulated, tmp_path):
    path = tmp_path / "kopfpeering.yaml"
    path.write_text(yaml.safe_dump(KOPF_PEERING_CRD))
    emulated.register_crds([path])
    return emulated


def make_deployment(emulated, name="kooper"):
    return emulated.create(DEPLOYMENT, {
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "operator", "image": "k"}]}}}},
        namespace=NS)


def owners(obj):
    return [(r["kind"], r["name"], r["uid"])
            for r in (obj or {}).get("metadata", {}).get("ownerReferences") or []]


async def _adopt(emulated, name, **kwargs):
    client = kube.Client(Connection(server=emulated.url, insecure=True))
    try:
        return await ownership.Owner(client, NS, "kooper").adopt_peering(name, **kwargs)
    finally:
        await client.close()


def test_the_peering_object_is_owned_by_the_deployment_and_goes_with_it(peerings):
    uid = make_deployment(peerings)["metadata"]["uid"]
    peerings.create(PEERING, {"metadata": {"name": "kooper", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "cm"}]}},
        namespace=NS)
    assert asyncio.run(_adopt(peerings, "kooper"))
    assert owners(peerings.get(PEERING, "kooper", namespace=NS)) == [
        ("ConfigMap", "other", "cm"), ("Deployment", "kooper", uid)]
    assert asyncio.run(_adopt(peerings, "kooper"))  # owned already: nothing changes
    assert len(owners(peerings.get(PEERING, "kooper", namespace=NS))) == 2
    peerings.delete(DEPLOYMENT, "kooper", namespace=NS)
    wait_for(lambda: peerings.get(PEERING, "kooper", namespace=NS) is None,
             what="the peering object is garbage-collected with the Deployment")


def test_a_peering_object_the_hook_makes_after_the_operator_started_is_owned_too(peerings):
    """On a first install the chart's post-install hook makes the object after the
    operator's pod may have started: the operator looks again a few times."""
    uid = make_deployment(peerings)["metadata"]["uid"]

    async def late():
        adoption = asyncio.ensure_future(_adopt(peerings, "kooper", tries=50, every_s=0.05))
        await asyncio.sleep(0.2)
        peerings.create(PEERING, {"metadata": {"name": "kooper"}}, namespace=NS)
        return await adoption

    assert asyncio.run(late())
    assert owners(peerings.get(PEERING, "kooper", namespace=NS)) == [("Deployment", "kooper", uid)]
    assert not asyncio.run(_adopt(peerings, "absent", tries=2, every_s=0.01))


@pytest.mark.parametrize(("namespaces", "owned"), [
    ((NS,), True),
    (("team-a",), False),  # an owner in another namespace would get it collected at once
    ((), False),  # cluster-wide: a ClusterKopfPeering cannot have a namespaced owner
])
def test_the_operator_owns_its_peering_object_only_in_its_own_namespace(
        peerings, namespaces, owned):
    uid = make_deployment(peerings)["metadata"]["uid"]
    for namespace in {NS, *namespaces}:
        peerings.create(PEERING, {"metadata": {"name": "kooper"}}, namespace=namespace)
    config = settings.Config(peering="kooper", owner="kooper", namespaces=namespaces,
                             leader_namespace=NS, gc_freeze=False)

    async def run():
        shell = controller.Shell(config)
        shell.login = Login.static(Connection(server=peerings.url, insecure=True))
        shell.start({"kooper_groups": {}, "kooper_connectors": {}, "kooper_configmaps": {}})
        try:
            if owned:
                assert shell._adoption is not None
                assert await shell._adoption
            else:
                assert shell._adoption is None
        finally:
            await shell.stop()

    asyncio.run(run())
    expected = [("Deployment", "kooper", uid)] if owned else []
    assert owners(peerings.get(PEERING, "kooper", namespace=NS)) == expected
    for namespace in namespaces:
        assert owners(peerings.get(PEERING, "kooper", namespace=namespace)) == (
            expected if namespace == NS else [])
