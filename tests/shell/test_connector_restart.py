"""``kooper.dev/restart`` on a Connector: restart in place with new epochs, once per value."""

from __future__ import annotations

from prometheus_client import REGISTRY
from tests.shell.conftest import (
    NS,
    Operator,
    events,
    group_status,
    make_connector,
    make_group,
    settled,
    wait_for,
)

from kooper.protocol import codec, messages

GROUP = {"namespace": "default", "workergroup": "wg"}


def annotate(emulated, name, value):
    emulated.patch("connectors", name,
                   {"metadata": {"annotations": {"kooper.dev/restart": value}}}, namespace=NS)


def documents(emulated):
    found = emulated.list("configmaps", namespace=NS, label_selector="kooper.dev/group=wg")
    return {cm["metadata"]["labels"]["kooper.dev/member"]:
            codec.decode_assignment(cm["data"][messages.CONFIGMAP_KEY]) for cm in found}


def epochs(emulated):
    return {r: e for doc in documents(emulated).values() for r, e in doc.epochs.items()}


def assignments(emulated):
    return {member: doc.assigned for member, doc in documents(emulated).items()}


def connector_status(emulated, name):
    return (emulated.get("connectors", name, namespace=NS) or {}).get("status") or {}


def status_epochs(emulated, name):
    found = connector_status(emulated, name)
    return {name: found.get("epoch"), **{t["id"]: t["epoch"] for t in found.get("tasks") or ()}}


def restarted_events(emulated):
    return events(emulated, "ConnectorRestarted")


def restarts_counted():
    return REGISTRY.get_sample_value("kooper_connector_restarts_total", GROUP) or 0.0


def test_restart_annotation_restarts_in_place_once_per_value_across_operator_restarts(
        emulated, fleet):
    op = Operator(emulated).start()
    try:
        make_group(emulated, delay="30s")
        make_connector(emulated, "A", 4)
        make_connector(emulated, "B", 2)
        for n in range(3):
            fleet.add(f"w-{n}")
        wait_for(lambda: settled(fleet, emulated, resources=8, members=3), what="settle")
        a = ["A", "A-0", "A-1", "A-2", "A-3"]
        wait_for(lambda: status_epochs(emulated, "A") == {r: 1 for r in a}, what="A status")
        before, placed = epochs(emulated), assignments(emulated)
        generation = group_status(emulated)["rebalanceGeneration"]
        counted = restarts_counted()

        annotate(emulated, "A", "first")
        wait_for(lambda: connector_status(emulated, "A").get("restart", {}).get("observed")
                 == "first", what="restart observed")
        after = epochs(emulated)
        assert {r: after[r] for r in a} == {r: before[r] + 1 for r in a}
        assert {r: after[r] for r in ("B", "B-0", "B-1")} == {r: 1 for r in ("B", "B-0", "B-1")}
        assert assignments(emulated) == placed  # restarted where they run, nothing moved
        assert status_epochs(emulated, "A") == {r: 2 for r in a}
        record = connector_status(emulated, "A")["restart"]
        assert record["rebalanceGeneration"] == generation + 1
        # Only the members running part of A got a new document; all of them applied it.
        holders = {m for m, owned in placed.items() if any(r in owned for r in a)}
        newer = {m for m, doc in documents(emulated).items() if doc.generation > generation}
        assert newer == holders
        wait_for(lambda: settled(fleet, emulated, resources=8, members=3), what="applied")
        found = wait_for(lambda: restarted_events(emulated), what="ConnectorRestarted")
        assert len(found) == 1
        assert found[0]["involvedObject"]["kind"] == "Connector"
        assert found[0]["involvedObject"]["name"] == "A"
        assert "first" in found[0]["message"]
        assert restarts_counted() == counted + 1
        assert "restart" not in connector_status(emulated, "B")
    finally:
        op.stop()

    versions = {cm["metadata"]["name"]: cm["metadata"]["resourceVersion"]
                for cm in emulated.list("configmaps", namespace=NS)}
    op = Operator(emulated).start()
    try:
        # A new operator has planned a round from the persisted state: nothing restarts again.
        wait_for(lambda: op.shell.runners and all(
            r.rounds_planned >= 1 for r in op.shell.runners.values()), what="a round")
        assert {cm["metadata"]["name"]: cm["metadata"]["resourceVersion"]
                for cm in emulated.list("configmaps", namespace=NS)} == versions
        assert {r: e for r, e in epochs(emulated).items() if r in a} == {r: 2 for r in a}

        annotate(emulated, "A", "second")
        wait_for(lambda: connector_status(emulated, "A").get("restart", {}).get("observed")
                 == "second", what="second restart observed")
        assert {r: e for r, e in epochs(emulated).items() if r in a} == {r: 3 for r in a}
        assert status_epochs(emulated, "A") == {r: 3 for r in a}
        assert assignments(emulated) == placed
        wait_for(lambda: len(restarted_events(emulated)) == 2, what="second event")
        # One more round after everything settled: a wrongly repeated restart would show.
        runner = op.quiet_after(1)
        steps = runner.steps_run
        runner.task.get_loop().call_soon_threadsafe(runner.poke)
        op.quiet_after(steps + 1, counter="steps_run")
        assert len(restarted_events(emulated)) == 2
        assert {r: e for r, e in epochs(emulated).items() if r in a} == {r: 3 for r in a}
    finally:
        op.stop()


def test_restart_of_a_new_value_set_at_creation_only_records_it(emulated, fleet, operator):
    make_group(emulated)
    emulated.create("connectors", {
        "metadata": {"name": "C", "annotations": {"kooper.dev/restart": "v1"}},
        "spec": {"workerGroup": "wg", "tasksMax": 2},
    }, namespace=NS)
    fleet.add("w-0")
    wait_for(lambda: settled(fleet, emulated, resources=3, members=1), what="settle")
    wait_for(lambda: connector_status(emulated, "C").get("restart", {}).get("observed") == "v1",
             what="recorded")
    # Started once, with the first epoch: nothing ran before, so there was nothing to restart.
    assert epochs(emulated) == {"C": 1, "C-0": 1, "C-1": 1}
