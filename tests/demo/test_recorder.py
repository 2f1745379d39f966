import json

from kooper.core import events
from kooper.demo import recorder


def row(ts, event, member="", resource=""):
    return json.dumps({"ts_ms": ts, "run": "x", "group": "demo", "member": member,
                       "resource": resource, "event": event})


def test_worker_starts_and_operator_rounds_merge_into_one_ordered_log(tmp_path):
    worker = tmp_path / "w.events.jsonl"
    worker.write_text("\n".join([row(10, "start", "w0", "t1"), "log line",
                                 row(30, "stop", "w0", "t1"), '{"ts_ms": 40, "torn']))
    audit = tmp_path / "audit.jsonl"
    audit.write_text("\n".join([row(5, "join", "w0"), row(10, "round"),
                                row(9, "start", "w0", "t1"), row(31, "stop", "w0", "t1")]))
    rows = recorder.collect(worker_files=[worker], audit_file=audit, run="run1", group="demo",
                            protocol="compatible", policy="kooper")
    assert [(r.ts_ms, str(r.event)) for r in rows] == [
        (5, "join"), (10, "round"), (10, "start"), (30, "stop")]
    assert {r.run for r in rows} == {"run1"}
    assert {r.policy for r in rows} == {"kooper"}
    out = recorder.write(rows, tmp_path / "out" / "run1.events.jsonl")
    assert list(events.load_lines(out.read_text().splitlines())) == rows


def test_a_missing_file_gives_no_rows(tmp_path):
    assert recorder.read_rows(tmp_path / "nope") == []
