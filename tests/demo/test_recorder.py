import json

from kooper.controlplane import kubelet
from kooper.core import events
from kooper.demo import localplane, recorder
from kooper.sim import metrics


def row(ts, event, member="", resource=""):
    return json.dumps({"ts_ms": ts, "run": "x", "group": "demo", "member": member,
                       "resource": resource, "event": event})


def test_the_pods_rows_and_the_operators_rounds_merge_into_one_ordered_log(tmp_path):
    worker = tmp_path / "w.events.jsonl"
    worker.write_text("\n".join([row(4, "join", "w0"), row(10, "start", "w0", "t1"),
                                 "log line", row(30, "stop", "w0", "t1"), row(35, "leave", "w0"),
                                 '{"ts_ms": 40, "torn']))
    audit = tmp_path / "audit.jsonl"
    audit.write_text("\n".join([row(5, "join", "w0"), row(10, "round"),
                                row(9, "start", "w0", "t1"), row(31, "stop", "w0", "t1"),
                                row(32, "leave", "w0")]))
    rows = recorder.collect(worker_files=[worker], audit_file=audit, run="run1", group="demo",
                            protocol="compatible", policy="kooper")
    assert [(r.ts_ms, str(r.event)) for r in rows] == [
        (4, "join"), (10, "round"), (10, "start"), (30, "stop"), (35, "leave")]
    assert {r.run for r in rows} == {"run1"}
    assert {r.policy for r in rows} == {"kooper"}
    out = recorder.write(rows, tmp_path / "out" / "run1.events.jsonl")
    assert list(events.load_lines(out.read_text().splitlines())) == rows


def test_an_operator_that_thought_a_member_left_does_not_hide_its_double_run(tmp_path):
    """The operator declared w1 gone at 20 and took it back at 30 (its Lease was
    deleted and came back) while w1's process ran t1 until 50; w0 ran t1 from 25."""
    w0, w1 = tmp_path / "w0.1.events.jsonl", tmp_path / "w1.1.events.jsonl"
    w0.write_text("\n".join([row(0, "join", "w0"), row(25, "start", "w0", "t1")]))
    w1.write_text("\n".join([row(0, "join", "w1"), row(10, "start", "w1", "t1"),
                             row(50, "stop", "w1", "t1")]))
    audit = tmp_path / "audit.jsonl"
    audit.write_text("\n".join([row(20, "leave", "w1"), row(30, "join", "w1")]))
    rows = recorder.collect(worker_files=[w0, w1], audit_file=audit, run="r", group="demo",
                            protocol="compatible", policy="kooper")
    assert metrics.run_metrics(rows, end_ms=60).overlaps == 1


def test_a_killed_process_runs_nothing_after_the_runner_reaped_it(tmp_path):
    """w1 was SIGKILLed (no stop rows) and reaped at 20; w0 ran t1 from 25."""
    w0, w1 = tmp_path / "w0.1.events.jsonl", tmp_path / "w1.1.events.jsonl"
    w0.write_text("\n".join([row(0, "join", "w0"), row(25, "start", "w0", "t1")]))
    w1.write_text("\n".join([row(0, "join", "w1"), row(10, "start", "w1", "t1"),
                             row(20, "leave", "w1")]))
    rows = recorder.collect(worker_files=[w0, w1], audit_file=None, run="r", group="demo",
                            protocol="compatible", policy="kooper")
    assert metrics.run_metrics(rows, end_ms=60).overlaps == 0


def test_a_missing_file_gives_no_rows(tmp_path):
    assert recorder.read_rows(tmp_path / "nope") == []


def test_the_kubelets_record_of_a_pods_processes_gives_its_join_and_leave_rows(tmp_path):
    pod_dir = tmp_path / "demo-ns_workers-1_0a1b2c3d"
    pod_dir.mkdir()
    (pod_dir / f"worker{kubelet.STATE_SUFFIX}").write_text("\n".join([
        json.dumps({"ts_ms": 10, "event": "started"}),
        json.dumps({"ts_ms": 50, "event": "finished", "exitCode": 0}),
        json.dumps({"ts_ms": 60, "event": "started"}), '{"ts_ms": 9']))
    rows = localplane.lifecycle_rows(pod_dir, container="worker")
    assert [(r.ts_ms, r.member, str(r.event)) for r in rows] == [
        (10, "workers-1", "join"), (50, "workers-1", "leave"), (60, "workers-1", "join")]
    assert localplane.lifecycle_rows(pod_dir, container="other") == []


def test_the_kubelets_record_after_the_run_began_shutting_down_gives_no_rows(tmp_path):
    pod_dir = tmp_path / "demo-ns_workers-0_0a1b2c3d"
    pod_dir.mkdir()
    (pod_dir / f"worker{kubelet.STATE_SUFFIX}").write_text("\n".join([
        json.dumps({"ts_ms": 10, "event": "started"}),
        json.dumps({"ts_ms": 90, "event": "finished", "exitCode": 0})]))
    rows = localplane.lifecycle_rows(pod_dir, container="worker", until_ms=80)
    assert [(r.ts_ms, str(r.event)) for r in rows] == [(10, "join")]
