"""Leader election on a coordination Lease, so a second replica is a hot standby.

kopf peering only keeps a second instance from acting; it does not hand over.
Here every replica runs kopf (its indexes stay warm) and one Lease
(``kooper-operator-leader`` in the operator's namespace, or the name ``--leader-lease``
gives: the chart names it after the release, so two releases in one namespace never
share it) says which one runs the group rounds. As in client-go's leader election:

* The leader renews every ``renew_s``; a standby reads the Lease at the same pace.
* Expiry is timed by when *this* replica observed the Lease's record last change
  (its holder or renewTime), never by comparing the written renewTime with our
  clock: a standby takes over once the record stood still for ``lease_s``.
* Every write carries the ``resourceVersion`` it read: of two standbys racing,
  one wins and the other gets 409 and stays standby.
* A leader that could not renew for ``lease_s - renew_s`` (it may have lost the
  Lease without knowing) stops leading at once: its runners stop before any
  standby can take over. A new leader restores everything from the API (the
  WorkerGroup status, the ConfigMaps), exactly like an operator restart.
* That timing rule is a courtesy, not the safety: a stalled process cannot obey it.
  Each term has an **epoch** (a fencing token): ``leaseTransitions + 1`` as this
  replica wrote it when it took the Lease, so every term's is greater than every
  earlier one's. The rounds write it on everything (``shell.writes``), and a leader
  never replaces what a newer epoch wrote: a stalled leader's late writes fail.

The Lease is made at run time, so ``helm uninstall`` would leave it behind: given its
Deployment (``--owner``, ``shell.ownership``), the Lease carries an ownerReference to
it, and deleting the Deployment garbage-collects the Lease. A Lease found without it
(made by an earlier version) gets it on its next renewal.

``decide`` is the pure part (what to do with a read Lease); ``Elector`` does the I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from kooper.sdk import apierrors
from kooper.shell import kube, ownership, settings

logger = logging.getLogger("kooper.shell")

T = TypeVar("T")

LEASE_NAME = settings.LEADER_LEASE
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


class Action(enum.Enum):
    """What a replica does after reading the Lease."""

    CREATE = "create"
    RENEW = "renew"
    TAKE_OVER = "take-over"
    STAND_BY = "stand-by"


def decide(lease: Mapping[str, Any] | None, *, me: str, observed_ms: int, now_ms: int,
           lease_s: int) -> Action:
    """The action for ``me`` given the Lease read (None: it does not exist).

    ``observed_ms``: when this replica first saw the Lease's current record.
    """
    if lease is None:
        return Action.CREATE
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    if holder == me:
        return Action.RENEW
    duration = spec.get("leaseDurationSeconds")
    duration_s = duration if isinstance(duration, int) and duration > 0 else lease_s
    if not holder or now_ms - observed_ms >= duration_s * 1000:
        return Action.TAKE_OVER
    return Action.STAND_BY


def _micro(now: float) -> str:
    return datetime.datetime.fromtimestamp(now, tz=datetime.UTC).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ")


@dataclasses.dataclass
class Elector:
    """One replica's side of the election; ``run`` until cancelled."""

    client: kube.Client
    namespace: str
    identity: str
    on_start: Callable[[], Awaitable[None]]
    on_stop: Callable[[], Awaitable[None]]
    lease_s: int = 15
    renew_s: float = 5.0
    name: str = LEASE_NAME
    clock: Callable[[], float] = time.monotonic
    leading: bool = False
    holder: str = ""
    """The holder this replica last read (for /readyz)."""
    transitions: int = 0
    release_on_stop: bool = True
    """Give the Lease up when stopped cleanly (False: leave it to expire, as a crash does)."""
    epoch: int = 0
    """This term's fencing token (valid while ``leading``)."""
    epoch_floor: Callable[[], int] = lambda: 0
    """The highest epoch seen on the objects (a Lease created anew, after someone deleted
    it, must still outrank every earlier term)."""
    owner: ownership.Owner | None = None
    """The Deployment (in ``namespace``) that owns the Lease, so deleting it deletes the
    Lease; None: no owner, the Lease stays until someone deletes it."""
    _record: tuple[str, str] | None = None
    _observed: float = 0.0
    _renewed: float = 0.0

    def _path(self, name: str = "") -> str:
        base = LEASES.format(namespace=self.namespace)
        return f"{base}/{name}" if name else base

    async def run(self) -> None:
        """Try to lead, renew while leading, stand by otherwise; stops leading on exit."""
        try:
            while True:
                await self.once()
                await asyncio.sleep(self.renew_s)
        finally:
            if self.leading:
                self.leading = False
                await self.on_stop()
                if self.release_on_stop:
                    with contextlib.suppress(apierrors.ApiError, RuntimeError):
                        await self._release()

    async def once(self) -> None:
        """Read the Lease and act on it once. A leader gives each request no longer than
        what is left of its renew deadline (``lease_s - renew_s`` from its last renewal),
        as client-go does: a request that hangs (a slow API server, 429s saying
        Retry-After) must not keep it leading after a standby may have taken over. Only
        the requests are bounded, never ``on_stop``: a step-down cut short could leave a
        runner running."""
        now = self.clock()
        await self._check_lapsed(now)  # lapsed already: stop, then try as a standby
        try:
            lease: dict[str, Any] | None = await self._bounded(
                self.client.request("GET", self._path(self.name)))
        except apierrors.NotFound:
            lease = None
        except (apierrors.ApiError, TimeoutError) as exc:
            logger.warning("leader election: cannot read the Lease: %s",
                           str(exc) or "no answer within the renew deadline")
            await self._check_lapsed(self.clock())
            return
        if lease is not None:
            spec = lease.get("spec") or {}
            record = (str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or ""))
            if record != self._record:
                self._record, self._observed = record, now
            self.holder = record[0]
        action = decide(lease, me=self.identity, observed_ms=int(self._observed * 1000),
                        now_ms=int(now * 1000), lease_s=self.lease_s)
        if action is Action.STAND_BY:
            if self.leading:  # Someone else holds it: we lost it.
                await self._lose("another replica holds the Lease")
            return
        try:
            await self._bounded(self._write(action, lease, now))
        except (apierrors.ApiError, TimeoutError) as exc:
            logger.info("leader election: %s failed: %s", action.value,
                        str(exc) or "no answer within the renew deadline")
            await self._check_lapsed(self.clock())
            return
        self._renewed = now
        self.holder = self.identity
        if not self.leading:
            self.leading = True
            logger.info("leader election: %s leads now (%s)", self.identity, action.value)
            await self.on_start()

    async def _bounded(self, work: Awaitable[T]) -> T:
        """``await work``; while leading, for no longer than the renew deadline leaves
        (``TimeoutError`` then)."""
        if not self.leading:
            return await work
        left = self._renewed + self.lease_s - self.renew_s - self.clock()
        return await asyncio.wait_for(work, max(0.0, left))

    async def _write(self, action: Action, lease: Mapping[str, Any] | None, now: float) -> None:
        stamp = _micro(time.time())
        spec: dict[str, Any] = {"holderIdentity": self.identity,
                                "leaseDurationSeconds": self.lease_s, "renewTime": stamp}
        if action is Action.CREATE:
            transitions = max(0, self.epoch_floor())
            spec.update(acquireTime=stamp, leaseTransitions=transitions)
            self.epoch = transitions + 1
            metadata: dict[str, Any] = {
                "name": self.name, "namespace": self.namespace,
                "labels": {"app.kubernetes.io/name": "kooper",
                           "app.kubernetes.io/component": "operator"}}
            owned = ownership.with_owner(metadata, await self._owner_reference())
            await self.client.request("POST", self._path(), body={
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": owned, "spec": spec}, kind="lease")
            return
        assert lease is not None
        old = lease.get("spec") or {}
        if action is Action.TAKE_OVER or not self.leading:
            # A new term, also when the Lease names us already (our renewals lapsed, or
            # someone edited it): it must outrank every earlier one, ours included.
            transitions = max(int(old.get("leaseTransitions") or 0) + 1, self.epoch_floor())
            spec.update(acquireTime=stamp, leaseTransitions=transitions)
            self.transitions += 1
            epoch = transitions + 1
        else:
            transitions = int(old.get("leaseTransitions") or 0)
            spec.update(acquireTime=old.get("acquireTime") or stamp,
                        leaseTransitions=transitions)
            epoch = self.epoch
        old_metadata = lease.get("metadata") or {}
        metadata = ownership.with_owner(old_metadata, await self._owner_reference())
        # resourceVersion kept (in metadata): a lost race answers 409
        body = {**lease, "metadata": metadata, "spec": spec}
        try:
            await self.client.request("PUT", self._path(self.name), body=body, kind="lease")
        except apierrors.Forbidden as exc:
            if metadata == old_metadata:
                raise
            # Only who may delete the Lease may change its owners where the
            # OwnerReferencesPermissionEnforcement admission plugin runs: lead without.
            logger.warning("leader election: may not make Deployment %s the Lease's owner, "
                           "renewing without it (it stays when the Deployment goes): %s",
                           self.owner.name if self.owner else "", exc)
            self.owner = None
            raise
        self.epoch = epoch

    async def _owner_reference(self) -> dict[str, str] | None:
        return await self.owner.reference() if self.owner is not None else None

    async def _check_lapsed(self, now: float) -> None:
        if self.leading and now - self._renewed >= self.lease_s - self.renew_s:
            await self._lose("could not renew the Lease in time")

    async def _lose(self, why: str) -> None:
        logger.warning("leader election: %s stops leading: %s", self.identity, why)
        self.leading = False
        await self.on_stop()

    async def _release(self) -> None:
        """Give the Lease up on a clean stop, so a standby takes over at once."""
        lease = await self.client.request("GET", self._path(self.name))
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != self.identity:
            return
        await self.client.request("PUT", self._path(self.name), body={
            **lease, "spec": {**spec, "holderIdentity": "", "renewTime": _micro(time.time())}},
            kind="lease")
