"""A short, deterministic run of issue 12's chaos families (``make bench`` runs 100,000)."""

from __future__ import annotations

from kooper.core import events as ev
from kooper.sim import chaos


def test_the_first_hard_chaos_seeds_keep_every_invariant():
    outcomes = [chaos.run_hard(seed) for seed in range(20)]
    assert [(o.seed, o.violations) for o in outcomes if o.violations] == []
    assert sum(o.events for o in outcomes) > 0


def test_the_log_check_finds_double_ownership_and_a_shrinking_epoch():
    def e(ts: int, member: str, kind: ev.Kind, epoch: int = -1) -> ev.Event:
        return ev.Event(ts, "r", "g", member, "c00", kind, 1, epoch)

    log = [e(0, "a", ev.Kind.START, 1), e(5, "b", ev.Kind.START, 2), e(9, "a", ev.Kind.STOP),
           e(10, "b", ev.Kind.STOP), e(20, "a", ev.Kind.START, 2)]
    problems = chaos.check_log(log, last_fault_ms=0, delay_ms=0, end_ms=30)
    assert any("while a runs it" in p for p in problems)
    assert any("at epoch 2 after epoch 2 on b" in p for p in problems)
    assert chaos.check_log(log[:1], last_fault_ms=0, delay_ms=0, end_ms=30) == []
    late = chaos.check_log([], last_fault_ms=0, delay_ms=0,
                           end_ms=chaos.CONVERGE_BOUND_MS + 1)
    assert late != []
