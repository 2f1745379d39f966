"""Wait or move at once (``control.adaptive``): the rule as a table, learning, persistence."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kooper.control import adaptive, modelled, state
from kooper.control import step as control
from kooper.core import ids, model

W = ids.WorkerId
DELAY = 300_000


def learned(return_ms: int | None, handoff_ms: int | None, *, returns: int = 5,
            handoffs: int = 20) -> adaptive.Learned:
    return adaptive.Learned(return_ms=return_ms, returns=returns, handoff_ms=handoff_ms,
                            handoffs=handoffs)


@pytest.mark.parametrize(("known", "max_delay", "grace", "mode"), [
    # Nothing learned yet: the configured delay, as before.
    (adaptive.Learned(), DELAY, DELAY, "learning"),
    (learned(12_000, 900, returns=1), DELAY, DELAY, "learning"),
    (learned(12_000, 900, handoffs=2), DELAY, DELAY, "learning"),
    # Pods take 12 s to come back, a handoff costs 0.9 s: move at once.
    (learned(12_000, 900), DELAY, 0, "move"),
    # Pods come back in 1.5 s, within two handoffs: wait, up to twice the usual return.
    (learned(1_500, 900), DELAY, 3_000, "wait"),
    (learned(1_800, 900), DELAY, 3_600, "wait"),
    # A very quick return still waits at least the cost of moving.
    (learned(100, 900), DELAY, 1_800, "wait"),
    # Never longer than the configured delay.
    (learned(1_500, 900), 2_000, 2_000, "wait"),
    # No delay configured: move at once whatever was learned.
    (learned(100, 900), 0, 0, "off"),
    (adaptive.Learned(), 0, 0, "off"),
])
def test_the_grace_follows_the_rule(known: adaptive.Learned, max_delay: int, grace: int,
                                    mode: str):
    assert adaptive.choose(known, max_delay_ms=max_delay) == adaptive.Choice(grace, mode)


@given(return_ms=st.none() | st.integers(0, 10**7), handoff_ms=st.none() | st.integers(0, 10**6),
       returns=st.integers(0, 10), handoffs=st.integers(0, 10),
       max_delay=st.integers(-1, 10**7))
def test_the_grace_is_never_negative_nor_longer_than_the_configured_delay(
        return_ms, handoff_ms, returns, handoffs, max_delay):
    known = adaptive.Learned(return_ms=return_ms, returns=returns, handoff_ms=handoff_ms,
                             handoffs=handoffs)
    choice = adaptive.choose(known, max_delay_ms=max_delay)
    assert 0 <= choice.grace_ms <= max(0, max_delay)


def test_a_return_is_timed_from_the_departure_and_a_missing_identity_counts_the_whole_delay():
    known = adaptive.departed(adaptive.Learned(), [W("a"), W("b")], now_ms=1_000)
    assert known.away == {"a": 1_000, "b": 1_000}
    assert adaptive.departed(known, [W("a")], now_ms=5_000) == known  # the first departure
    back = adaptive.returned(known, {W("a"), W("c")}, now_ms=11_000, max_delay_ms=DELAY)
    assert (back.return_ms, back.returns, back.away) == (10_000, 1, {"b": 1_000})
    late = adaptive.returned(back, set(), now_ms=1_000 + DELAY, max_delay_ms=DELAY)
    assert late.returns == 2
    assert late.away == {}
    assert late.return_ms == round(10_000 + adaptive.ALPHA * (DELAY - 10_000))


def test_handoff_costs_are_a_moving_mean():
    first = adaptive.handed_off(adaptive.Learned(), [800])
    assert (first.handoff_ms, first.handoffs) == (800, 1)
    more = adaptive.handed_off(first, [1_200, 1_200])
    assert more.handoffs == 3
    assert 800 < (more.handoff_ms or 0) < 1_200
    assert adaptive.handed_off(more, []) is more


def test_the_learned_numbers_round_trip_through_json_and_garbage_reads_as_nothing_learned():
    known = adaptive.Learned(return_ms=9_000, returns=3, handoff_ms=850, handoffs=40,
                             away={W("w-1"): 123})
    assert adaptive.decode(json.loads(json.dumps(adaptive.encode(known)))) == known
    assert adaptive.decode(None) == adaptive.Learned()
    assert adaptive.decode({"returnMs": "soon", "returns": -1, "away": {"x": "y"}}) == \
        adaptive.Learned()


def test_the_status_shows_the_knob_in_seconds():
    known = learned(12_000, 900)
    shown = adaptive.summary(known, adaptive.choose(known, max_delay_ms=DELAY))
    assert shown == {"mode": "move", "graceSeconds": 0.0, "returnsObserved": 5,
                     "handoffsObserved": 20, "expectedReturnSeconds": 12.0,
                     "expectedHandoffSeconds": 0.9}


# --- the step ------------------------------------------------------------------------

GROUP = "g"


def member(name: str, incarnation: str = "1") -> model.Member:
    return model.Member(W(name), model.EMPTY, -1, frozenset(model.Protocol), incarnation)


def inputs(members: list[model.Member], policy: model.Policy,
           status: dict[str, object] | None = None) -> control.Inputs:
    pods, leases = modelled.Members(GROUP).views({m.id: m for m in members})
    return control.Inputs(
        gone_means_stopped=True,
        group=modelled.group(GROUP, model.Settings(model.Protocol.COMPATIBLE, policy, DELAY),
                             status=status),
        pods=pods, leases=leases, connectors=modelled.connectors(GROUP, {"A": 5}),
        owners={("ReplicaSet", n): control.OwnerFacts(exists=True) for n in ("a", "b", "c")})


def settle(members: list[model.Member], memory: control.Memory, now_ms: int, policy: model.Policy
           ) -> tuple[list[model.Member], control.Memory, control.Step]:
    """Rounds 100 ms apart until quiet; members apply and report what they were written."""
    last: control.Step | None = None
    for tick in range(10):
        decided = control.step(inputs(members, policy), memory, now_ms=now_ms + 100 * tick)
        memory = decided.memory
        if decided.plan is None:
            assert last is not None
            return members, memory, last
        last = decided
        written = {w.member: w for w in decided.configmap_writes}
        members = [m if m.id not in written else model.Member(
            m.id, written[m.id].assigned, written[m.id].generation, m.protocols, m.incarnation)
            for m in members]
    raise AssertionError("no quiet round")


def bounce(members: list[model.Member], memory: control.Memory, *, at: int, away_ms: int,
           policy: model.Policy) -> tuple[list[model.Member], control.Memory, control.Step]:
    """``c`` is killed at ``at`` and comes back ``away_ms`` later as a new process."""
    others = [m for m in members if m.id != "c"]
    _, memory, left = settle(others, memory, at, policy)
    back = [*others, member("c", incarnation=f"{at}")]
    members, memory, _ = settle(back, memory, at + away_ms, policy)
    return members, memory, left


def test_a_group_whose_pods_return_slowly_learns_to_move_a_killed_pods_work_at_once():
    members, memory, _ = settle([member("a"), member("b"), member("c")], control.Memory(), 0,
                                model.Policy.KOOPER)
    assert memory.persisted.learned.handoffs >= adaptive.MIN_HANDOFFS
    for number, at in enumerate((100_000, 200_000)):
        members, memory, left = bounce(members, memory, at=at, away_ms=12_000,
                                       policy=model.Policy.KOOPER)
        assert left.plan is not None
        assert left.plan.unassigned, f"kill {number}: learning, the work waits for its pod"
        assert left.status is not None
        assert left.status.adaptive_status is not None
        assert left.status.adaptive_status["mode"] == "learning"
        assert left.metrics.grace_ms == DELAY
    assert memory.persisted.learned.returns == 2
    assert memory.persisted.learned.return_ms == 12_000
    # An operator restart keeps what was learned (``status.state.adaptive``).
    persisted = {"state": state.encode(memory.persisted.state, learned=memory.persisted.learned)}
    restored = control.restored(modelled.group(GROUP, model.Settings(policy=model.Policy.KOOPER),
                                               status=persisted), {})
    assert restored.persisted.learned == memory.persisted.learned
    _, _, left = bounce(members, memory, at=300_000, away_ms=12_000, policy=model.Policy.KOOPER)
    assert left.plan is not None
    assert not left.plan.unassigned, "returns take longer than two handoffs: moved at once"
    assert left.snapshot is not None
    assert left.snapshot.grace_ms == 0
    assert left.status is not None
    assert left.status.adaptive_status is not None
    assert left.status.adaptive_status["mode"] == "move"
    assert left.metrics.grace_ms == 0  # kooper_unplanned_departure_grace_seconds


def test_kip415_learns_nothing_into_its_decisions():
    members, memory, _ = settle([member("a"), member("b"), member("c")], control.Memory(), 0,
                                model.Policy.KIP415)
    for at in (100_000, 200_000, 300_000):
        members, memory, left = bounce(members, memory, at=at, away_ms=12_000,
                                       policy=model.Policy.KIP415)
        assert left.plan is not None
        assert left.plan.unassigned, "kip415 always waits out the delay"
        assert left.snapshot is not None
        assert left.snapshot.grace_ms is None
        assert left.status is not None
        assert left.status.adaptive_status is None
        assert left.metrics.grace_ms == DELAY


def test_a_scaled_down_member_is_not_watched_for_a_return():
    members, memory, _ = settle([member("a"), member("b"), member("c")], control.Memory(), 0,
                                model.Policy.KOOPER)
    others = [m for m in members if m.id != "c"]
    gone = inputs(others, model.Policy.KOOPER)
    gone = control.Inputs(group=gone.group, pods=gone.pods, leases=gone.leases,
                          connectors=gone.connectors, gone_means_stopped=True,
                          owners={("ReplicaSet", "c"): control.OwnerFacts(exists=False)})
    decided = control.step(gone, memory, now_ms=50_000)
    assert decided.memory.persisted.learned.away == {}
