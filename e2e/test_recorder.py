"""The recorder's observer on hand-made Lease/Pod snapshots (offline: no cluster)."""

from __future__ import annotations

from e2e import invariants, recorder
from kooper.core import model
from kooper.protocol import codec, messages

K = recorder.K


def lease(member, owned, *, incarnation="i1", generation=1, pod_uid=None):
    tasks = [r for r in owned if "-" in r]
    connectors = [r for r in owned if "-" not in r]
    report = messages.Report(
        member=member,
        incarnation=incarnation,
        protocols=frozenset({model.Protocol.COMPATIBLE, model.Protocol.EAGER}),
        generation=generation,
        owned=model.ConnectorsAndTasks.of(connectors, tasks),
    )
    meta = {
        "name": f"kooper-{member}",
        "annotations": {messages.REPORT_ANNOTATION: codec.encode_report(report)},
    }
    if pod_uid:
        meta["ownerReferences"] = [{"kind": "Pod", "name": member, "uid": pod_uid}]
    return {"metadata": meta}


def pod(name, *, terminating=False, uid=None):
    meta = {"name": name, "labels": {"app.kubernetes.io/name": "kooper-demo-worker"}}
    if uid:
        meta["uid"] = uid
    if terminating:
        meta["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    return {"metadata": meta}


def observer():
    return recorder.Observer(
        run="r",
        group="demo",
        is_member_pod=lambda p: (
            p["metadata"]["labels"].get("app.kubernetes.io/name") == "kooper-demo-worker"
        ),
    )


def kinds(rows):
    return [(r.event.value, r.member, r.resource) for r in rows]


def test_first_reports_are_joins_then_starts():
    obs = observer()
    rows = obs.observe(
        1,
        leases=[lease("w-0", ["A", "A-0"])],
        pods=[pod("w-0")],
        group={"status": {"rebalanceGeneration": 1}},
    )
    assert kinds(rows) == [("join", "w-0", ""), ("start", "w-0", "A"), ("start", "w-0", "A-0")]


def test_a_changed_report_gives_stops_and_starts_and_a_new_generation_a_round():
    obs = observer()
    obs.observe(
        1,
        leases=[lease("w-0", ["A", "A-0"])],
        pods=[pod("w-0")],
        group={"status": {"rebalanceGeneration": 1}},
    )
    rows = obs.observe(
        2,
        leases=[lease("w-0", ["A", "A-1"])],
        pods=[pod("w-0")],
        group={"status": {"rebalanceGeneration": 2}},
    )
    assert kinds(rows) == [("round", "", ""), ("stop", "w-0", "A-0"), ("start", "w-0", "A-1")]
    assert rows[0].generation == 2


def test_a_terminating_pod_leaves_and_its_graceful_stops_follow():
    obs = observer()
    obs.observe(1, leases=[lease("w-0", ["A-0"])], pods=[pod("w-0")], group=None)
    assert kinds(
        obs.observe(
            2, leases=[lease("w-0", ["A-0"])], pods=[pod("w-0", terminating=True)], group=None
        )
    ) == [("leave", "w-0", "")]
    assert kinds(
        obs.observe(3, leases=[lease("w-0", [])], pods=[pod("w-0", terminating=True)], group=None)
    ) == [("stop", "w-0", "A-0")]


def test_a_force_killed_pod_whose_lease_is_gone_stops_everything():
    obs = observer()
    obs.observe(1, leases=[lease("w-0", ["A-0", "A-1"])], pods=[pod("w-0")], group=None)
    rows = obs.observe(2, leases=[], pods=[], group=None)
    assert kinds(rows) == [("leave", "w-0", ""), ("stop", "w-0", "A-0"), ("stop", "w-0", "A-1")]


def test_a_new_incarnation_under_the_same_name_is_a_leave_and_a_join():
    obs = observer()
    obs.observe(1, leases=[lease("w-0", ["A-0"])], pods=[pod("w-0")], group=None)
    rows = obs.observe(
        2, leases=[lease("w-0", ["A-0"], incarnation="i2")], pods=[pod("w-0")], group=None
    )
    assert kinds(rows) == [
        ("leave", "w-0", ""),
        ("stop", "w-0", "A-0"),
        ("join", "w-0", ""),
        ("start", "w-0", "A-0"),
    ]
    assert invariants.overlaps(rows) == []


def test_a_force_killed_pod_replaced_at_once_leaves_before_its_successor_writes():
    obs = observer()
    obs.observe(1, leases=[lease("w-0", ["A-0"], pod_uid="u1")], pods=[pod("w-0", uid="u1")],
                group=None)
    # The StatefulSet made a new pod of that name; the Lease still shows the killed worker.
    stale = obs.observe(2, leases=[lease("w-0", ["A-0"], pod_uid="u1")],
                        pods=[pod("w-0", uid="u2")], group=None)
    assert kinds(stale) == [("leave", "w-0", "")]
    assert recorder.current_reports([lease("w-0", ["A-0"], pod_uid="u1")],
                                    [pod("w-0", uid="u2")], obs.is_member_pod) == {}
    fresh = obs.observe(3, leases=[lease("w-0", [], incarnation="i2", pod_uid="u2")],
                        pods=[pod("w-0", uid="u2")], group=None)
    assert kinds(fresh) == [("stop", "w-0", "A-0"), ("join", "w-0", "")]


def test_reports_of_pods_outside_the_group_and_malformed_reports_are_ignored():
    obs = observer()
    bad = {
        "metadata": {"name": "kooper-x", "annotations": {messages.REPORT_ANNOTATION: "{not json"}}
    }
    rows = obs.observe(
        1,
        leases=[lease("other-0", ["A-0"]), bad],
        pods=[{"metadata": {"name": "other-0", "labels": {}}}],
        group=None,
    )
    assert rows == []


def test_a_move_between_members_in_one_poll_is_no_overlap():
    obs = observer()
    obs.observe(
        1,
        leases=[lease("w-0", ["A-0"]), lease("w-1", [])],
        pods=[pod("w-0"), pod("w-1")],
        group=None,
    )
    rows = obs.observe(
        2,
        leases=[lease("w-0", []), lease("w-1", ["A-0"])],
        pods=[pod("w-0"), pod("w-1")],
        group=None,
    )
    assert kinds(rows) == [("stop", "w-0", "A-0"), ("start", "w-1", "A-0")]
    assert invariants.overlaps(rows) == []


def test_recorder_appends_json_lines_it_can_read_back(tmp_path):
    outputs = iter(
        [
            '{{"items": [{}]}}'.format(__import__("json").dumps(lease("w-0", ["A"]))),
            '{{"items": [{}]}}'.format(__import__("json").dumps(pod("w-0"))),
            '{"status": {"rebalanceGeneration": 3}}',
        ]
    )
    rec = recorder.Recorder(
        observer(), kubectl=lambda *args: next(outputs), namespace="n", path=tmp_path / "log.jsonl"
    )
    rec.path.write_text("")
    rec.poll()
    from kooper.core import events

    rows = list(events.load_lines(rec.path.read_text().splitlines()))
    assert kinds(rows) == [("join", "w-0", ""), ("start", "w-0", "A")]
