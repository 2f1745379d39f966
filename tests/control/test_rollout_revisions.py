"""Rollouts (``control.rollout``): which members are about to be replaced, which are
updated, and what the step does with it (free work to updated members, no balancing
revocation while the roll runs)."""

from __future__ import annotations

import dataclasses

from kooper.control import modelled, rollout, views
from kooper.control import step as control
from kooper.core import balance, ids, model

W = ids.WorkerId
GROUP = "g"
STS = ("StatefulSet", "w")


def pod(name: str, revision: str, *, deleting: bool = False, kind: str = "StatefulSet",
        owner: str = "w") -> views.PodView:
    label = "controller-revision-hash" if kind == "StatefulSet" else "pod-template-hash"
    return views.PodView(namespace="default", name=name, uid=f"{name}/1",
                         labels={views.GROUP_LABEL: GROUP, label: revision},
                         deleting=deleting, owner_kind=kind, owner_name=owner)


def test_pod_revision_comes_from_its_controllers_label():
    assert rollout.revision(pod("w-0", "w-abc")) == "w-abc"
    assert rollout.revision(pod("web-1", "5d9f", kind="ReplicaSet", owner="web-5d9f")) == "5d9f"
    bare = dataclasses.replace(pod("w-0", "x"), labels={})
    assert rollout.revision(bare) == ""


def test_members_behind_the_update_revision_are_outdated_the_others_updated():
    pods = {p.name: p for p in (pod("w-0", "old"), pod("w-1", "old"), pod("w-2", "new"))}
    found = rollout.judge(pods, [W("w-0"), W("w-1"), W("w-2")],
                          {STS: control.RolloutFacts("new")})
    assert found.outdated == {"w-0", "w-1"}
    assert found.updated == {"w-2"}
    assert found.rolling


def test_a_partition_leaves_lower_ordinals_alone_and_on_delete_replaces_nothing():
    pods = {p.name: p for p in (pod("w-0", "old"), pod("w-1", "old"), pod("w-2", "new"))}
    members = [W("w-0"), W("w-1"), W("w-2")]
    found = rollout.judge(pods, members, {STS: control.RolloutFacts("new", partition=1)})
    assert found.outdated == {"w-1"}
    found = rollout.judge(pods, members, {STS: control.RolloutFacts("new", on_delete=True)})
    assert not found.rolling


def test_a_terminating_pod_is_outdated_even_without_a_read_owner():
    pods = {"w-0": pod("w-0", "", deleting=True), "w-1": pod("w-1", "")}
    found = rollout.judge(pods, [W("w-0"), W("w-1")], {})
    assert found.outdated == {"w-0"}
    assert found.updated == frozenset()


def test_no_owner_read_means_no_rollout():
    pods = {"w-0": pod("w-0", "old")}
    assert rollout.judge(pods, [W("w-0")], {}) is rollout.NONE


def test_statefulset_body_gives_update_revision_partition_and_strategy():
    body = {"spec": {"updateStrategy": {"type": "RollingUpdate",
                                        "rollingUpdate": {"partition": 3}}},
            "status": {"updateRevision": "w-7c9", "currentRevision": "w-6b8"}}
    assert rollout.statefulset_facts(body) == control.RolloutFacts("w-7c9", partition=3)
    on_delete = {"spec": {"updateStrategy": {"type": "OnDelete"}},
                 "status": {"updateRevision": "w-7c9"}}
    assert rollout.statefulset_facts(on_delete) == control.RolloutFacts("w-7c9", on_delete=True)
    assert rollout.statefulset_facts({"spec": {}, "status": {}}) is None


def replicaset(name: str, template: str, revision: str, deployment: str = "web") -> dict:
    return {"metadata": {
        "name": name, "labels": {"pod-template-hash": template},
        "annotations": {"deployment.kubernetes.io/revision": revision},
        "ownerReferences": [{"kind": "Deployment", "name": deployment, "controller": True}]}}


def test_a_deployment_rolls_to_its_replicaset_with_the_highest_revision():
    items = [replicaset("web-aaa", "aaa", "3"), replicaset("web-bbb", "bbb", "4"),
             replicaset("api-ccc", "ccc", "9", deployment="api"),
             {"metadata": {"name": "bare", "labels": {"pod-template-hash": "x"}}}]
    found = rollout.replicaset_facts(items, ["web-aaa", "web-bbb", "bare"])
    assert found == {("ReplicaSet", "web-aaa"): control.RolloutFacts("bbb"),
                     ("ReplicaSet", "web-bbb"): control.RolloutFacts("bbb")}


def test_owners_to_read_are_the_controllers_of_the_groups_pods():
    inputs = control.Inputs(
        gone_means_stopped=True,
        group=modelled.group(GROUP, model.Settings()),
        pods=[pod("w-0", "a"), pod("web-1", "b", kind="ReplicaSet", owner="web-b"),
              dataclasses.replace(pod("x-0", "a", owner="x"), labels={})],
        leases=[], connectors=[])
    assert rollout.owners_to_read(inputs) == {STS, ("ReplicaSet", "web-b")}


# -- the step during a rollout ---------------------------------------------------------

def member(name: str, owned: model.ConnectorsAndTasks = model.EMPTY,
           generation: int = -1, incarnation: str = "1") -> model.Member:
    return model.Member(W(name), owned, generation, frozenset(model.Protocol), incarnation)


def step_inputs(members: list[model.Member], revisions: dict[str, str], update: str,
                counts: dict[str, int], *, leaving: tuple[str, ...] = (),
                partition: int = 0) -> control.Inputs:
    """``members`` live; ``leaving``: pods terminating whose member already left."""
    pods = [dataclasses.replace(
        modelled.pod(GROUP, m), owner_kind="StatefulSet", owner_name="w",
        labels={views.GROUP_LABEL: GROUP, "controller-revision-hash": revisions[m.id]})
        for m in members]
    pods += [dataclasses.replace(pods[0], name=name, uid=f"{name}/old", deleting=True,
                                 labels={views.GROUP_LABEL: GROUP})
             for name in leaving]
    return control.Inputs(gone_means_stopped=True,
                          group=modelled.group(GROUP, model.Settings()), pods=pods,
                          leases=[modelled.lease(m) for m in members],
                          connectors=modelled.connectors(GROUP, counts),
                          rollouts={STS: control.RolloutFacts(update, partition=partition)})


def settle(members: list[model.Member], revisions: dict[str, str], update: str,
           counts: dict[str, int], memory: control.Memory, *, now: int,
           leaving: tuple[str, ...] = (),
           partition: int = 0) -> tuple[control.Memory, list[model.Member], int]:
    """Run steps, members applying every document, until nothing changes."""
    for _ in range(10):
        decided = control.step(step_inputs(members, revisions, update, counts, leaving=leaving,
                                           partition=partition),
                               memory, now_ms=now)
        memory = decided.memory
        now += 10
        written = {w.member: w for w in decided.configmap_writes}
        if not written:
            break
        members = [m if m.id not in written else dataclasses.replace(
            m, owned=written[m.id].assigned, generation=written[m.id].generation)
            for m in members]
    return memory, members, now


def test_during_a_rollout_a_departures_work_goes_to_the_updated_member_only():
    names = ["w-0", "w-1", "w-2", "w-3"]
    old = dict.fromkeys(names, "r1")
    members = [member(n) for n in names]
    memory, members, now = settle(members, old, "r1", {"A": 8}, control.Memory(), now=0)
    # w-3 is replaced: its pod terminates, its member leaves, it comes back on r2, empty.
    revisions = {**old, "w-3": "r2"}
    members = [m for m in members if m.id != "w-3"]
    memory, members, now = settle(members, revisions, "r2", {"A": 8}, memory, now=now,
                                  leaving=("w-3",))
    members = [*members, member("w-3", incarnation="2")]
    memory, members, now = settle(members, revisions, "r2", {"A": 8}, memory, now=now)
    by_id = {m.id: m for m in members}
    assert not by_id["w-3"].owned, "no balancing revocation towards w-3 while w-0..2 roll"
    leaving = by_id["w-2"].owned
    assert leaving
    gone = [m for m in members if m.id != "w-2"]
    decided = control.step(step_inputs(gone, revisions, "r2", {"A": 8}, leaving=("w-2",)),
                           memory, now_ms=now)
    assert decided.plan is not None
    assert decided.plan.members[W("w-3")].assigned == leaving
    assert decided.plan.members[W("w-0")].assigned == by_id["w-0"].owned
    assert decided.plan.members[W("w-1")].assigned == by_id["w-1"].owned


def test_once_nobody_is_outdated_the_group_balances_again():
    names = ["w-0", "w-1", "w-2"]
    members = [member(n) for n in names]
    memory, members, now = settle(members, dict.fromkeys(names, "r1"), "r1", {"A": 5},
                                  control.Memory(), now=0)
    members = [m for m in members if m.id != "w-0"]
    memory, members, now = settle(members, dict.fromkeys(names, "r1"), "r2", {"A": 5}, memory,
                                  now=now, leaving=("w-0",))
    members = [*members, member("w-0", incarnation="2")]  # w-0 back on r2, empty
    memory, members, now = settle(members, {"w-0": "r2", "w-1": "r1", "w-2": "r1"}, "r2",
                                  {"A": 5}, memory, now=now)
    assert not next(m for m in members if m.id == "w-0").owned
    memory, members, now = settle(members, dict.fromkeys(names, "r2"), "r2", {"A": 5},
                                  memory, now=now)
    loads = sorted(len(m.owned.tasks) for m in members)  # each kind balanced on its own
    assert loads[-1] - loads[0] <= 1
    assert loads[0] >= 1


def test_a_pod_starting_mid_roll_keeps_the_roll_in_progress_a_scale_up_does_not():
    members = [W("w-1"), W("w-2")]
    # w-3 was replaced: its new pod (update revision) has not joined; w-0 is below the
    # partition, still on the old revision.
    pods = {p.name: p for p in (pod("w-0", "old"), pod("w-1", "new"), pod("w-2", "new"),
                                pod("w-3", "new"))}
    facts = {STS: control.RolloutFacts("new", partition=1)}
    found = rollout.judge(pods, [*members, W("w-0")], facts)
    assert found.outdated == frozenset()
    assert found.rolling
    # Every pod on the update revision: a new pod starting is a scale-up, no roll.
    pods["w-0"] = pod("w-0", "new")
    assert not rollout.judge(pods, [*members, W("w-0")], facts).rolling
    # A terminating pod whose member already left keeps a roll in progress.
    pods["w-3"] = pod("w-3", "old", deleting=True)
    assert rollout.judge(pods, [*members, W("w-0")], facts).rolling


def test_after_a_partial_roll_balancing_takes_back_what_moved_not_what_stayed():
    """A StatefulSet rolls ``w-4`` then ``w-3`` (partition 3): ``w-4``'s work can only go
    to ``w-0``..``w-2`` (nobody is updated yet), ``w-3``'s goes to ``w-4``, and ``w-3``
    comes back empty. The balancing after the roll takes what moved (the highest
    epochs), from whichever member holds it: every member the roll left alone keeps
    all it ran before the roll, and what it was handed during the roll leaves it."""
    names = [f"w-{n}" for n in range(5)]
    counts = {"A": 4, "B": 4, "C": 4}
    old = dict.fromkeys(names, "r1")
    members = [member(n) for n in names]
    memory, members, now = settle(members, old, "r1", counts, control.Memory(), now=0)
    before = {m.id: m.owned for m in members}
    revisions = dict(old)
    for name in ("w-4", "w-3"):
        members = [m for m in members if m.id != name]
        memory, members, now = settle(members, revisions, "r2", counts, memory, now=now,
                                      leaving=(name,), partition=3)
        revisions[name] = "r2"
        members = [*members, member(name, incarnation="2")]
        memory, members, now = settle(members, revisions, "r2", counts, memory, now=now,
                                      partition=3)
    after = {m.id: m.owned for m in members}
    for name in ("w-0", "w-1", "w-2"):
        assert after[name] == before[name], name
    for kind in ("connectors", "tasks"):
        loads = sorted(len(getattr(owned, kind)) for owned in after.values())
        assert loads[-1] - loads[0] <= 1, kind


def test_the_hi_slots_stay_with_the_members_whose_work_moved_least():
    """12 tasks over 5 members: two may keep 3. ``c`` holds two tasks that moved (epoch
    2) on top of its own; ``a`` and ``b`` hold only their own (epoch 1)."""
    loads = {W("a"): 3, W("b"): 3, W("c"): 4, W("d"): 0, W("e"): 2}
    epochs = {W("a"): [1, 1, 1], W("b"): [1, 1, 1], W("c"): [1, 1, 2, 2], W("d"): [],
              W("e"): [1, 1]}

    def moved(member: ids.WorkerId, n: int) -> int:
        return sorted(epochs[member])[n - 1]

    # Kafka's order keeps the heaviest: ``b`` gives up one of its own tasks.
    assert balance.revocation_counts(loads, 12) == {"b": 1, "c": 1}
    # As many moves, but only what moved leaves: ``c`` gives up both.
    assert balance.revocation_counts(loads, 12, moved) == {"c": 2}
