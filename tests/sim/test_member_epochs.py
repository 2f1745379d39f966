"""Issue 12 in the simulator, with members driven by the real SDK ``Session``.

Mechanism 1, *stale assignment after a partition*: a member cut off from the API
for a little over the time it takes the operator to declare it departed (20 s
here: a 15 s lease plus a 5 s skew margin) must never act on a document written
before it was declared departed, while that document's work runs elsewhere.
"""

from __future__ import annotations

from kooper.control import step as control
from kooper.core import events as ev
from kooper.core import model
from kooper.sim import metrics, runner, scenarios

A = scenarios.Action
S = scenarios.Step


class DiesAfterTheConfigMaps(runner.Sim):
    """An operator that dies mid-write-sequence, just before the status write."""

    def _crash_prefix(self, count: int) -> int:
        return count - 1


class OldWriteOrder(DiesAfterTheConfigMaps):
    """The write order before issue 12: ConfigMaps, the status, then the deletions."""

    def _ordered(self, decided: control.Step) -> tuple[control.Write, ...]:
        writes = decided.writes
        deletes = tuple(w for w in writes if isinstance(w, control.DeleteConfigMap))
        return (*(w for w in writes if not isinstance(w, control.DeleteConfigMap)), *deletes)


def stale_assignment_run(sim_class: type[runner.Sim]) -> runner.Result:
    """Pod 1 is cut off; pod 2 dies, and its work goes to pods 0 and 1 (pod 1's document
    is written while it cannot read it); pod 1 is declared departed at +20 s, its work
    goes to pod 0, and the operator dies while writing that round; the partition heals
    200 ms after the declaration, while the operator is down."""
    config = runner.Config(pods=3, connectors=2, tasks=2, delay_ms=0, seed=7, sessions=True,
                           policy=model.Policy.KOOPER)
    scenario = scenarios.Scenario("stale-assignment", (
        S(A.PARTITION, pod=1, down_ms=20_200),
        S(A.KILL, pod=2, delay_ms=2_000, down_ms=120_000),
        S(A.OPERATOR_RESTART, delay_ms=13_000, mid_round=True),
    ))
    return sim_class(config, scenario).run()


def test_a_member_back_from_a_partition_never_runs_a_document_from_before_its_departure():
    result = stale_assignment_run(DiesAfterTheConfigMaps)
    assert result.violations == []
    assert metrics.run_metrics(result.events).overlaps == 0
    every = set(result.configured.connectors) | set(result.configured.tasks)
    assert set().union(*result.running.values()) == every


def test_the_same_run_double_owns_with_the_old_write_order():
    """The scenario is sharp: deleting the departed member's ConfigMap after handing its
    work over leaves the window the issue found."""
    result = stale_assignment_run(OldWriteOrder)
    assert any("started on sim-1 while sim-0 runs it" in v for v in result.violations)
    assert metrics.run_metrics(result.events).overlaps > 0
    assert any(e.member == "sim-1" and e.event is ev.Kind.START for e in result.events)
