"""The kopf peering object goes with the operator's Deployment (``shell.ownership``):
the chart makes it in a Helm hook, which ``helm uninstall`` never deletes, so the
operator puts an ownerReference to its Deployment on it and the garbage collector
deletes it with the Deployment."""

from __future__ import annotations

import asyncio

import pytest
import yaml
from tests.shell.conftest import NS, make_deployment, wait_for

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


def owners(obj):
    return [(r["kind"], r["name"], r["uid"])
            for r in (obj or {}).get("metadata", {}).get("ownerReferences") or []]


async def _owner_does(emulated, work):
    client = kube.Client(Connection(server=emulated.url, insecure=True))
    try:
        return await work(ownership.Owner(client, NS, "kooper"))
    finally:
        await client.close()


def _own(emulated, name):
    return asyncio.run(_owner_does(emulated, lambda owner: owner.own_peering(name)))


def test_the_peering_object_is_owned_by_the_deployment_and_goes_with_it(peerings):
    uid = make_deployment(peerings)["metadata"]["uid"]
    peerings.create(PEERING, {"metadata": {"name": "kooper", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "cm"}]}},
        namespace=NS)
    assert _own(peerings, "kooper")
    assert owners(peerings.get(PEERING, "kooper", namespace=NS)) == [
        ("ConfigMap", "other", "cm"), ("Deployment", "kooper", uid)]
    version = peerings.get(PEERING, "kooper", namespace=NS)["metadata"]["resourceVersion"]
    assert _own(peerings, "kooper")  # owned already: not written again
    assert peerings.get(PEERING, "kooper", namespace=NS)["metadata"]["resourceVersion"] == version
    assert not _own(peerings, "absent")
    peerings.delete(DEPLOYMENT, "kooper", namespace=NS)
    wait_for(lambda: peerings.get(PEERING, "kooper", namespace=NS) is None,
             what="the peering object is garbage-collected with the Deployment")


def test_a_peering_object_the_hook_makes_late_or_anew_is_owned_too(peerings):
    """The chart's hook makes the object after a first install's pods may have started,
    and deletes and makes it again on every upgrade (before-hook-creation), also one that
    restarts no pod: the operator keeps looking."""
    uid = make_deployment(peerings)["metadata"]["uid"]

    def owned():
        return owners(peerings.get(PEERING, "kooper", namespace=NS)) == [
            ("Deployment", "kooper", uid)]

    async def keep(owner):
        task = asyncio.ensure_future(owner.keep_owning_peering("kooper", every_s=0.05))
        try:
            await asyncio.sleep(0.2)  # not there yet
            peerings.create(PEERING, {"metadata": {"name": "kooper"}}, namespace=NS)
            await _until(owned)
            peerings.delete(PEERING, "kooper", namespace=NS)  # an upgrade's hook
            peerings.create(PEERING, {"metadata": {"name": "kooper"}}, namespace=NS)
            assert not owned()
            await _until(owned)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(_owner_does(peerings, keep))


async def _until(check):
    for _ in range(200):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("not owned in time")


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
                await _until(lambda: owners(peerings.get(PEERING, "kooper", namespace=NS)))
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


def test_an_owner_already_named_leaves_the_references_as_they_are():
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "kooper", "uid": "u"}
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "c"}
    metadata = {"name": "l", "ownerReferences": [owner, other]}
    assert ownership.with_owner(metadata, owner) == metadata  # not re-ordered: no change
    assert ownership.with_owner(metadata, None) == metadata
    moved = {**owner, "uid": "new"}  # the Deployment made again: its reference replaced
    assert ownership.with_owner(metadata, moved)["ownerReferences"] == [other, moved]
