"""The real kopf operator against the emulated cluster, members played by test doubles."""

from __future__ import annotations

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
    conn = emulated.get("connectors", "A", namespace="default")["status"]
    assert [t["id"] for t in conn["tasks"]] == ["A-0", "A-1", "A-2", "A-3"]
    assert all(t["state"] == "RUNNING" and t["epoch"] >= 1 for t in conn["tasks"])
    wait_for(lambda: events(emulated, "RebalanceCompleted"), what="event")
