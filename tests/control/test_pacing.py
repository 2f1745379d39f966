"""Pacing balancing moves (``control.pacing``): at most ``maxMovesPerRound`` per round.

The group is driven through ``control.step`` in virtual time: every member applies
its document at once and reports; when a round writes nothing the clock jumps to the
step's wake-up time (the revocation backoff's next window).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest
import yaml
from tests.chart import crdschema

from kooper.control import modelled, pacing, views
from kooper.control import step as control
from kooper.core import defaults, ids, model

W = ids.WorkerId
HOUR_MS = 3_600_000
GROUP = "g"
ROOT = Path(__file__).resolve().parents[2]
SETTINGS = model.Settings(model.Protocol.COMPATIBLE, model.Policy.KOOPER)
THOUSAND = {f"c{n}": 100 for n in range(10)}
"""10 connectors x 100 tasks: 1,000 tasks and 10 instances."""


class Group:
    def __init__(self, names: list[str], counts: dict[str, int], *, limit: int | str,
                 settings: model.Settings = SETTINGS) -> None:
        self.members = {W(n): model.Member(W(n), incarnation="1") for n in names}
        self.memory = control.Memory()
        self.counts = counts
        self.limit = limit
        self.settings = settings
        self.now_ms = 0
        self.rounds: list[control.Step] = []
        self.modelled = modelled.Members(GROUP)

    def step(self) -> control.Step:
        pods, leases = self.modelled.views(self.members)
        group = dataclasses.replace(modelled.group(GROUP, self.settings),
                                    max_moves_per_round=self.limit)
        owners = {(modelled.OWNER_KIND, n): control.OwnerFacts(exists=True)
                  for n in self.members}
        decided = control.step(control.Inputs(
            gone_means_stopped=True,
            group=group, pods=pods, leases=leases, owners=owners,
            connectors=modelled.connectors(GROUP, self.counts)), self.memory,
            now_ms=self.now_ms)
        check_barrier(decided, self.members)
        for doc in decided.configmap_writes:
            member = self.members.get(W(doc.member))
            if member is not None:
                applied = dataclasses.replace(member, owned=doc.assigned,
                                              generation=doc.generation)
                self.members[W(doc.member)] = applied
                self.modelled.update(applied, doc.member_epoch)
        self.memory = decided.memory
        self.rounds.append(decided)
        return decided

    def run(self, *, max_rounds: int = 200) -> None:
        """Rounds until one writes nothing and nothing is scheduled (virtual time)."""
        for _ in range(max_rounds):
            decided = self.step()
            if decided.configmap_writes:
                continue
            if decided.wake_at_ms is None or decided.wake_at_ms - self.now_ms > HOUR_MS:
                return  # (a modelled Lease "expires" only after a billion seconds)
            self.now_ms = max(self.now_ms + 1, decided.wake_at_ms)
        raise AssertionError("the group did not settle")

    def loads(self) -> list[int]:
        return [len(m.owned) for m in self.members.values()]


def check_barrier(decided: control.Step, members: dict[ids.WorkerId, model.Member]) -> None:
    """No resource is assigned to two members, nor to one while another still runs it."""
    if decided.plan is None:
        return
    assigned: Counter[tuple[bool, str]] = Counter()
    for plan in decided.plan.members.values():
        assigned.update((False, r) for r in plan.assigned.connectors)
        assigned.update((True, r) for r in plan.assigned.tasks)
    assert not [r for r, n in assigned.items() if n > 1]
    for name, plan in decided.plan.members.items():
        for other, member in members.items():
            if other != name:
                assert not plan.assigned.intersection(member.owned), (name, other)


def balancing_revocations(decided: control.Step) -> int:
    assert decided.plan is not None
    return sum(len(p.revoked) for p in decided.plan.members.values())


def scaled_out(limit: int | str) -> Group:
    group = Group(["w-00", "w-01"], THOUSAND, limit=limit)
    group.run()
    assert sorted(group.loads()) == [505, 505]
    group.rounds.clear()
    for n in range(2, 20):
        group.members[W(f"w-{n:02d}")] = model.Member(W(f"w-{n:02d}"), incarnation="1")
    group.run()
    return group


MOVES = 900 + 8
"""The fewest moves from 2 x 505 to 20 members: each keeps 50 tasks and one instance at most
(450 tasks and 4 instances leave each of the two)."""


@pytest.mark.parametrize("limit", [100, "10%", defaults.BALANCING_MAX_MOVES_PER_ROUND])
def test_a_scale_out_from_2_to_20_moves_at_most_the_cap_per_round_and_ends_balanced(limit):
    group = scaled_out(limit)
    cap = pacing.cap(limit, 1010)
    revoked = [balancing_revocations(r) for r in group.rounds if r.plan is not None]
    assert max(revoked) == cap  # never more than the cap; the paced rounds use all of it
    assert sum(revoked) == MOVES  # pacing adds no move
    loads = group.loads()
    assert max(loads) - min(loads) <= 2  # instances and tasks each differ by one at most
    assert sum(loads) == 1010
    paced = [r for r in group.rounds if "BalancingPaced" in reasons(r)]
    assert len(paced) == -(-MOVES // cap) - 1  # the last batch fits the cap
    assert group.memory.volatile.paced == 0
    assert group.rounds[-1].status is not None
    assert group.rounds[-1].status.facts.paced == 0


def test_the_default_cap_moves_a_quarter_at_a_time_and_converges_within_about_a_minute():
    group = scaled_out(defaults.BALANCING_MAX_MOVES_PER_ROUND)
    assert pacing.cap(defaults.BALANCING_MAX_MOVES_PER_ROUND, 1010) == 253
    # Four revoking rounds, spaced by the revocation backoff (0, 40 ms, 1.6 s, 64 s).
    assert [balancing_revocations(r) for r in group.rounds
            if r.plan is not None and balancing_revocations(r)] == [253, 253, 253, 149]
    assert group.now_ms <= 70_000


def test_without_a_cap_that_binds_the_same_scale_out_moves_everything_in_one_round():
    group = scaled_out("100%")
    revoked = [balancing_revocations(r) for r in group.rounds if r.plan is not None]
    assert max(revoked) == sum(revoked) == MOVES
    assert not any("BalancingPaced" in reasons(r) for r in group.rounds)


def reasons(decided: control.Step) -> list[str]:
    return [e.reason for e in decided.events]


def test_the_status_event_and_metrics_say_how_many_moves_wait():
    group = scaled_out(100)
    first = next(r for r in group.rounds if "BalancingPaced" in reasons(r))
    (event,) = [e for e in first.events if e.reason == "BalancingPaced"]
    assert event.message == ("moving 100 of 908 resources for balance this round "
                             "(spec.balancing.maxMovesPerRound 100); 808 move in later rounds")
    assert not event.warning
    assert (first.metrics.balancing_deferred, first.metrics.balancing_pending) == (808, 808)
    assert first.status is not None
    document = first.status.document(encoded={}, previous={})
    assert document["balancing"] == {"pendingMoves": 808, "maxMovesPerRound": 100}
    rebalancing = next(c for c in document["conditions"] if c["type"] == "Rebalancing")
    assert rebalancing["reason"] == "RevokingForBalance"
    assert "808 more move(s) wait for later rounds (at most 100 per round)" in \
        rebalancing["message"]
    # A round in between (the freed work is placed; the backoff runs) still shows them.
    after = group.rounds[group.rounds.index(first) + 1]
    assert after.metrics.balancing_deferred == 0
    assert after.metrics.balancing_pending == 808
    assert "balancing" not in group.rounds[-1].status.document(encoded={}, previous={})


def test_a_cap_of_one_still_converges():
    group = Group(["a", "b"], {"A": 20}, limit=1)
    group.run()
    for name in ("c", "d"):
        group.members[W(name)] = model.Member(W(name), incarnation="1")
    group.rounds.clear()
    group.run()
    revoked = [balancing_revocations(r) for r in group.rounds if r.plan is not None]
    assert set(revoked) == {0, 1}
    assert sorted(group.loads()) == [5, 5, 5, 6]


def test_lost_work_is_handed_out_at_once_whatever_the_cap():
    no_delay = model.Settings(model.Protocol.COMPATIBLE, model.Policy.KOOPER, max_delay_ms=0)
    group = Group([f"w-{n:02d}" for n in range(20)], THOUSAND, limit=10, settings=no_delay)
    group.run()
    lost = sum(len(group.members.pop(W(f"w-{n:02d}")).owned) for n in range(10))
    handoff = group.step()
    assert handoff.plan is not None
    assert sum(len(r) for r in handoff.plan.newly_assigned.values()) == lost > 10
    assert "BalancingPaced" not in reasons(handoff)
    group.run()
    assert sum(group.loads()) == 1010


def test_a_planned_departure_hands_its_work_over_at_once_whatever_the_cap():
    group = Group([f"w-{n:02d}" for n in range(20)], THOUSAND, limit=10)
    group.run()
    leaving = W("w-07")
    held = len(group.members[leaving].owned)
    group.modelled.terminating(leaving)
    group.step()
    group.modelled.leave(leaving)
    del group.members[leaving]
    handoff = group.step()
    assert handoff.plan is not None
    assert sum(len(r) for r in handoff.plan.newly_assigned.values()) == held > 10
    assert "BalancingPaced" not in reasons(handoff)


def test_the_eager_protocol_is_never_paced():
    eager = model.Settings(model.Protocol.EAGER, model.Policy.KOOPER)
    group = Group(["a", "b"], {"A": 20}, limit=1, settings=eager)
    group.run()
    group.members[W("c")] = model.Member(W("c"), incarnation="1")
    group.rounds.clear()
    group.run()
    assert max(balancing_revocations(r) for r in group.rounds if r.plan is not None) == 21
    assert not any("BalancingPaced" in reasons(r) for r in group.rounds)


@pytest.mark.parametrize(("limit", "resources", "cap"), [
    ("25%", 1010, 253), ("25%", 3, 1), ("100%", 7, 7), ("1%", 100_100, 1001), (5, 3, 5),
    (1, 0, 1), ("10%", 0, 1),
])
def test_the_cap_is_a_count_or_a_percentage_rounded_up_and_never_zero(limit, resources, cap):
    assert pacing.cap(limit, resources) == cap


@pytest.mark.parametrize(("raw", "limit"), [
    (None, "25%"), (10, 10), ("10", 10), ("50%", "50%"), (0, "25%"), (-3, "25%"),
    ("0%", "25%"), ("101%", "25%"), ("ten", "25%"), (True, "25%"), (2.5, "25%"),
])
def test_the_operator_reads_max_moves_per_round_as_the_crd_admits_it(raw, limit):
    spec = {"balancing": {"maxMovesPerRound": raw}} if raw is not None else {}
    assert views.parse_group({"metadata": {"name": "g"}, "spec": spec}) \
        .balancing_limit == limit


CRDS = [ROOT / "crds" / "workergroups.yaml",
        ROOT / "charts" / "kooper" / "files" / "crds" / "workergroups.yaml"]


@pytest.mark.parametrize("path", CRDS, ids=lambda p: str(p.relative_to(ROOT)))
@pytest.mark.parametrize(("value", "ok"), [
    (1, True), (100, True), ("1%", True), ("25%", True), ("100%", True),
    (0, False), (-1, False), ("0%", False), ("101%", False), ("25", False), ("ten", False),
])
def test_the_crd_admits_a_count_of_at_least_one_or_a_percentage(path, value, ok):
    crd = yaml.safe_load(path.read_text())
    _, errors = crdschema.admit(crd, {
        "apiVersion": "kooper.dev/v1alpha1", "kind": "WorkerGroup",
        "metadata": {"name": "g", "namespace": "n"},
        "spec": {"selector": {"matchLabels": {"app": "w"}},
                 "balancing": {"maxMovesPerRound": value}}})
    assert not errors if ok else errors


@pytest.mark.parametrize("path", CRDS, ids=lambda p: str(p.relative_to(ROOT)))
@pytest.mark.parametrize(("policy", "limit"), [("kooper", "25%"), ("kip415", None)])
def test_unset_the_limit_is_the_policy_s_and_kip415_does_not_pace(path, policy, limit):
    """The CRD stores no default (it would have to depend on the policy); the operator
    reads an unset limit as its policy's: 25% under kooper, none under kip415, whose
    rounds then revoke and delay exactly as Kafka Connect's assignor does."""
    crd = yaml.safe_load(path.read_text())
    stored, errors = crdschema.admit(crd, {
        "apiVersion": "kooper.dev/v1alpha1", "kind": "WorkerGroup",
        "metadata": {"name": "g", "namespace": "n"},
        "spec": {"selector": {"matchLabels": {"app": "w"}}, "policy": policy,
                 "balancing": {}}})
    assert not errors
    assert "maxMovesPerRound" not in stored["spec"]["balancing"]
    assert views.parse_group(stored).max_moves_per_round is None  # unset: the policy decides
    assert views.parse_group(stored).balancing_limit == limit
    assert defaults.BALANCING_MAX_MOVES_BY_POLICY[policy] == limit
