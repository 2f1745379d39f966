"""What the operator makes or adopts for itself goes with its Deployment.

``helm uninstall`` deletes what the chart rendered, not what exists only at run time:
the leader Lease (made by ``shell.leader``), and the kopf peering object (a Helm hook,
and Helm never deletes hooks). Given its Deployment (``kooper run --owner``, the chart
passes its own), the operator puts an ownerReference to it on both, and the garbage
collector deletes them with it. Only in the Deployment's namespace: an owner in
another namespace does not count, and the collector would delete the object at once.
Never ``blockOwnerDeletion``: it would need the right to update the owner's finalizers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from kooper.sdk import apierrors
from kooper.shell import kube

logger = logging.getLogger("kooper.shell")

DEPLOYMENTS = "/apis/apps/v1/namespaces/{namespace}/deployments"
KOPF_PEERINGS = "/apis/kopf.dev/v1/namespaces/{namespace}/kopfpeerings"


def with_owner(metadata: Mapping[str, Any], owner: Mapping[str, str] | None) -> dict[str, Any]:
    """``metadata`` whose ownerReferences name ``owner`` (None: unchanged). A reference
    to an earlier object of the same kind and name (a Deployment deleted and made again)
    is replaced: the object must go with the Deployment that exists now."""
    out = dict(metadata)
    if owner is None or dict(owner) in (out.get("ownerReferences") or []):
        return out  # owned already: the references stay as they are, in their order
    refs = [ref for ref in out.get("ownerReferences") or []
            if (ref.get("apiVersion"), ref.get("kind"), ref.get("name"))
            != (owner["apiVersion"], owner["kind"], owner["name"])]
    out["ownerReferences"] = [*refs, dict(owner)]
    return out


@dataclasses.dataclass
class Owner:
    """The operator's Deployment ``name`` in ``namespace``, as an ownerReference."""

    client: kube.Client
    namespace: str
    name: str
    _reference: dict[str, str] | None = None
    _warned: bool = False

    async def reference(self) -> dict[str, str] | None:
        """The ownerReference (the uid read once); None while the Deployment cannot be
        read: nothing waits for it (warned about once)."""
        if self._reference is not None:
            return self._reference
        try:
            deployment = await self.client.request(
                "GET", f"{DEPLOYMENTS.format(namespace=self.namespace)}/{self.name}")
        except apierrors.ApiError as exc:
            if not self._warned:
                self._warned = True
                logger.warning("cannot read Deployment %s/%s, the owner of the leader Lease "
                               "and peering object (they stay when it goes): %s",
                               self.namespace, self.name, exc)
            return None
        uid = (deployment.get("metadata") or {}).get("uid")
        if isinstance(uid, str) and uid:
            self._reference = {"apiVersion": "apps/v1", "kind": "Deployment",
                               "name": self.name, "uid": uid}
        return self._reference

    async def own_peering(self, name: str) -> bool:
        """Add this owner to the KopfPeering ``name`` in the owner's namespace, unless it
        has it; True once it does, False while the object or the owner cannot be read."""
        path = f"{KOPF_PEERINGS.format(namespace=self.namespace)}/{name}"
        for _ in range(3):  # a 409: kopf wrote the object meanwhile; read it again
            try:
                peering = await self.client.request("GET", path)
            except apierrors.NotFound:
                return False
            owner = await self.reference()
            if owner is None:
                return False
            metadata = peering.get("metadata") or {}
            if owner in (metadata.get("ownerReferences") or []):
                return True
            owned = with_owner(metadata, owner)
            try:
                await self.client.request(
                    "PATCH", path, content_type="application/merge-patch+json",
                    body={"metadata": {"ownerReferences": owned["ownerReferences"],
                                       "resourceVersion": metadata.get("resourceVersion")}})
            except apierrors.Conflict:
                continue
            logger.info("KopfPeering %s/%s is owned by Deployment %s now",
                        self.namespace, name, self.name)
            return True
        return False

    async def keep_owning_peering(self, name: str, *, every_s: float = 30.0) -> None:
        """``own_peering`` now and every ``every_s`` until cancelled: the chart's hook makes
        the object after a first install's pods may have started, and makes it anew (without
        the owner) on every upgrade, also one that restarts no pod."""
        owned = True
        while True:
            try:
                now = await self.own_peering(name)
            except apierrors.ApiError as exc:
                now = False
                logger.debug("cannot own KopfPeering %s/%s: %s", self.namespace, name, exc)
            if owned and not now:
                logger.warning("KopfPeering %s/%s is not owned by Deployment %s yet (it stays "
                               "when the Deployment goes): looking again every %gs",
                               self.namespace, name, self.name, every_s)
            owned = now
            await asyncio.sleep(every_s)
