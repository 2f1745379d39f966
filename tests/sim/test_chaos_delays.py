"""Hard chaos checks that every scheduled-rebalance delay was honoured (issue 12).

``chaos.check_delays`` judges the operator's audit rows and the workers' rows against
the run's policy and delay alone. Hand-made logs pin the promise of each policy and
each exemption; fixed hard seeds show the check has something to judge, and that it
fails when the operator breaks its promise.
"""

from __future__ import annotations

from typing import Any

import pytest

from kooper.control import audit as audit_rows
from kooper.core import assignor, delays, model
from kooper.core import events as ev
from kooper.shell import audit as shell_audit
from kooper.sim import chaos, delay_rules, runner

KOOPER, KIP = model.Policy.KOOPER, model.Policy.KIP415
D = 20_000


def row(ts: int, member: str, resource: str, change: str, *, protocol: str = "compatible",
        **extra: Any) -> dict[str, Any]:
    kind = {"lost": "stop", "revoked": "stop", "released": "stop", "assigned": "start",
            "join": "join", "leave": "leave", "round": "round"}[change]
    return {"ts_ms": ts, "member": member, "resource": resource, "event": kind,
            "change": change, "protocol": protocol, **extra}


def lost(ts: int, member: str, resource: str = "c00-0", *, departure: str = "unplanned",
         grace_ms: int = D, protocol: str = "compatible") -> dict[str, Any]:
    return row(ts, member, resource, "lost", protocol=protocol, departure=departure,
               grace_ms=grace_ms, until_ms=ts + grace_ms)


def assigned(ts: int, member: str, resource: str = "c00-0", *,
             protocol: str = "compatible") -> dict[str, Any]:
    return row(ts, member, resource, "assigned", protocol=protocol)


def start(ts: int, member: str, resource: str = "c00-0") -> ev.Event:
    return ev.Event(ts, "r", "g", member, resource, ev.Kind.START, 1, 1)


def problems(audit: list[dict[str, Any]], *, policy: model.Policy = KOOPER,
             events: list[ev.Event] | None = None, delay_ms: int = D) -> list[str]:
    return chaos.check_delays(audit, events or [], policy=policy, delay_ms=delay_ms)


# -- kooper: each unplanned departure waits its own grace ---------------------------------


def test_kooper_lost_work_assigned_elsewhere_before_its_grace_ran_out_is_a_violation():
    found = problems([lost(1_000, "a"), assigned(5_000, "b")])
    assert found == ["delay: t=5000 c00-0 assigned on b, lost from a at 1000, promised to "
                     "wait until 21000"]


def test_kooper_lost_work_assigned_elsewhere_once_its_grace_ran_out_is_fine():
    assert problems([lost(1_000, "a"), assigned(21_000, "b")]) == []


def test_kooper_a_worker_starting_lost_work_elsewhere_early_is_a_violation_too():
    # No assigned row: the worker acted on something the operator never vouched for.
    found = problems([lost(1_000, "a"), row(30_000, "", "", "round")],
                     events=[start(2_000, "b")])
    assert found == ["delay: t=2000 c00-0 started on b, lost from a at 1000, promised to "
                     "wait until 21000"]


def test_kooper_each_departure_has_its_own_grace():
    # b departs 15 s after a: it gets its whole grace, not what is left of a's.
    audit = [lost(0, "a", "c00-0"), lost(15_000, "b", "c00-1"),
             assigned(20_000, "c", "c00-0"), assigned(25_000, "c", "c00-1")]
    assert problems(audit) == ["delay: t=25000 c00-1 assigned on c, lost from b at 15000, "
                               "promised to wait until 35000"]


def test_kooper_a_grace_the_step_shortened_is_taken_from_the_row():
    assert problems([lost(1_000, "a", grace_ms=4_000), assigned(5_000, "b")]) == []
    assert problems([lost(1_000, "a", grace_ms=0), assigned(1_000, "b")]) == []
    assert problems([lost(1_000, "a", grace_ms=4_000), assigned(4_999, "b")]) != []


def test_kooper_a_grace_longer_than_the_configured_delay_is_a_violation():
    assert problems([lost(1_000, "a", grace_ms=D + 1)]) == [
        f"delay: t=1000 a departed with a grace of {D + 1} ms, outside 0..{D} ms"]


def test_kooper_planned_departures_hand_their_work_over_at_once():
    assert problems([lost(1_000, "a", departure="planned"), assigned(1_000, "b")]) == []


def test_kooper_a_member_known_not_to_return_releases_what_it_lost():
    # Killed (unplanned), then scaled away: the operator learns it will not come back.
    audit = [lost(1_000, "a"), row(6_000, "a", "c00-0", "released"), assigned(6_000, "b")]
    assert problems(audit) == []


def test_kooper_the_returning_member_ends_the_wait_even_if_balancing_places_part_elsewhere():
    audit = [lost(1_000, "a", "c00-0"), lost(1_000, "a", "c00-1"),
             row(4_000, "a", "", "join"), assigned(4_000, "a", "c00-0"),
             assigned(4_000, "b", "c00-1")]
    assert problems(audit) == []


def test_kooper_work_given_back_to_its_member_may_then_move_by_revocation():
    audit = [lost(1_000, "a"), assigned(2_000, "a"), row(3_000, "a", "c00-0", "revoked"),
             assigned(4_000, "b")]
    assert problems(audit) == []


def test_kooper_a_self_fenced_member_never_left_so_nothing_waits():
    assert problems([lost(1_000, "a", departure="fenced"), assigned(1_000, "b")]) == []


def test_kooper_a_claim_by_another_member_does_not_end_the_departed_members_wait():
    # The round revokes the claim from b (it held the resource by its report); the work
    # is still a's: handing it out before a's grace ran out breaks the promise.
    audit = [lost(1_000, "a"), row(1_000, "b", "c00-0", "revoked"), assigned(1_300, "c")]
    assert len(problems(audit)) == 1


# -- kip415: one delay for the group ------------------------------------------------------


def test_kip415_a_departure_inside_the_window_waits_only_until_the_windows_end():
    audit = [lost(0, "a", "c00-0"), lost(15_000, "b", "c00-1"),
             assigned(20_000, "c", "c00-0"), assigned(20_000, "c", "c00-1")]
    assert problems(audit, policy=KIP) == []
    early = [lost(0, "a", "c00-0"), lost(15_000, "b", "c00-1"), assigned(19_999, "c", "c00-1")]
    assert problems(early, policy=KIP) == [
        "delay: t=19999 c00-1 assigned on c, lost from b at 15000, promised to wait until 20000"]


def test_kip415_the_window_is_the_checks_own_not_the_rows():
    # A row announcing a shorter wait changes nothing: KIP-415 promises the delay.
    audit = [lost(0, "a", grace_ms=0), assigned(1_000, "b")]
    assert problems(audit, policy=KIP) != []


def test_kip415_planned_departures_wait_too():
    audit = [lost(0, "a", departure="planned"), assigned(100, "b")]
    assert problems(audit, policy=KIP) != []


def test_kip415_a_returning_member_may_start_its_own_work_but_nobody_else_may():
    audit = [lost(0, "a"), row(5_000, "a", "", "join"), assigned(6_000, "b")]
    assert problems(audit, policy=KIP) != []
    assert problems([lost(0, "a"), row(5_000, "a", "", "join")], policy=KIP,
                    events=[start(6_000, "a")]) == []


def test_kip415_the_round_that_ends_an_expired_window_hands_a_new_departure_out_with_it():
    audit = [lost(0, "a", "c00-0"), lost(20_050, "b", "c00-1"),
             assigned(20_050, "c", "c00-0"), assigned(20_050, "c", "c00-1"),
             row(20_050, "", "", "round")]
    assert problems(audit, policy=KIP) == []
    # After that round, a departure opens a window of its own.
    later = [*audit, lost(30_000, "c", "c00-1"), assigned(30_100, "d", "c00-1")]
    assert problems(later, policy=KIP) == [
        "delay: t=30100 c00-1 assigned on d, lost from c at 30000, promised to wait until 50000"]


def test_kip415_what_a_live_member_still_held_was_never_lost():
    audit = [lost(0, "a"), row(0, "b", "c00-0", "revoked"), assigned(300, "c")]
    assert problems(audit, policy=KIP) == []


# -- exemptions of every policy -----------------------------------------------------------


@pytest.mark.parametrize("policy", [KOOPER, KIP])
def test_the_eager_protocol_promises_no_delay(policy: model.Policy):
    assert problems([lost(0, "a", protocol="eager"), assigned(10, "b", protocol="eager")],
                    policy=policy) == []
    # A switch to eager ends every wait.
    switched = [lost(0, "a"), row(5_000, "", "", "round", protocol="eager"),
                assigned(6_000, "b")]
    assert problems(switched, policy=policy) == []


@pytest.mark.parametrize("policy", [KOOPER, KIP])
def test_no_delay_configured_promises_nothing(policy: model.Policy):
    assert problems([lost(0, "a", grace_ms=0), assigned(1, "b")], policy=policy,
                    delay_ms=0) == []


def test_check_log_judges_delays_when_given_the_audit_rows_and_the_policy():
    audit = [lost(1_000, "a"), assigned(5_000, "b")]
    assert chaos.check_log([], last_fault_ms=0, delay_ms=D, end_ms=1) == []
    assert chaos.check_log([], last_fault_ms=0, delay_ms=D, end_ms=1, audit=audit,
                           policy=KOOPER) != []


# -- the rows come from the operator's own row builder -----------------------------------


def _converged(settings: model.Settings) -> tuple[model.Snapshot, model.Plan]:
    members = {m: model.Member(m, model.EMPTY, 0, frozenset(model.Protocol), f"i{m}")
               for m in ("a", "b", "c")}
    snap = model.Snapshot(connectors={"c00": 5}, members=members, settings=settings)
    return snap, assignor.plan(snap, model.PlanState(), now_ms=0)


def test_the_operator_and_the_simulator_write_the_same_rows():
    assert shell_audit.rows is audit_rows.rows


@pytest.mark.parametrize(("grace", "waits"), [(None, D), (4_000, 4_000), (0, 0)])
def test_lost_rows_announce_the_departure_and_its_grace(grace: int | None, waits: int):
    settings = model.Settings(max_delay_ms=D)
    snap, plan = _converged(settings)
    members = {m: v for m, v in snap.members.items() if m != "c"}
    later = model.Snapshot(connectors={"c00": 5}, members=members, settings=settings,
                           grace_ms=grace)
    after = assignor.plan(later, plan.state, now_ms=1_000)
    rows = list(audit_rows.rows(previous=plan.state, plan=after, group="g", policy="kooper",
                                run="r", now_ms=1_000, snapshot=later))
    for each in rows:  # event-log rows, in the log's column order, plus their extras
        base = ev.Event.from_row(each).to_row()
        assert list(each)[:len(base)] == list(base)
        assert {k: each[k] for k in base} == base
    gone = [r for r in rows if r["change"] == "lost"]
    assert {r["resource"] for r in gone} == set(plan.members["c"].assigned.sorted())
    assert {(r["departure"], r["grace_ms"], r["until_ms"]) for r in gone} == {
        ("unplanned", waits, 1_000 + waits)}


def test_a_member_known_not_to_return_is_announced_planned():
    settings = model.Settings(max_delay_ms=D)
    snap, plan = _converged(settings)
    members = {m: v for m, v in snap.members.items() if m != "c"}
    later = model.Snapshot(connectors={"c00": 5}, members=members, settings=settings,
                           departed_permanently=frozenset({"c"}))
    after = assignor.plan(later, plan.state, now_ms=1_000)
    rows = list(audit_rows.rows(previous=plan.state, plan=after, group="g", policy="kooper",
                                run="r", now_ms=1_000, snapshot=later))
    assert {(r["departure"], r["until_ms"]) for r in rows if r["change"] == "lost"} == {
        ("planned", 1_000)}


# -- hard chaos: the check has something to judge, and fails a broken operator -----------

SEEDS = range(60)


def _exercised(seed: int) -> tuple[model.Policy, int]:
    config, scenario = chaos.draw_hard(seed)
    sim = runner.Sim(config, scenario, chaos.HardFaults(chaos.draw_extra(seed)))
    sim.audit = []
    result = sim.run()
    return config.policy, chaos.delays_exercised(result.audit, result.events,
                                                 policy=config.policy,
                                                 delay_ms=config.delay_ms)


def test_hard_runs_record_the_operators_audit_rows_and_exercise_delays_under_both_policies():
    exercised = {KOOPER: 0, KIP: 0}
    for seed in SEEDS:
        policy, count = _exercised(seed)
        exercised[policy] += count > 0
    # Runs in which lost work waited and was then handed to another member.
    assert exercised[KOOPER] > 0
    assert exercised[KIP] > 0
    assert runner.Result([], [], 0, None, {}, model.EMPTY, model.Settings(), 0).audit == []


@pytest.mark.parametrize("broken", ["kooper ignores its grace", "kip415 halves its delay"])
def test_the_check_fails_an_operator_that_breaks_its_promise(monkeypatch, broken: str):
    real = delays.resolve

    def resolve(**kwargs: Any) -> delays.Resolution:
        if broken.startswith("kooper") and kwargs["policy"] is KOOPER:
            kwargs["grace_ms"] = 0
        if broken.startswith("kip415") and kwargs["policy"] is KIP:
            kwargs["max_delay_ms"] //= 2
        return real(**kwargs)

    monkeypatch.setattr(delays, "resolve", resolve)
    caught = [seed for seed in SEEDS
              if any(v.startswith("delay:") for v in chaos.run_hard(seed).violations)]
    assert caught != []


# A forged claim standing when the owner departs takes the departed member's work out of
# its grace under ``kooper``: the claim makes the claimant hold it, so it is not lost; the
# round revoked it from the claimant and, once that was acknowledged, handed it out as
# free work before the grace ran out. Fixed: ``control.claims.foreign`` counts lost work
# (and work of a member gone this round) as its departed member's, so such a claim is
# stripped and the work keeps waiting.
FORGED_CLAIM_ENDS_A_GRACE = (593, 2201)


@pytest.mark.parametrize("seed", FORGED_CLAIM_ENDS_A_GRACE)
def test_a_forged_claim_does_not_end_a_departed_members_grace(seed: int):
    assert chaos.run_hard(seed).violations == ()


# -- the check is one table: every row a run can write has a rule ------------------------

R = delay_rules


def test_every_row_a_run_can_write_has_a_rule():
    assert {R.rule_for(key) for key in R.all_keys()} == set(R.RULES)  # and every rule is used


@pytest.mark.parametrize(("key", "effects"), [(R.Key(*k[:5]), k[5]) for k in [
    # The promise of each policy.
    (KIP, R.Kind.LOST, "unplanned", R.Cut.KEPT, False, (R.Effect.WAIT_WINDOW,)),
    (KOOPER, R.Kind.LOST, "unplanned", R.Cut.KEPT, False, (R.Effect.WAIT_GRACE,)),
    # Exemptions.
    (KIP, R.Kind.LOST, "planned", R.Cut.KEPT, False, (R.Effect.WAIT_WINDOW,)),
    (KOOPER, R.Kind.LOST, "planned", R.Cut.KEPT, False, (R.Effect.HAND_OVER,)),
    (KOOPER, R.Kind.LOST, "fenced", R.Cut.KEPT, False, (R.Effect.HAND_OVER,)),
    (KIP, R.Kind.NOT_LOST, "unplanned", R.Cut.KEPT, False, (R.Effect.NOTHING,)),
    (KOOPER, R.Kind.JOIN, "", R.Cut.KEPT, False, (R.Effect.BACK,)),
    (KIP, R.Kind.JOIN, "", R.Cut.KEPT, False, (R.Effect.NOTHING,)),
    (KOOPER, R.Kind.START, "", R.Cut.KEPT, False, (R.Effect.JUDGE, R.Effect.BACK)),
    (KIP, R.Kind.START, "", R.Cut.KEPT, False, (R.Effect.JUDGE,)),
    (KOOPER, R.Kind.RELEASED, "", R.Cut.KEPT, False, (R.Effect.RELEASE,)),
    (KIP, R.Kind.ASSIGNED, "", R.Cut.KEPT, True, (R.Effect.END_ALL,)),
    (KIP, R.Kind.LOST, "unplanned", R.Cut.KEPT, True, (R.Effect.END_ALL,)),
    # Rounds the operator died in.
    (KIP, R.Kind.LOST, "unplanned", R.Cut.IDLE, False, (R.Effect.NOTHING,)),
    (KIP, R.Kind.LOST, "unplanned", R.Cut.ACTED, False, (R.Effect.NOTHING,)),
    (KIP, R.Kind.LOST, "unplanned", R.Cut.PERSISTED, False, (R.Effect.WAIT_WINDOW,)),
    (KOOPER, R.Kind.LOST, "planned", R.Cut.ACTED, False, (R.Effect.HAND_OVER,)),
    (KOOPER, R.Kind.ASSIGNED, "", R.Cut.PERSISTED, False, (R.Effect.NOTHING,)),
    (KOOPER, R.Kind.ASSIGNED, "", R.Cut.ACTED, False, (R.Effect.JUDGE,)),
    (KOOPER, R.Kind.ROUND, "", R.Cut.IDLE, True, (R.Effect.NOTHING,)),
]])
def test_each_row_kind_does_what_its_rule_says(key: delay_rules.Key,
                                               effects: tuple[delay_rules.Effect, ...]):
    # (policy, row kind, departure, cut/persisted, eager) -> what the row does
    rule = R.rule_for(key)
    assert rule.effects == effects
    assert rule.why


def test_every_exemption_is_a_rule_with_its_reason():
    exemptions = [rule.why for rule in R.RULES
                  if not {R.Effect.WAIT_WINDOW, R.Effect.WAIT_GRACE, R.Effect.JUDGE,
                          R.Effect.ROUND}.intersection(rule.effects)]
    assert len(exemptions) == len(set(exemptions)) >= 10


def round_(ts: int, until_ms: int) -> dict[str, Any]:
    return row(ts, "", "", "round", until_ms=until_ms)


def test_kip415_a_round_with_nothing_waiting_closes_the_window():
    # a departs (window to 20 s) and comes back reporting its work (nothing is lost: the
    # operator resets the delay, no row says so but the round's until_ms); it departs
    # again at 25 s and opens a new window to 45 s, which b's departure at 40 s joins.
    audit = [lost(0, "a", "c00-0"), round_(5_000, 5_000),
             lost(25_000, "a", "c00-0"), round_(25_000, 45_000),
             lost(40_000, "b", "c00-1"), round_(40_000, 45_000)]
    assert problems([*audit, assigned(45_100, "c", "c00-1")], policy=KIP) == []
    assert problems([*audit, assigned(44_000, "c", "c00-1")], policy=KIP) == [
        "delay: t=44000 c00-1 assigned on c, lost from b at 40000, promised to wait until "
        "45000"]


def test_kip415_a_round_still_waiting_keeps_the_checks_own_window():
    # The round's deadline never shortens the window the lost rows opened.
    audit = [lost(0, "a"), round_(0, 10_000), assigned(12_000, "b")]
    assert problems(audit, policy=KIP) != []


@pytest.mark.parametrize("seed", [4690, 7279])
def test_a_kip415_window_reset_by_a_returning_member_is_seen_from_the_round_rows(seed: int):
    # Blind spot of the check before round rows carried until_ms: it kept a window the
    # operator had reset, and expected a later one (108112, 94333) than the operator's
    # (95730, 76121), which the assignments at 95830 and 76221 kept.
    assert chaos.run_hard(seed).violations == ()


def test_round_rows_carry_the_delay_deadline_the_round_left_pending():
    settings = model.Settings(max_delay_ms=D, policy=KIP)
    snap, plan = _converged(settings)
    first = list(audit_rows.rows(previous=model.PlanState(), plan=plan, group="g",
                                 policy="kip415", run="r", now_ms=0, snapshot=snap))
    assert [r["until_ms"] for r in first if r["change"] == "round"] == [0]
    later = model.Snapshot(connectors={"c00": 5}, settings=settings,
                           members={m: v for m, v in snap.members.items() if m != "c"})
    after = assignor.plan(later, plan.state, now_ms=1_000)
    rows = list(audit_rows.rows(previous=plan.state, plan=after, group="g", policy="kip415",
                                run="r", now_ms=1_000, snapshot=later))
    assert [r["until_ms"] for r in rows if r["change"] == "round"] == [1_000 + D]
