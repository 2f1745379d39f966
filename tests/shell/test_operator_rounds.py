"""The real kopf operator against the emulated cluster, members played by test doubles."""

from __future__ import annotations

import asyncio
import threading

from tests.shell.conftest import (
    condition,
    events,
    group_status,
    make_connector,
    make_group,
    settled,
    wait_for,
)


def test_first_join_assigns_every_task_and_reports_ready(emulated, fleet, operator):
    make_group(emulated)
    make_connector(emulated, "A", 4)
    make_connector(emulated, "B", 2)
    for n in range(3):
        fleet.add(f"w-{n}")
    wait_for(lambda: settled(fleet, emulated, resources=8, members=3), what="settled")
    loads = sorted(len(r) for r in fleet.owned().values())
    assert loads[-1] - loads[0] <= 1
    status = group_status(emulated)
    assert status["members"]["count"] == 3
    assert status["tasks"] == 6
    assert status["protocol"] == "compatible"
    assert condition(status, "Degraded")["status"] == "False"
    cm = emulated.get("configmaps", "kooper-w-0", namespace="default")
    assert cm["metadata"]["ownerReferences"][0]["kind"] == "WorkerGroup"
    assert cm["metadata"]["labels"] == {"kooper.dev/group": "wg", "kooper.dev/member": "w-0"}
    # Connector statuses follow the round (coalesced with the members' reports).
    conn = wait_for(lambda: (emulated.get("connectors", "A", namespace="default").get("status")
                             or {}).get("running") == 4
                    and emulated.get("connectors", "A", namespace="default")["status"],
                    what="Connector status")
    assert [t["id"] for t in conn["tasks"]] == ["A-0", "A-1", "A-2", "A-3"]
    assert all(t["state"] == "Running" and t["epoch"] >= 1 for t in conn["tasks"])
    wait_for(lambda: events(emulated, "RebalanceCompleted"), what="event")
    # The first round rehearsed a departure once (warming the assignor's cache);
    # the rounds that took in the members' reports did not rehearse again.
    runner = next(iter(operator.shell.runners.values()))
    assert runner.rounds_planned >= 2
    assert runner.warmups == 1
    wait_for(lambda: not runner.patching_connectors, what="Connector statuses patched")
    assert all((emulated.get("connectors", name, namespace="default").get("status") or {})
               .get("running") == count for name, count in (("A", 4), ("B", 2)))


def test_more_members_join_and_work_moves_in_two_rounds_without_running_twice(
        emulated, fleet, operator):
    make_group(emulated)
    make_connector(emulated, "A", 8)
    for n in range(2):
        fleet.add(f"w-{n}")
    wait_for(lambda: settled(fleet, emulated, resources=9, members=2), what="first settle")
    first = group_status(emulated)["rebalanceGeneration"]
    for n in range(2, 4):
        fleet.add(f"w-{n}")
    wait_for(lambda: settled(fleet, emulated, resources=9, members=4), what="second settle")
    loads = sorted(len(r) for r in fleet.owned().values())
    assert loads[-1] - loads[0] <= 1
    assert group_status(emulated)["rebalanceGeneration"] >= first + 2  # revoke, then assign
    wait_for(lambda: events(emulated, "RevokingForBalance"), what="revoking event")
    wait_for(lambda: events(emulated, "MemberJoined"), what="joined event")


def test_departed_member_work_waits_for_the_delay_then_moves(emulated, fleet, operator):
    make_group(emulated, delay="3s")
    make_connector(emulated, "A", 6)
    for n in range(3):
        fleet.add(f"w-{n}")
    wait_for(lambda: settled(fleet, emulated, resources=7, members=3), what="settle")
    before = fleet.owned()
    fleet.kill("w-2")
    status = wait_for(lambda: (s := group_status(emulated)).get("delay") and s, what="delay")
    assert status["delay"]["lost"] == len(before["w-2"])
    assert status["unassigned"] == len(before["w-2"])
    assert condition(status, "Rebalancing")["reason"] == "DelayScheduled"
    wait_for(lambda: events(emulated, "DelayScheduled"), what="DelayScheduled event")
    # Survivors keep what they had while the delay runs.
    for name in ("w-0", "w-1"):
        assert not before[name].difference(fleet.owned()[name])
    wait_for(lambda: settled(fleet, emulated, resources=7, members=2), timeout=10,
             what="after the delay")
    assert "delay" not in group_status(emulated)


def test_member_back_under_its_name_gets_its_work_back_at_once(emulated, fleet, operator):
    make_group(emulated, delay="30s")
    make_connector(emulated, "A", 6)
    for n in range(3):
        fleet.add(f"w-{n}")
    wait_for(lambda: settled(fleet, emulated, resources=7, members=3), what="settle")
    before = fleet.owned()["w-1"]
    fleet.kill("w-1")
    wait_for(lambda: group_status(emulated).get("delay"), what="delay")
    fleet.add("w-1")  # a new pod and process under the same name
    wait_for(lambda: settled(fleet, emulated, resources=7, members=3), timeout=8,
             what="returning identity, well before the 30s delay")
    assert fleet.owned()["w-1"] == before


def test_statefulset_scale_down_reassigns_without_waiting(emulated, operator):
    sts = emulated.create("statefulsets", {"metadata": {"name": "w"}, "spec": {"replicas": 3}},
                          namespace="default")
    from tests.shell import doubles
    with doubles.Fleet(emulated, labels={"app": "workers"}, lease_seconds=3,
                       owner=("StatefulSet", "w", sts["metadata"]["uid"])) as fleet:
        make_group(emulated, delay="60s")
        make_connector(emulated, "A", 6)
        for n in range(3):
            fleet.add(f"w-{n}")
        wait_for(lambda: settled(fleet, emulated, resources=7, members=3), what="settle")
        emulated.patch("statefulsets", "w", {"spec": {"replicas": 2}}, namespace="default")
        fleet.kill("w-2")
        wait_for(lambda: settled(fleet, emulated, resources=7, members=2), timeout=8,
                 what="reassigned at once")
        assert "delay" not in group_status(emulated)
        departed = events(emulated, "MemberDeparted")
        assert any("scale-down" in e["message"] for e in departed)
        assert not fleet.violations


def test_metrics_and_audit_log_record_the_rounds(emulated, fleet, tmp_path):
    import json

    from prometheus_client import REGISTRY
    from tests.shell.conftest import Operator

    from kooper.core import events as event_log

    path = tmp_path / "audit.jsonl"
    op = Operator(emulated, audit_log=str(path)).start()
    try:
        make_group(emulated, "audited")
        make_connector(emulated, "A", 3, group="audited")
        fleet.add("w-0")
        fleet.add("w-1")
        wait_for(lambda: settled(fleet, emulated, resources=4, members=2, name="audited"),
                 what="settle")
    finally:
        op.stop()
    labels = {"namespace": "default", "workergroup": "audited"}
    assert REGISTRY.get_sample_value("kooper_rounds_total", labels) >= 1
    assert REGISTRY.get_sample_value("kooper_rebalances_total", labels) >= 1
    assert REGISTRY.get_sample_value("kooper_unassigned_resources", labels) == 0
    assert REGISTRY.get_sample_value("kooper_assigned_resources", labels) == 4
    assert REGISTRY.get_sample_value("kooper_members", {**labels, "protocol": "compatible"}) == 2
    assert REGISTRY.get_sample_value("kooper_rebalance_latency_seconds_count", labels) >= 1
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    parsed = [event_log.Event.from_row(row) for row in rows]
    started = {e.resource for e in parsed if e.event is event_log.Kind.START}
    assert started == {"A", "A-0", "A-1", "A-2"}
    assert all(row["group"] == "default/audited" for row in rows)


def test_a_burst_of_joins_is_planned_as_one_round(emulated, fleet):
    from tests.shell.conftest import Operator

    op = Operator(emulated, debounce_s=0.3).start()
    try:
        make_group(emulated)
        make_connector(emulated, "A", 12)
        wait_for(lambda: group_status(emulated).get("conditions"), what="first round")
        runner = next(iter(op.shell.runners.values()))
        before = runner.rounds_planned
        # The burst arrives while a round is due: the gate holds the runner's rounds until
        # the operator has seen all six (on its own watches), so how fast a loaded machine
        # creates them cannot split the burst; the debounce is what the runner then obeys.
        gate = threading.Event()
        original = runner.round

        async def gated(**kwargs):
            while not gate.is_set():
                await asyncio.sleep(0.01)
            return await original(**kwargs)

        runner.round = gated
        for n in range(6):
            fleet.add(f"w-{n}")
        wait_for(lambda: len(list(op.shell.index_views.leases("default"))) == 6
                 and len(list(op.shell.index_views.pods("default"))) == 6,
                 what="the operator's watches to show all six")
        gate.set()
        wait_for(lambda: settled(fleet, emulated, resources=13, members=6), what="settle")
        joined = [e["message"] for e in events(emulated, "MemberJoined")]
        assert joined[0].startswith("6 member(s) joined")
        # One round assigns everything; the members' reports (12 events) add at most a few.
        assert runner.rounds_planned - before <= 4
    finally:
        op.stop()


def test_documents_name_the_incarnation_they_were_planned_for(emulated, fleet, operator):
    from kooper.protocol import codec, messages

    def document(name):
        cm = emulated.get("configmaps", f"kooper-{name}", namespace="default") or {}
        text = (cm.get("data") or {}).get(messages.CONFIGMAP_KEY)
        return codec.decode_assignment(text) if text else None

    make_group(emulated, delay="30s")
    make_connector(emulated, "A", 4)
    for n in range(2):
        fleet.add(f"w-{n}")
    wait_for(lambda: settled(fleet, emulated, resources=5, members=2), what="settle")
    for name, member in fleet.members.items():
        assert document(name).incarnation == member.incarnation
    old = fleet.members["w-1"].incarnation
    new = fleet.restart("w-1").incarnation  # same pod name, new process
    assert new != old
    wait_for(lambda: (doc := document("w-1")) is not None and doc.incarnation == new,
             what="a document for the new incarnation")
    wait_for(lambda: settled(fleet, emulated, resources=5, members=2), what="settle again")


def test_a_revocation_is_counted_once_however_many_rounds_wait_for_its_acknowledgement(
        emulated, fleet, operator):
    # kooper_resource_revocations_total counts resources revoked from a member: the rounds
    # that run while the member is still stopping them revoke nothing new.
    from prometheus_client import REGISTRY

    labels = {"namespace": "default", "workergroup": "revokes"}
    make_group(emulated, "revokes")
    make_connector(emulated, "A", 5, group="revokes")
    slow = fleet.add("w-0")
    wait_for(lambda: settled(fleet, emulated, resources=6, members=1, name="revokes"),
             what="w-0 runs everything")
    assert REGISTRY.get_sample_value("kooper_resource_revocations_total", labels) == 0
    slow.applying = False  # it takes its time to stop what it is told to
    joined = fleet.add("w-1")
    # The round that revokes from w-0, then the one that reads w-1's report (w-1 applied
    # its first document) while w-0 is still stopping: 2 of its 5 tasks revoked, once.
    wait_for(lambda: joined.generation >= 0, what="w-1 applies its document")
    operator.quiet_after(3, "revokes")
    assert REGISTRY.get_sample_value("kooper_resource_revocations_total", labels) == 2
    slow.applying = True
    wait_for(lambda: settled(fleet, emulated, resources=6, members=2, name="revokes"),
             what="balanced")
    assert REGISTRY.get_sample_value("kooper_resource_revocations_total", labels) == 2


def one_connector_running(emulated, fleet, operator) -> None:
    """Connector ``A`` (2 tasks) settled on ``w-0``, its status written, the operator quiet."""
    make_group(emulated)
    make_connector(emulated, "A", 2)
    fleet.add("w-0")
    wait_for(lambda: settled(fleet, emulated, resources=3, members=1), what="settle")
    wait_for(lambda: (emulated.get("connectors", "A", namespace="default").get("status")
                      or {}).get("running") == 2, what="the Connector's status")
    operator.quiet_after(1)


def test_a_connector_deleted_and_created_again_at_once_gets_its_status(emulated, fleet, operator):
    """``kubectl replace --force`` (or delete and apply in one go) of a running Connector:
    the round sees the same connectors, tasks and members as the last one and planned
    nothing, so the new object (a new uid, no status) never got one."""
    one_connector_running(emulated, fleet, operator)
    old = emulated.get("connectors", "A", namespace="default")["metadata"]["uid"]
    emulated.delete("connectors", "A", namespace="default")
    make_connector(emulated, "A", 2)
    new = emulated.get("connectors", "A", namespace="default")
    assert new["metadata"]["uid"] != old
    assert not new.get("status")
    wait_for(lambda: (emulated.get("connectors", "A", namespace="default").get("status")
                      or {}).get("running") == 2, what="the new Connector's status")
    assert settled(fleet, emulated, resources=3, members=1)


def test_a_connector_status_wiped_by_someone_else_is_written_again(emulated, fleet, operator):
    """Someone replaces a Connector's status (``kubectl edit --subresource=status``): the
    operator remembered what it had patched, took the new status for that, and patched
    nothing until the connector's placement changed."""
    one_connector_running(emulated, fleet, operator)
    body = emulated.get("connectors", "A", namespace="default")
    body["status"] = {}
    emulated.replace("connectors", "A", body, namespace="default", subresource="status")
    wait_for(lambda: (emulated.get("connectors", "A", namespace="default").get("status")
                      or {}).get("running") == 2, what="the status written again")
