"""Two operator replicas with leader election on the emulator: one leads, the other
stands by (ready), and takes over within the Lease duration when the leader dies."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from tests.shell.conftest import (
    NS,
    Operator,
    condition,
    events,
    group_status,
    make_connector,
    make_deployment,
    make_group,
    settled,
    wait_for,
)

from kooper.control import views
from kooper.core import model
from kooper.protocol import codec, messages
from kooper.sdk.connection import Connection
from kooper.shell import kube, leader, ownership, probes

LEASE = "coordination.k8s.io/v1/leases"


def replica(emulated, name):
    return Operator(emulated, identity=name, leader_election=True, leader_namespace=NS,
                    leader_lease_s=2, leader_renew_s=0.2)


def holder(emulated):
    lease = emulated.get(LEASE, leader.LEASE_NAME, namespace=NS) or {}
    return (lease.get("spec") or {}).get("holderIdentity")


@pytest.mark.parametrize("crash", [True, False], ids=["leader crashes", "leader stops"])
def test_the_standby_takes_over_from_persisted_state_and_nothing_runs_twice(
        emulated, fleet, crash):
    a = replica(emulated, "op-a").start()
    wait_for(lambda: holder(emulated) == "op-a", what="op-a leads")
    b = replica(emulated, "op-b").start()
    try:
        make_group(emulated, delay="30s")
        make_connector(emulated, "A", 4)
        for n in range(2):
            fleet.add(f"w-{n}")
        wait_for(lambda: settled(fleet, emulated, resources=5, members=2), what="settle")
        wait_for(lambda: b.shell.elector.holder == "op-a", what="op-b sees the leader")
        assert a.shell.runners  # only the leader runs rounds
        assert not b.shell.runners
        ready, detail = probes.readiness(b.shell)
        assert ready
        assert (detail["role"], detail["leader"]) == ("standby", "op-a")
        assert probes.readiness(a.shell)[1]["role"] == "leader"
        generation = group_status(emulated)["rebalanceGeneration"]

        a.shell.elector.release_on_stop = not crash
        a.stop()  # the leader's process ends (a crash leaves the Lease to expire)
        wait_for(lambda: holder(emulated) == "op-b", what="op-b takes over")
        wait_for(lambda: b.shell.runners, what="op-b runs the group")
        # It resumes from the persisted state: the same generation, nothing moved.
        runner = b.quiet_after(1)
        assert runner.memory.persisted.state.generation >= generation
        assert settled(fleet, emulated, resources=5, members=2)
        # ...and keeps rebalancing.
        fleet.add("w-2")
        wait_for(lambda: settled(fleet, emulated, resources=5, members=3), what="rebalanced")
        assert condition(group_status(emulated), "Ready")["status"] == "True"
        assert b.shell.elector.transitions == 1  # an expired or released Lease, taken over
    finally:
        b.stop()
        a.stop()
    assert not fleet.violations


def test_only_the_leader_flags_a_connector_whose_group_is_missing_and_its_successor_does_too(
        emulated):
    """A standby posts no ``WorkerGroupNotFound`` (nor patches the status): one Event per
    term, from the leader; the replica that takes over flags what it finds."""
    a = replica(emulated, "op-a").start()
    wait_for(lambda: holder(emulated) == "op-a", what="op-a leads")
    b = replica(emulated, "op-b").start()
    try:
        wait_for(lambda: b.shell.elector.holder == "op-a", what="op-b sees the leader")
        make_connector(emulated, "lost", 2, group="nope")
        wait_for(lambda: events(emulated, "WorkerGroupNotFound"), what="op-a flags it")
        wait_for(lambda: (NS, "lost") in b.shell._connectors, what="op-b sees the Connector")
        assert (NS, "lost") not in b.shell._orphans
        assert [e["reportingInstance"] for e in events(emulated, "WorkerGroupNotFound")] \
            == ["op-a"]
        a.shell.elector.release_on_stop = True
        a.stop()
        wait_for(lambda: holder(emulated) == "op-b", what="op-b takes over")
        wait_for(lambda: "op-b" in {e["reportingInstance"]
                                    for e in events(emulated, "WorkerGroupNotFound")},
                 what="op-b flags it too")
    finally:
        b.stop()
        a.stop()


class Replica:
    """One replica's ``Elector`` on the emulated API, its clock in the test's hands; it
    records the epoch of every term it starts."""

    def __init__(self, emulated, name: str, *, floor: int = 0) -> None:
        self.loop = asyncio.new_event_loop()
        self.client = kube.Client(Connection(server=emulated.url, insecure=True))
        self.now = 0.0
        self.terms: list[int] = []
        self.elector = leader.Elector(
            client=self.client, namespace=NS, identity=name, on_start=self._start,
            on_stop=self._stop, lease_s=15, renew_s=5, clock=lambda: self.now,
            epoch_floor=lambda: floor)

    async def _start(self) -> None:
        self.terms.append(self.elector.epoch)

    async def _stop(self) -> None:
        pass

    def once(self, *, after_s: float = 0.0) -> None:
        self.now += after_s
        self.loop.run_until_complete(self.elector.once())

    def close(self) -> None:
        self.loop.run_until_complete(self.client.close())
        self.loop.close()


def test_a_leader_that_lapsed_and_takes_the_lease_back_starts_a_newer_term(emulated):
    """Its renewals failed for lease - renew, so it stopped leading, its runners cut off
    mid-round with their writes possibly still in flight; the Lease still names it when a
    renewal goes through again. That is a new term: its epoch outranks the lapsed term's,
    so its fence re-issues every document and the lapsed term's late writes fail (with
    the same epoch the fence would find nothing to re-issue)."""
    a = Replica(emulated, "op-a")
    try:
        a.once()
        assert a.elector.leading
        emulated.fail_next_writes(LEASE, 3, code=500)  # the API answers no renewal
        for _ in range(2):
            a.once(after_s=5)
        assert not a.elector.leading  # lapsed: lease - renew without a renewal
        a.once(after_s=5)
        assert holder(emulated) == "op-a"  # nobody took it over meanwhile
        a.once(after_s=5)
        assert a.elector.leading
        assert a.terms[1] > a.terms[0]
    finally:
        a.close()


def test_a_lease_edited_to_name_a_standby_still_outranks_every_earlier_term(emulated):
    """Someone edits the Lease by hand: it names the standby, leaseTransitions reset to 0.
    The standby's term must outrank the terms the groups already saw (else its fence finds
    a newer epoch on every document, stands down, and, the Lease naming it, starts the same
    term again: nobody leads)."""
    b = Replica(emulated, "op-b", floor=7)
    try:
        emulated.create(LEASE, {"metadata": {"name": leader.LEASE_NAME},
                                "spec": {"holderIdentity": "op-b", "leaseDurationSeconds": 15,
                                         "leaseTransitions": 0}}, namespace=NS)
        b.once()
        assert b.elector.leading
        assert b.terms == [8]
    finally:
        b.close()


def test_a_leader_whose_renewal_hangs_stops_leading_before_its_lease_can_expire(emulated):
    """The API stops answering the leader (a slow or overloaded API server, 429s that
    say Retry-After 30): its renewal hangs longer than the Lease lasts. A standby takes
    over once the Lease stood still for its duration, so the leader must stop leading
    (its runners stop) within lease - renew of its last renewal, whether or not the
    request in flight ever ends, as client-go's renew deadline does. Before, the check
    ran only after the request returned: 30 s later (the client's timeout), with two
    replicas running rounds meanwhile."""
    client = kube.Client(Connection(server=emulated.url, insecure=True))
    loop = asyncio.new_event_loop()
    stopped_at: list[float] = []

    async def scenario() -> None:
        started, stopped = asyncio.Event(), asyncio.Event()

        async def on_start() -> None:
            started.set()

        async def on_stop() -> None:
            stopped_at.append(time.monotonic())
            stopped.set()

        elector = leader.Elector(client=client, namespace=NS, identity="op-a",
                                 on_start=on_start, on_stop=on_stop, lease_s=6, renew_s=2)
        # (It stops lease - renew = 4 s after its last renewal: 2 s of margin for a loaded
        # machine before the Lease could expire.)
        task = asyncio.create_task(elector.run())
        try:
            await asyncio.wait_for(started.wait(), 10)
            emulated.set_delay(120, LEASE)  # every Lease request hangs from now on
            await asyncio.wait_for(stopped.wait(), 15)
            assert not elector.leading
            assert stopped_at[0] - elector._renewed < elector.lease_s
        finally:
            emulated.clear_faults()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    try:
        loop.run_until_complete(scenario())
    finally:
        loop.run_until_complete(client.close())
        loop.close()


def test_a_leftover_document_of_a_newer_term_does_not_cost_a_term_per_epoch(emulated, fleet):
    """A ConfigMap left from an earlier installation (its group deleted with
    --cascade=orphan, a restored backup) carries leader epoch 40; the operator starts
    with no leader Lease. Its first term (epoch 1) found the newer epoch on its fence,
    stood down, and took the Lease back at epoch 2, and so on: 39 terms until it could
    lead (a few seconds each in production: minutes with no leader; epoch 10,000: days).
    A new term's epoch now starts above every epoch on what the replica watches."""
    leftover = messages.Assignment(
        group="wg", member="w-0", generation=50, protocol=model.Protocol.COMPATIBLE,
        assigned=model.ConnectorsAndTasks(frozenset(), frozenset({"A-0"})), leader_epoch=40)
    emulated.create("configmaps", {"metadata": {
        "name": "kooper-w-0",
        "labels": {views.GROUP_LABEL: "wg", views.MEMBER_LABEL: "w-0"},
        "annotations": {views.LEADER_EPOCH_ANNOTATION: "40"},
        "ownerReferences": [{"apiVersion": "kooper.dev/v1alpha1", "kind": "WorkerGroup",
                             "name": "wg", "uid": "a-deleted-group", "controller": True}]},
        "data": {messages.CONFIGMAP_KEY: codec.encode_assignment(leftover)}}, namespace=NS)
    make_group(emulated)
    make_connector(emulated, "A", 2)
    wait_for(lambda: emulated.list("configmaps", namespace=NS), what="the leftover")
    a = replica(emulated, "op-a").start()
    try:
        for n in range(2):
            fleet.add(f"w-{n}")
        wait_for(lambda: settled(fleet, emulated, resources=3, members=2), what="settle")
        assert a.shell.elector.epoch > 40
        # It stood down once at most: when its first term began before kopf had listed
        # the ConfigMaps.
        assert a.shell.elector.transitions <= 1
    finally:
        a.stop()


def test_a_step_down_is_never_cut_short_by_the_renew_deadline():
    """Only the Lease requests are bounded by the renew deadline: a step-down (its
    runners stopping) that outlasts what is left of it still runs to its end."""

    class OtherHolds:
        async def request(self, method, path, **_):
            return {"metadata": {"resourceVersion": "2"},
                    "spec": {"holderIdentity": "op-b", "leaseDurationSeconds": 4,
                             "renewTime": "2026-01-01T00:00:00.000000Z"}}

    stopped: list[str] = []

    async def on_stop() -> None:
        stopped.append("began")
        await asyncio.sleep(0.3)  # longer than the deadline leaves
        stopped.append("ended")

    async def on_start() -> None:
        pass

    elector = leader.Elector(client=OtherHolds(), namespace=NS, identity="op-a",
                             on_start=on_start, on_stop=on_stop, lease_s=4, renew_s=1)
    elector.leading = True
    elector._renewed = time.monotonic() - 2.9  # 0.1 s of the deadline left
    asyncio.run(elector.once())
    assert not elector.leading
    assert stopped == ["began", "ended"]


DEPLOYMENT = "apps/v1/deployments"


def owned_by(lease):
    return [(r["kind"], r["name"], r["uid"])
            for r in (lease or {}).get("metadata", {}).get("ownerReferences") or []]


def test_two_installations_in_one_namespace_each_lead_on_their_own_lease(emulated):
    """The chart names the Lease after the release (``--leader-lease``): two releases in
    one namespace each elect their own leader instead of one standing by for the other's."""
    a, b = Replica(emulated, "op-a"), Replica(emulated, "op-b")
    a.elector.name, b.elector.name = "a-kooper-operator-leader", "b-kooper-operator-leader"
    try:
        a.once()
        b.once()
        assert a.elector.leading
        assert b.elector.leading
        for name, who in (("a-kooper-operator-leader", "op-a"),
                          ("b-kooper-operator-leader", "op-b")):
            assert emulated.get(LEASE, name, namespace=NS)["spec"]["holderIdentity"] == who
        assert emulated.get(LEASE, leader.LEASE_NAME, namespace=NS) is None
    finally:
        a.close()
        b.close()


def test_the_lease_is_owned_by_its_deployment_and_goes_with_it(emulated):
    """``helm uninstall`` deletes the Deployment, not the Lease the operator made at run
    time: the Lease's ownerReference lets the garbage collector delete it."""
    deployment = make_deployment(emulated)
    a = Replica(emulated, "op-a")
    a.elector.owner = ownership.Owner(a.client, NS, "kooper")
    try:
        a.once()
        assert a.elector.leading
        lease = emulated.get(LEASE, leader.LEASE_NAME, namespace=NS)
        assert owned_by(lease) == [("Deployment", "kooper", deployment["metadata"]["uid"])]
        assert not lease["metadata"]["ownerReferences"][0].get("blockOwnerDeletion")
        a.once(after_s=5)  # a renewal keeps it
        assert owned_by(emulated.get(LEASE, leader.LEASE_NAME, namespace=NS)) == owned_by(lease)
        emulated.delete(DEPLOYMENT, "kooper", namespace=NS)
        wait_for(lambda: emulated.get(LEASE, leader.LEASE_NAME, namespace=NS) is None,
                 what="the Lease is garbage-collected with its Deployment")
    finally:
        a.close()


def test_a_lease_made_without_an_owner_gets_it_on_the_next_renewal(emulated):
    """A Lease an earlier version made (no owner) is adopted, so an upgraded release's
    uninstall deletes it too; a reference to an earlier Deployment of that name goes."""
    deployment = make_deployment(emulated)
    stale = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "kooper", "uid": "gone"}
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "cm-uid"}
    a = Replica(emulated, "op-a")
    try:
        a.once()  # no owner configured: an earlier version's Lease
        assert owned_by(emulated.get(LEASE, leader.LEASE_NAME, namespace=NS)) == []
        a.elector.owner = ownership.Owner(a.client, NS, "kooper")
        a.once(after_s=5)
        uid = deployment["metadata"]["uid"]
        assert owned_by(emulated.get(LEASE, leader.LEASE_NAME, namespace=NS)) == [
            ("Deployment", "kooper", uid)]
        owner = a.loop.run_until_complete(a.elector.owner.reference())
        assert owned_by({"metadata": ownership.with_owner(
            {"ownerReferences": [stale, other]}, owner)}) == [
            ("ConfigMap", "keep", "cm-uid"), ("Deployment", "kooper", uid)]
    finally:
        a.close()


def test_an_owner_that_cannot_be_read_never_keeps_a_replica_from_leading(emulated, caplog):
    a = Replica(emulated, "op-a")
    a.elector.owner = ownership.Owner(a.client, NS, "no-such-deployment")
    try:
        with caplog.at_level("WARNING", logger="kooper.shell"):
            a.once()
            a.once(after_s=5)
        assert a.elector.leading
        assert owned_by(emulated.get(LEASE, leader.LEASE_NAME, namespace=NS)) == []
        warned = [r for r in caplog.records if "no-such-deployment" in r.getMessage()]
        assert len(warned) == 1  # once, not at every renewal
    finally:
        a.close()


def test_kooper_run_hands_the_lease_name_and_its_owner_to_the_elector(emulated, monkeypatch):
    """The chart's ``--leader-lease``/``--owner`` reach the Elector (the names the
    chart's Role lets it read and write); without them the Lease keeps its old name."""
    from kooper import cli
    from kooper.commands import run as run_command
    from kooper.shell import credentials, login

    seen = []

    async def operate(config, _login):
        seen.append(config)

    async def preflight(*_args):
        pass

    static = login.Login.static(Connection(server=emulated.url, insecure=True))
    monkeypatch.setattr(credentials, "login", lambda *_a, **_k: static)
    monkeypatch.setattr(run_command, "_preflight", preflight)
    monkeypatch.setattr(run_command, "_operate", operate)
    base = ["run", "--leader-election", "--leader-namespace", NS, "--metrics-port", "0",
            "--health-port", "0"]
    assert cli.main([*base, "--leader-lease", "a-kooper-operator-leader",
                     "--owner", "a-kooper"]) == 0
    assert cli.main(base) == 0
    named, default = seen
    assert (named.leader_lease, named.owner) == ("a-kooper-operator-leader", "a-kooper")
    assert (default.leader_lease, default.owner) == (leader.LEASE_NAME, "")

    async def elect():
        from kooper.shell import controller

        shell = controller.Shell(named)
        shell.login = static
        shell.start({"kooper_groups": {}, "kooper_connectors": {}, "kooper_configmaps": {}})
        try:
            assert shell.elector is not None
            assert shell.elector.name == "a-kooper-operator-leader"
            assert shell.elector.owner is not None
            assert (shell.elector.owner.namespace, shell.elector.owner.name) == (NS, "a-kooper")
            await wait_until_leading(shell)
        finally:
            await shell.stop()

    async def wait_until_leading(shell):
        for _ in range(100):
            if shell.leading:
                return
            await asyncio.sleep(0.05)
        raise AssertionError("never led")

    asyncio.run(elect())
    assert emulated.get(LEASE, "a-kooper-operator-leader", namespace=NS) is not None


def test_a_lease_whose_owner_may_not_be_set_is_renewed_without_it(emulated, caplog):
    """Where the OwnerReferencesPermissionEnforcement admission plugin runs, changing an
    object's owners needs the right to delete it (the chart grants it; a hand-made Role
    may not). Adopting the Lease must never cost the leadership: one refused renewal,
    then renewals without the owner."""
    make_deployment(emulated)
    a = Replica(emulated, "op-a")
    try:
        a.once()  # made without an owner (an earlier version)
        a.elector.owner = ownership.Owner(a.client, NS, "kooper")
        emulated.fail_next_writes(LEASE, 1, code=403)
        with caplog.at_level("WARNING", logger="kooper.shell"):
            a.once(after_s=5)
        assert a.elector.leading  # one renewal missed, well inside the renew deadline
        assert a.elector.owner is None
        assert any("may not make Deployment kooper the Lease's owner" in r.getMessage()
                   for r in caplog.records)
        renewed = emulated.get(LEASE, leader.LEASE_NAME, namespace=NS)["spec"]["renewTime"]
        a.once(after_s=5)
        assert a.elector.leading
        lease = emulated.get(LEASE, leader.LEASE_NAME, namespace=NS)
        assert lease["spec"]["renewTime"] != renewed
        assert owned_by(lease) == []
        emulated.fail_next_writes(LEASE, 1, code=403)  # a 403 with nothing to adopt: as before
        a.once(after_s=5)
        assert a.elector.leading
    finally:
        a.close()


