"""Failed instances and tasks in ``control.step``: Failed, automatic restarts with backoff,
restarts by hand, and what a restarted operator reads back (tables of steps)."""

from __future__ import annotations

import dataclasses

import pytest

from kooper.control import connector_status, failures, modelled, status, views
from kooper.control import step as control
from kooper.core import ids, model
from kooper.protocol import messages

W = ids.WorkerId
GROUP = "g"
SETTINGS = model.Settings(model.Protocol.COMPATIBLE, model.Policy.KOOPER, max_delay_ms=60_000)
SECOND = 1000


@dataclasses.dataclass
class Member:
    """A member that applies what it is written; ``failing`` resources fail to start."""

    name: str
    owned: model.ConnectorsAndTasks = model.EMPTY
    generation: int = -1
    failing: dict[str, str] = dataclasses.field(default_factory=dict)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)
    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    epochs: dict[str, int] = dataclasses.field(default_factory=dict)

    def apply(self, doc: messages.Assignment) -> None:
        assigned = doc.assigned
        broken = {r for r in self.failing if r in assigned.tasks or r in assigned.connectors}
        self.owned = doc.assigned.difference(model.ConnectorsAndTasks(frozenset(broken),
                                                                      frozenset(broken)))
        self.failed = {r: self.failing[r] for r in broken}
        for resource in broken:
            self.counts[resource] = self.counts.get(resource, 0) + 1
        self.generation = doc.generation
        self.epochs = dict(doc.epochs)

    def lease(self) -> views.LeaseView:
        modelled_member = model.Member(W(self.name), self.owned, self.generation,
                                       frozenset(model.Protocol), "1")
        lease = modelled.lease(modelled_member)
        assert lease.report is not None
        report = dataclasses.replace(lease.report, failed=dict(self.failed),
                                     failure_counts={r: self.counts[r] for r in self.failed})
        return dataclasses.replace(lease, report=report)


def connector(name: str = "A", tasks: int = 2, *, max_restarts: int = 3, backoff_s: int = 10,
              enabled: bool = True, restart_task: str = "", restart: str = "",
              status_: dict[str, object] | None = None) -> views.ConnectorView:
    return views.ConnectorView(
        namespace=modelled.NAMESPACE, name=name, uid=f"uid-{name}", generation=1, group=GROUP,
        tasks_max=tasks, config={}, state="running", restart=restart, status=status_ or {},
        auto_restart=enabled, max_restarts=max_restarts, initial_backoff_s=backoff_s,
        restart_task=restart_task)


class Group:
    """The step and its members, looped by hand (what the shell and simulator do)."""

    def __init__(self, *members: Member, connectors: list[views.ConnectorView] | None = None,
                 memory: control.Memory | None = None) -> None:
        self.members = {m.name: m for m in members}
        self.connectors = connectors or [connector()]
        self.memory = memory or control.Memory()
        self.now_ms = 0
        self.last: control.Step | None = None
        self.planned: control.Step | None = None
        """The last step that planned a round (its Connector statuses are the latest)."""

    def inputs(self) -> control.Inputs:
        leases = [m.lease() for m in self.members.values()]
        pods = [modelled.pod(GROUP, model.Member(W(m.name), incarnation="1"))
                for m in self.members.values()]
        return control.Inputs(group=modelled.group(GROUP, SETTINGS), pods=pods, leases=leases,
                              connectors=self.connectors)

    def step(self, at_ms: int | None = None, *, fail_writes: frozenset[ids.WorkerId] = frozenset()
             ) -> control.Step:
        if at_ms is not None:
            self.now_ms = at_ms
        decided = control.step(self.inputs(), self.memory, now_ms=self.now_ms)
        decided = decided.failed(fail_writes, retry_ms=SECOND)
        for doc in decided.configmap_writes:
            if doc.member not in fail_writes:
                self.members[doc.member].apply(doc)
        self.memory = decided.memory
        self.last = decided
        if decided.connectors is not None:
            self.planned = decided
        return decided

    def settle(self) -> control.Step:
        """Steps until one writes nothing."""
        decided = self.step()
        while decided.configmap_writes:
            decided = self.step()
        return decided

    def task_status(self, name: str = "A") -> dict[str, object]:
        """The Connector status the shell would patch from the last step."""
        work = self.planned.connectors if self.planned else None
        assert work is not None
        holders = {r: m for m, p in work.plan.members.items() for r in p.assigned.tasks}
        instances = {r: m for m, p in work.plan.members.items() for r in p.assigned.connectors}
        owned = {r: m for m, live in work.snapshot.members.items() for r in live.owned.tasks}
        spec = next(c for c in self.connectors if c.name == name)
        marked = {r: fields for r, rec in work.failures.items() if rec.connector == name
                  and (fields := failures.entry(
                      rec, worker=instances.get(r) if r == name else holders.get(r)))}
        return connector_status.connector_status(
            spec, holders=holders, owned=owned, epochs=work.plan.state.epochs,
            group_exists=True, instances=instances, failed=marked,
            task_restart=work.task_restarts.get(name, ""))


def tasks_of(found: dict[str, object]) -> dict[str, dict[str, object]]:
    return {t["id"]: t for t in found["tasks"]}  # type: ignore[attr-defined,index]


def planned_restarts(group: Group) -> list[int]:
    return [r.next_at_ms for r in (group.memory.persisted.failures or {}).values()
            if r.next_at_ms is not None]


def reasons(decided: control.Step) -> list[str]:
    return [e.reason for e in decided.events]


def test_a_failed_start_shows_failed_with_the_error_and_degrades_connector_and_group():
    group = Group(Member("a", failing={"A-1": "boom: no such table"}))
    decided = group.settle()  # the last step read the report: the failure is judged
    found = group.task_status()
    assert tasks_of(found)["A-1"]["state"] == "Failed"
    assert tasks_of(found)["A-1"]["error"] == "boom: no such table"
    assert tasks_of(found)["A-1"]["restarts"] == 0
    assert tasks_of(found)["A-0"]["state"] == "Running"
    conditions = {c.type: c for c in found["conditions"]}  # type: ignore[attr-defined]
    assert (conditions["Ready"].status, conditions["Degraded"].status) == (False, True)
    assert conditions["Degraded"].reason == "Failed"
    assert "A-1: boom" in conditions["Degraded"].message
    assert decided.metrics.failed_resources == 1
    failed_events = [e for e in decided.events if e.reason == "TaskFailed"]
    assert len(failed_events) == 1
    assert failed_events[0].connector == "A"
    assert failed_events[0].warning
    assert decided.status is not None
    degraded = status.group_conditions(decided.status.facts)[2]
    assert (degraded.status, degraded.reason) == (True, "ResourcesFailed")
    # The first automatic restart is due after initialBackoffSeconds.
    assert decided.wake_at_ms == group.now_ms + 10 * SECOND
    assert group.step().configmap_writes == ()  # nothing new: no second TaskFailed either
    assert "TaskFailed" not in reasons(group.last)  # type: ignore[arg-type]


def test_automatic_restarts_back_off_exponentially_then_the_task_stays_failed():
    group = Group(Member("a", failing={"A-1": "boom"}))
    group.settle()  # at 0: A-1 failed
    epoch = group.members["a"].epochs["A-1"]
    due = [10_000, 10_000 + 20_000, 30_000 + 40_000]  # 10 s, 20 s, 40 s after each failure
    for number, at in enumerate(due, start=1):
        early = group.step(at_ms=at - 1)
        assert early.configmap_writes == ()
        restarted = group.step(at_ms=at)
        assert [w.member for w in restarted.configmap_writes] == ["a"]
        assert restarted.configmap_writes[0].epochs["A-1"] == epoch + number  # in place
        assert restarted.metrics.resource_restarts == (("automatic", 1), ("manual", 0))
        assert "TaskRestarted" in reasons(restarted)
        assert f"automatic restart {number}/3" in next(
            e.message for e in restarted.events if e.reason == "TaskRestarted")
        judged = group.step(at_ms=at)  # it failed again
        assert tasks_of(group.task_status())["A-1"]["restarts"] == number
        if number < 3:
            assert judged.wake_at_ms == at + 10_000 * 2 ** number
    assert "RestartsExhausted" in reasons(judged)
    assert not planned_restarts(group)
    found = tasks_of(group.task_status())["A-1"]
    assert (found["state"], found["restarts"]) == ("Failed", 3)
    assert "nextRestart" not in found
    assert group.step(at_ms=10**9).configmap_writes == ()  # never again by itself


def test_a_task_that_runs_again_after_a_restart_is_running_and_keeps_its_count():
    member = Member("a", failing={"A-1": "boom"})
    group = Group(member)
    group.settle()
    group.step(at_ms=0)
    member.failing.clear()
    group.step(at_ms=10_000)  # the restart is written, and this time the start works
    decided = group.step(at_ms=10_000)
    found = tasks_of(group.task_status())["A-1"]
    assert found["state"] == "Running"
    assert found["restarts"] == 1
    assert decided.metrics.failed_resources == 0
    # Long enough without failing: the count starts afresh.
    group.step(at_ms=10_000 + failures.RESET_AFTER_MS)
    assert "restarts" not in tasks_of(group.task_status())["A-1"]


def test_disabled_auto_restart_leaves_the_task_failed():
    group = Group(Member("a", failing={"A-0": "boom"}),
                  connectors=[connector(enabled=False)])
    group.settle()
    group.step()
    assert not planned_restarts(group)
    assert group.step(at_ms=10**9).configmap_writes == ()
    assert tasks_of(group.task_status())["A-0"]["state"] == "Failed"


def test_a_failed_connector_instance_is_failed_in_status_instance():
    group = Group(Member("a", failing={"A": "instance boom"}))
    group.settle()
    group.step()
    found = group.task_status()
    assert found["instance"] == {"worker": "a", "state": "Failed", "error": "instance boom",
                                 "restarts": 0, "nextRestart": views.format_time(10_000)}
    restarted = group.step(at_ms=10_000)
    assert restarted.configmap_writes[0].epochs["A"] == 2


def test_restart_task_annotation_restarts_an_exhausted_task_once_per_value():
    member = Member("a", failing={"A-1": "boom"})
    group = Group(member, connectors=[connector(max_restarts=0)])
    group.settle()
    group.step()
    assert tasks_of(group.task_status())["A-1"]["state"] == "Failed"
    member.failing.clear()
    group.connectors = [connector(max_restarts=0, restart_task="1")]
    asked = group.step(at_ms=5_000)
    assert [w.member for w in asked.configmap_writes] == ["a"]
    assert asked.configmap_writes[0].epochs["A-1"] == 2
    assert asked.configmap_writes[0].epochs["A-0"] == 1  # only the task named
    assert asked.metrics.resource_restarts == (("automatic", 0), ("manual", 1))
    assert "TaskRestartRequested" in reasons(asked)
    group.step()
    found = group.task_status()
    assert tasks_of(found)["A-1"]["state"] == "Running"
    assert found["taskRestart"] == {"observed": "1"}
    assert group.step(at_ms=6_000).configmap_writes == ()  # the same value: done
    again = Group(member, connectors=[connector(max_restarts=0, restart_task="1",
                                                status_=dict(found))],
                  memory=control.Memory())
    again.settle()
    assert all(doc.epochs.get("A-1") != 3 for doc in again.last.configmap_writes)  # type: ignore[union-attr]


def failed_past_its_restart_limit() -> tuple[Member, Group]:
    """A task that failed three times with a restart limit of 2: ``Failed``, restarts 2."""
    member = Member("a", failing={"A-1": "boom"})
    group = Group(member, connectors=[connector(max_restarts=2, backoff_s=0)])
    group.settle()
    for _ in range(4):
        group.step()
    return member, group


def test_a_restarted_operator_keeps_the_restart_count_from_the_connector_status():
    member, group = failed_past_its_restart_limit()
    found = group.task_status()
    assert (tasks_of(found)["A-1"]["state"], tasks_of(found)["A-1"]["restarts"]) == ("Failed", 2)
    # A new operator: the planner state as ``restored`` reads it back (tested with the
    # step's tables), and nothing else: the failures come from the Connector status.
    planner = group.memory
    fresh = Group(member, connectors=[connector(max_restarts=2, backoff_s=0,
                                                status_=dict(found))],
                  memory=control.Memory.of(state=planner.persisted.state,
                                           given=planner.persisted.given,
                                           configmaps=planner.persisted.configmaps))
    fresh.now_ms = group.now_ms
    steps = [fresh.step() for _ in range(3)]
    assert not any("TaskRestarted" in reasons(s) for s in steps)  # none past maxRestarts
    assert not planned_restarts(fresh)
    found = tasks_of(fresh.task_status())["A-1"]
    assert (found["state"], found["restarts"]) == ("Failed", 2)


@pytest.mark.parametrize(("running", "failed"), [("Running", "Failed"), ("RUNNING", "FAILED")])
def test_a_failed_entry_is_read_back_whichever_casing_wrote_it(running, failed):
    # RUNNING, FAILED: the status of a kooper from before the CamelCase states, still stored.
    older = connector(status_={
        "tasks": [{"id": "A-0", "worker": "a", "state": running, "epoch": 1},
                  {"id": "A-1", "worker": "a", "state": failed, "error": "boom",
                   "restarts": 3, "epoch": 4}],
        "instance": {"worker": "a", "state": failed, "error": "instance boom", "restarts": 1}})
    book = failures.restore([older])
    assert sorted(book) == ["A", "A-1"]
    assert (book["A-1"].failing, book["A-1"].restarts, book["A-1"].error) == (True, 3, "boom")
    assert (book["A"].failing, book["A"].restarts) == (True, 1)


def test_an_upgraded_operator_keeps_an_older_kooper_s_failed_task_failed_and_rewrites_it():
    member, group = failed_past_its_restart_limit()
    found = group.task_status()
    older = {**found, "tasks": [{**task, "state": task["state"].upper()}
                                for task in found["tasks"]]}  # type: ignore[attr-defined]
    assert {task["state"] for task in older["tasks"]} == {"RUNNING", "FAILED"}
    planner = group.memory
    fresh = Group(member, connectors=[connector(max_restarts=2, backoff_s=0, status_=older)],
                  memory=control.Memory.of(state=planner.persisted.state,
                                           given=planner.persisted.given,
                                           configmaps=planner.persisted.configmaps))
    fresh.now_ms = group.now_ms
    steps = [fresh.step() for _ in range(3)]
    assert not any("TaskRestarted" in reasons(s) for s in steps)  # still past maxRestarts
    rewritten = tasks_of(fresh.task_status())
    assert (rewritten["A-1"]["state"], rewritten["A-1"]["restarts"]) == ("Failed", 2)
    assert rewritten["A-0"]["state"] == "Running"


def test_a_restart_whose_configmap_write_failed_is_made_again():
    group = Group(Member("a", failing={"A-1": "boom"}))
    group.settle()
    group.step(at_ms=0)
    lost = group.step(at_ms=10_000, fail_writes=frozenset({W("a")}))
    assert lost.metrics.resource_restarts == (("automatic", 0), ("manual", 0))
    assert lost.wake_at_ms is not None
    assert lost.wake_at_ms <= 11_000
    retried = group.step(at_ms=11_000)
    assert [w.member for w in retried.configmap_writes] == ["a"]
    assert retried.metrics.resource_restarts == (("automatic", 1), ("manual", 0))
    group.step(at_ms=11_000)
    assert tasks_of(group.task_status())["A-1"]["restarts"] == 1


def test_a_failure_is_about_its_placement_and_is_forgotten_when_the_task_moves():
    group = Group(Member("a", failing={"A-0": "boom"}), connectors=[connector(tasks=1)])
    group.settle()
    group.step()
    assert group.memory.persisted.failures
    group.connectors = [connector(tasks=0)]
    group.settle()
    assert not group.memory.persisted.failures
