"""Operator restarts, protocol changes, 409 storms, watch disconnects, Lease expiry."""

from __future__ import annotations

import time

from tests.shell.conftest import (
    NS,
    Operator,
    condition,
    events,
    group_status,
    make_connector,
    make_group,
    settled,
    wait_for,
)

from kooper.core import model
from kooper.protocol import codec, messages


def test_operator_restart_in_the_middle_of_a_delay_keeps_the_deadline(emulated, fleet):
    op = Operator(emulated).start()
    try:
        make_group(emulated, delay="4s")
        make_connector(emulated, "A", 6)
        for n in range(3):
            fleet.add(f"w-{n}")
        wait_for(lambda: settled(fleet, emulated, resources=7, members=3), what="settle")
        fleet.kill("w-2")
        delay = wait_for(lambda: group_status(emulated).get("delay"), what="delay")
    finally:
        op.stop()
    generation = group_status(emulated)["rebalanceGeneration"]
    op = Operator(emulated).start()
    try:
        # The new operator continues the same delay: same deadline, lost work still waiting.
        op.quiet_after(1)
        status = group_status(emulated)
        assert status["delay"]["deadline"] == delay["deadline"]
        assert status["unassigned"] == delay["lost"]
        assert status["rebalanceGeneration"] >= generation
        wait_for(lambda: settled(fleet, emulated, resources=7, members=2), timeout=10,
                 what="settled after the persisted deadline")
        # The epoch of every resource only grew across the restart.
        tasks = emulated.get("connectors", "A", namespace="default")["status"]["tasks"]
        assert all(t["epoch"] >= 1 for t in tasks)
    finally:
        op.stop()


def test_operator_restart_when_converged_rewrites_nothing(emulated, fleet):
    op = Operator(emulated).start()
    try:
        make_group(emulated)
        make_connector(emulated, "A", 5)
        for n in range(3):
            fleet.add(f"w-{n}")
        wait_for(lambda: settled(fleet, emulated, resources=6, members=3), what="settle")
        op.quiet_after(1)
    finally:
        op.stop()
    versions = {n: emulated.get("configmaps", f"kooper-w-{n}", namespace="default")
                ["metadata"]["resourceVersion"] for n in range(3)}
    generation = group_status(emulated)["rebalanceGeneration"]
    op = Operator(emulated).start()
    try:
        op.quiet_after(1)  # its first round restored the state and found nothing to do
        assert group_status(emulated)["rebalanceGeneration"] == generation
        for n in range(3):
            cm = emulated.get("configmaps", f"kooper-w-{n}", namespace="default")
            assert cm["metadata"]["resourceVersion"] == versions[n]
    finally:
        op.stop()


def test_eager_only_member_downgrades_the_group_and_its_departure_upgrades_it(
        emulated, fleet, operator):
    make_group(emulated, delay="0s")
    make_connector(emulated, "A", 5)
    for n in range(2):
        fleet.add(f"w-{n}")
    wait_for(lambda: settled(fleet, emulated, resources=6, members=2), what="settle")
    fleet.add("old", protocols=frozenset({model.Protocol.EAGER}))
    wait_for(lambda: group_status(emulated).get("protocol") == "eager", what="downgrade")
    wait_for(lambda: settled(fleet, emulated, resources=6, members=3), what="eager settle")
    assert group_status(emulated)["members"]["byProtocol"] == {"eager": 1, "compatible": 2}
    fleet.kill("old")
    wait_for(lambda: group_status(emulated).get("protocol") == "compatible", what="upgrade")
    wait_for(lambda: settled(fleet, emulated, resources=6, members=2), what="upgraded settle")


def test_409_storm_on_configmaps_and_status_still_converges(emulated, fleet, operator):
    make_group(emulated)
    make_connector(emulated, "A", 6)
    fleet.add("w-0")
    wait_for(lambda: settled(fleet, emulated, resources=7, members=1), what="settle")
    emulated.fail_next_writes("configmaps", 15, code=409)
    emulated.fail_next_writes("workergroups", 5, code=409)
    fleet.add("w-1")
    fleet.add("w-2")
    wait_for(lambda: settled(fleet, emulated, resources=7, members=3), timeout=20,
             what="settled through the storm")
    assert emulated.pending_failures("configmaps") == 0


def test_watch_disconnects_do_not_lose_events(emulated, fleet, operator):
    make_group(emulated)
    make_connector(emulated, "A", 4)
    fleet.add("w-0")
    wait_for(lambda: settled(fleet, emulated, resources=5, members=1), what="settle")
    for n in range(1, 4):
        emulated.drop_watches()
        fleet.add(f"w-{n}")
        wait_for(lambda n=n: f"w-{n}" in group_status(emulated)["members"]["names"],
                 what=f"w-{n} seen across a reconnect")
    emulated.drop_watches()
    wait_for(lambda: settled(fleet, emulated, resources=5, members=4), timeout=20,
             what="settled across reconnects")


def test_member_whose_lease_expires_departs(emulated, fleet, operator):
    make_group(emulated, delay="0s", lease=2, skew=0)
    make_connector(emulated, "A", 4)
    for n in range(2):
        fleet.add(f"w-{n}")
    wait_for(lambda: settled(fleet, emulated, resources=5, members=2), what="settle")
    fleet.freeze("w-1")
    fleet.members.pop("w-1")  # the frozen process no longer counts as running anything
    wait_for(lambda: group_status(emulated)["members"]["count"] == 1, timeout=10,
             what="expiry noticed")
    wait_for(lambda: settled(fleet, emulated, resources=5, members=1), what="reassigned")
    assert condition(group_status(emulated), "Ready")["status"] == "True"
    wait_for(lambda: events(emulated, "MemberDeparted"), what="departed event")


def test_scale_down_while_the_operator_was_down_reassigns_without_the_delay(emulated):
    # The new operator never saw w-2's pod: its StatefulSet comes from status.state.owners.
    from tests.shell import doubles

    sts = emulated.create("statefulsets", {"metadata": {"name": "w"}, "spec": {"replicas": 3}},
                          namespace="default")
    with doubles.Fleet(emulated, labels={"app": "workers"}, lease_seconds=3,
                       owner=("StatefulSet", "w", sts["metadata"]["uid"])) as fleet:
        op = Operator(emulated).start()
        try:
            make_group(emulated, delay="300s")
            make_connector(emulated, "A", 6)
            for n in range(3):
                fleet.add(f"w-{n}")
            wait_for(lambda: settled(fleet, emulated, resources=7, members=3), what="settle")
            owners = group_status(emulated)["state"]["owners"]
            assert owners == {f"w-{n}": "StatefulSet/w" for n in range(3)}
        finally:
            op.stop()
        emulated.patch("statefulsets", "w", {"spec": {"replicas": 2}}, namespace="default")
        fleet.kill("w-2")
        op = Operator(emulated).start()
        try:
            wait_for(lambda: settled(fleet, emulated, resources=7, members=2), timeout=15,
                     what="w-2's work reassigned at once, not after 300s")
            assert "delay" not in group_status(emulated)
            departed = events(emulated, "MemberDeparted")
            assert any("scale-down" in e["message"] for e in departed)
        finally:
            op.stop()


def _document(emulated, member):
    cm = emulated.get("configmaps", f"kooper-{member}", namespace="default")
    text = ((cm or {}).get("data") or {}).get(messages.CONFIGMAP_KEY)
    return codec.decode_assignment(text) if text else None


def test_a_round_whose_status_write_keeps_conflicting_never_reuses_its_generation(
        emulated, fleet, operator):
    # A worker applies a generation once (a re-read of it is a no-op), so a document
    # rewritten under a generation it already holds is never applied: the member runs
    # the first version while the operator plans with the second. A round whose
    # ConfigMaps landed and whose status write then failed (409 five times over) must not
    # plan its retry from the memory before it, at that same generation.
    make_group(emulated)
    make_connector(emulated, "A", 2)
    w0 = fleet.add("w-0")
    wait_for(lambda: settled(fleet, emulated, resources=3, members=1), what="settle")
    w0.applying = False  # its starts are slow: no report of the next generation yet
    emulated.fail_next_writes("workergroups", 1000, code=409)
    make_connector(emulated, "B", 1)
    first = wait_for(lambda: (doc := _document(emulated, "w-0")) is not None
                     and "B" in doc.assigned.connectors and doc, what="B written to w-0")
    fleet.add("w-1")
    wait_for(lambda: _document(emulated, "w-1") is not None, what="w-1's first document")
    now = _document(emulated, "w-0")
    assert now.generation > first.generation or now.assigned == first.assigned, (
        f"generation {first.generation} of w-0 rewritten: {first.assigned} -> {now.assigned}")
    emulated.clear_faults()
    w0.applying = True
    wait_for(lambda: settled(fleet, emulated, resources=5, members=2), timeout=20,
             what="settled once the status can be written")


def _two_members_without_a_delay(emulated, fleet):
    """A group with no delay, two members settled on connector A's 5 resources: what
    each runs."""
    make_group(emulated, delay="0s", skew=0)
    make_connector(emulated, "A", 4)
    for n in range(2):
        fleet.add(f"w-{n}")
    wait_for(lambda: settled(fleet, emulated, resources=5, members=2), what="settle")
    return fleet.owned()


def test_a_member_whose_lease_a_silent_watch_stopped_updating_does_not_depart(
        emulated, fleet, operator):
    # The operator's Lease watch goes quiet without ending (a half-open connection): its
    # copies stop changing while both workers keep renewing and running their work. A
    # member must not depart on such a copy (with no delay its work would start on the
    # other member at once, while it still runs here): an expired copy is read again.
    before = _two_members_without_a_delay(emulated, fleet)
    runner = operator.shell.runners[(NS, "wg")]
    assert emulated.silence_watches("leases") >= 1
    read = runner.rereads
    wait_for(lambda: runner.rereads >= read + 4 or events(emulated, "MemberDeparted"),
             timeout=20, what="expired copies read again, round after round")
    assert events(emulated, "MemberDeparted") == []
    assert group_status(emulated)["members"]["count"] == 2
    assert fleet.owned() == before
    emulated.drop_watches("leases")  # the watch reconnects: the copies are current again
    wait_for(lambda: settled(fleet, emulated, resources=5, members=2), what="still settled")


def test_a_forward_jump_of_the_operator_s_clock_departs_no_member(
        emulated, fleet, operator):
    # The operator host's wall clock steps an hour ahead (NTP correcting it, a VM
    # resumed): both workers keep renewing and running their work. Expiry is timed by
    # when the operator observed a renewal, on a clock a step of the wall clock does not
    # move; else every Lease looks an hour old, is read again unchanged, and its member
    # departs, its work free for others while it still runs it.
    before = _two_members_without_a_delay(emulated, fleet)
    runner = operator.shell.runners[(NS, "wg")]
    steps = runner.steps_run
    runner.ctx.clock = lambda: time.time() + 3600
    runner.poke()
    wait_for(lambda: runner.steps_run >= steps + 3 or events(emulated, "MemberDeparted"),
             what="rounds on the jumped clock")
    assert events(emulated, "MemberDeparted") == []
    assert group_status(emulated)["members"]["count"] == 2
    assert fleet.owned() == before


def test_a_workergroup_status_wiped_by_someone_else_is_written_again(emulated, fleet, operator):
    """Someone replaces the WorkerGroup's status (``kubectl edit --subresource=status``, a
    backup tool): the persisted state, the delay deadline and the conditions are gone. A
    status change alone woke nothing, and the next round's patch was computed from what the
    operator last wrote, so it sent nothing: the status stayed empty (``kubectl wait
    --for=condition=Ready`` hung) until the group's work changed."""
    make_group(emulated)
    make_connector(emulated, "A", 2)
    fleet.add("w-0")
    wait_for(lambda: settled(fleet, emulated, resources=3, members=1), what="settle")
    operator.quiet_after(1)
    body = emulated.get("workergroups", "wg", namespace="default")
    body["status"] = {}
    emulated.replace("workergroups", "wg", body, namespace="default", subresource="status")
    assert group_status(emulated) == {}
    wait_for(lambda: condition(group_status(emulated), "Ready").get("status") == "True",
             what="the status written again")
    assert group_status(emulated)["state"]
    assert settled(fleet, emulated, resources=3, members=1)
