"""A task whose start fails, on the real operator: Failed with the error in the Connector
status, Degraded, Events and metrics, automatic restarts up to ``autoRestart.maxRestarts``
(the count survives an operator restart), then ``kooper.dev/restart-task`` by hand."""

from __future__ import annotations

from prometheus_client import REGISTRY
from tests.shell.conftest import NS, Operator, condition, events, make_group, wait_for

from kooper.protocol import codec, messages

LABELS = {"namespace": NS, "workergroup": "wg"}


def connector_status(emulated, name="A"):
    return (emulated.get("connectors", name, namespace=NS) or {}).get("status") or {}


def task(emulated, task_id, name="A"):
    for entry in connector_status(emulated, name).get("tasks") or ():
        if entry["id"] == task_id:
            return entry
    return {}


def epochs(emulated):
    found = emulated.list("configmaps", namespace=NS, label_selector="kooper.dev/group=wg")
    return {r: e for cm in found
            for r, e in codec.decode_assignment(cm["data"][messages.CONFIGMAP_KEY]).epochs.items()}


def on_connector(emulated, reason):
    return [e for e in events(emulated, reason) if e["involvedObject"]["kind"] == "Connector"]


def sample(name, **labels):
    return REGISTRY.get_sample_value(name, {**LABELS, **labels}) or 0.0


def test_a_failing_task_is_failed_restarted_with_backoff_then_stays_failed_until_asked(
        emulated, fleet):
    automatic = sample("kooper_failed_resource_restarts_total", trigger="automatic")
    manual = sample("kooper_failed_resource_restarts_total", trigger="manual")
    op = Operator(emulated).start()
    try:
        make_group(emulated)
        emulated.create("connectors", {
            "metadata": {"name": "A"},
            "spec": {"workerGroup": "wg", "tasksMax": 2,
                     "autoRestart": {"maxRestarts": 2, "initialBackoffSeconds": 0}},
        }, namespace=NS)
        worker = fleet.add("w-0", failing={"A-1": "boom: no such table"})
        wait_for(lambda: task(emulated, "A-1").get("restarts") == 2
                 and task(emulated, "A-1").get("state") == "Failed", what="restarts exhausted")
        found = task(emulated, "A-1")
        assert found["error"] == "boom: no such table"
        assert found["worker"] == "w-0"
        assert "nextRestart" not in found
        assert task(emulated, "A-0")["state"] == "Running"
        assert worker.failure_counts["A-1"] == 3  # the first start and two restarts
        assert epochs(emulated)["A-1"] == 3  # restarted in place, twice
        status = connector_status(emulated)
        assert condition(status, "Degraded")["status"] == "True"
        assert condition(status, "Degraded")["reason"] == "Failed"
        assert condition(status, "Ready")["status"] == "False"
        wait_for(lambda: on_connector(emulated, "RestartsExhausted"), what="exhausted Event")
        assert len(on_connector(emulated, "TaskRestarted")) == 2
        assert on_connector(emulated, "TaskFailed")
        assert sample("kooper_failed_resources") == 1
        assert sample("kooper_failed_resource_restarts_total", trigger="automatic") \
            == automatic + 2
    finally:
        op.stop()

    op = Operator(emulated).start()
    try:
        # A new operator reads the count back from the status: no restart past maxRestarts.
        runner = op.quiet_after(1)
        steps = runner.steps_run
        runner.task.get_loop().call_soon_threadsafe(runner.poke)
        op.quiet_after(steps + 1, counter="steps_run")
        assert epochs(emulated)["A-1"] == 3
        assert len(on_connector(emulated, "TaskRestarted")) == 2
        assert task(emulated, "A-1")["restarts"] == 2

        worker.failing.clear()  # whatever was wrong is fixed; someone restarts the task
        emulated.patch("connectors", "A", {"metadata": {"annotations": {
            "kooper.dev/restart-task": "1"}}}, namespace=NS)
        wait_for(lambda: task(emulated, "A-1").get("state") == "Running"
                 and connector_status(emulated).get("taskRestart") == {"observed": "1"},
                 what="A-1 running after the restart by hand")
        assert epochs(emulated)["A-1"] == 4
        assert "A-1" in fleet.owned()["w-0"].tasks
        assert task(emulated, "A-1")["restarts"] == 0
        wait_for(lambda: condition(connector_status(emulated), "Degraded")["status"] == "False",
                 what="not degraded")
        assert on_connector(emulated, "TaskRestartRequested")
        assert sample("kooper_failed_resources") == 0
        assert sample("kooper_failed_resource_restarts_total", trigger="manual") == manual + 1
    finally:
        op.stop()
