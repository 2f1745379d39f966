"""Inputs are found and checked row by row before Spark starts (no Spark in this file).

Errors name the file and the line (JSON) or row (Parquet); operator audit logs
are joined to the run they sit beside, never a run of their own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kooper.analytics import errors, inputs


def row(ts: int, event: str, member: str = "", resource: str = "", *, run: str = "r",
        group: str = "g", **extra: object) -> dict[str, object]:
    return {"ts_ms": ts, "run": run, "group": group, "member": member, "resource": resource,
            "event": event, **extra}


def write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


GOOD = [row(0, "join", "a"), row(5, "start", "a", "A-0"), row(9, "round")]


def check(*paths: Path) -> inputs.Inputs:
    return inputs.find_and_check([str(p) for p in paths])


def fails(*paths: Path) -> str:
    with pytest.raises(errors.AnalyticsError) as caught:
        check(*paths)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_good_log_is_counted_by_rows_and_runs(tmp_path):
    found = check(write(tmp_path / "a.jsonl", [*GOOD, row(1, "join", "b", run="s")]))
    assert (found.rows, found.runs, found.checked, found.dedupe) == (4, ("r", "s"), True, False)


def test_a_line_that_is_not_json_is_named_by_file_and_line(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps(GOOD[0]) + "\n\n" + '{"ts_ms": 1, "run": \n')
    assert fails(path).startswith(f"{path}:3: not valid JSON (")


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (row(5, "join"), "a join row without 'member'"),
        (row(5, "leave", ""), "a leave row without 'member'"),
        (row(5, "start", "a"), "a start row without 'resource'"),
        (row(5, "stop", resource="A-0"), "a stop row without 'member'"),
        (row(5, "teleport", "a"), "unknown event 'teleport' (expected one of start, stop,"),
        ({"ts_ms": 5, "event": "round"}, "column 'run' is missing"),
        ({"ts_ms": None, "run": "r", "event": "round"}, "column 'ts_ms' is missing"),
        ({**row(5, "round"), "ts_ms": "soon"}, "column 'ts_ms' is 'soon', expected an integer"),
        ({**row(5, "round"), "ts_ms": 1.5}, "column 'ts_ms' is 1.5, expected an integer"),
        ({**row(5, "round"), "generation": True}, "column 'generation' is True, expected an"),
        ({**row(5, "round"), "member": 7}, "column 'member' is 7, expected a string"),
        ([1, 2], "not a JSON object (a list)"),
    ],
)
def test_a_row_that_does_not_fit_is_named_by_file_line_and_problem(tmp_path, bad, message):
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps(GOOD[0]) + "\n" + json.dumps(bad) + "\n")
    got = fails(path)
    assert got.startswith(f"{path}:2: ")
    assert message in got


@pytest.mark.parametrize(
    "content",
    [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "{}".encode("utf-16"), b"\x00\xff\xfe\x00"],
    ids=["binary", "utf-16", "garbage"],
)
def test_a_binary_or_non_utf8_file_is_one_line(tmp_path, content):
    path = tmp_path / "a.jsonl"
    path.write_bytes(content)
    message = fails(path)
    assert message.startswith(f"{path}:1: not UTF-8 text")


def test_a_utf8_byte_order_mark_is_named(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD[0]).encode())
    assert "byte-order mark" in fails(path)


def test_empty_input_is_an_error_but_an_empty_file_beside_rows_is_not(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n  \n")
    with pytest.raises(errors.NoInputsError, match="no events: every event log is empty"):
        check(empty, blank)
    assert check(empty, write(tmp_path / "a.jsonl", GOOD)).rows == 3


def test_parquet_rows_are_checked_with_their_row_number(tmp_path):
    path = tmp_path / "a.parquet"
    rows = [*GOOD, row(12, "join"), row(13, "round")]
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=2)
    assert fails(path) == f"{path}: row 4: a join row without 'member'"
    pq.write_table(pa.Table.from_pylist([*GOOD, row(3, "jump", "a")]).cast(
        pa.schema([("ts_ms", pa.int32()), ("run", pa.dictionary(pa.int8(), pa.string())),
                   ("group", pa.string()), ("member", pa.string()), ("resource", pa.string()),
                   ("event", pa.dictionary(pa.int8(), pa.string()))])), path)
    assert fails(path).startswith(f"{path}: row 4: unknown event 'jump'")
    pq.write_table(pa.Table.from_pylist(GOOD), path)
    assert check(path).rows == 3


def test_parquet_column_types_and_garbage_are_one_line(tmp_path):
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"ts_ms": ["soon"], "run": ["r"], "event": ["round"]}), path)
    assert fails(path) == f"{path}: column 'ts_ms' has type string, expected a signed integer"
    pq.write_table(pa.table({"ts_ms": [1], "event": ["round"]}), path)
    assert fails(path) == f"{path}: column 'run' is missing"
    pq.write_table(pa.table({"ts_ms": pa.array([None], pa.int64()), "run": ["r"],
                             "event": ["round"]}), path)
    assert fails(path) == f"{path}: row 1: column 'ts_ms' is missing"
    path.write_bytes(b"PAR1 but not really")
    assert fails(path).startswith(f"{path}: not a readable Parquet file")


def demo_folder(base: Path) -> Path:
    """``kooper demo``'s layout: ``<run>.events.jsonl`` beside ``<run>/`` with the audit log."""
    for run in ("compatible-kooper", "eager-eager"):
        write(base / f"{run}.events.jsonl", [{**r, "run": run} for r in GOOD])
        write(base / run / "operator.audit.jsonl",
              [row(0, "join", "a", run="operator", group="default/demo", change="join")])
        write(base / run / "workers-0.1.events.jsonl", [{**GOOD[1], "run": run}])
        (base / run / "operator.log").write_text("not a log")
    return base


def test_audit_logs_join_the_run_named_after_their_folder(tmp_path):
    found = check(demo_folder(tmp_path / "out"))
    assert found.runs == ("compatible-kooper", "eager-eager")  # no run "operator"
    assert [(Path(a.path).parent.name, a.run, a.group) for a in found.audits] == [
        ("compatible-kooper", "compatible-kooper", "g"), ("eager-eager", "eager-eager", "g")]
    assert not any(name.endswith("audit.jsonl") for name in found.json)
    assert found.dedupe  # each run spans its merged log, its worker log and its audit log
    assert found.rows == 2 * (3 + 1)


def test_an_audit_log_joins_the_one_run_in_its_own_folder(tmp_path):
    write(tmp_path / "kind" / "drill.jsonl", [{**r, "run": "kind-1"} for r in GOOD])
    write(tmp_path / "kind" / "operator.audit.jsonl", [row(0, "round", run="operator")])
    [audit] = check(tmp_path / "kind").audits
    assert audit.run == "kind-1"


def test_an_audit_log_beside_no_run_or_two_runs_is_an_error(tmp_path):
    write(tmp_path / "one" / "operator.audit.jsonl", [row(0, "round", run="operator")])
    write(tmp_path / "two.jsonl", GOOD)
    assert "beside no event log" in fails(tmp_path / "one" / "operator.audit.jsonl",
                                          tmp_path / "two.jsonl")
    write(tmp_path / "one" / "a.jsonl", [*GOOD, row(1, "round", run="other")])
    assert "beside runs other, r" in fails(tmp_path / "one")


def test_only_audit_logs_are_no_input(tmp_path):
    audit = write(tmp_path / "operator.audit.jsonl", [row(0, "round", run="operator")])
    with pytest.raises(errors.NoInputsError, match="only operator audit logs"):
        check(audit)


def test_audit_rows_are_checked_too(tmp_path):
    write(tmp_path / "r.events.jsonl", GOOD)
    audit = write(tmp_path / "r" / "operator.audit.jsonl", [row(0, "leave", run="operator")])
    assert fails(tmp_path) == f"{audit}:1: a leave row without 'member'"


def test_an_earlier_report_folder_is_not_read(tmp_path):
    write(tmp_path / "a.jsonl", GOOD)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "report.md").write_text("# kooper analyze")
    pq.write_table(pa.table({"run": ["r"], "total_pause_ms": [1]}), tmp_path / "old" /
                   "metrics.parquet")
    assert check(tmp_path).parquet == ()


def test_pause_and_resume_rows_are_counted_so_spark_can_skip_them(tmp_path):
    assert not check(write(tmp_path / "a.jsonl", GOOD)).flips
    assert check(write(tmp_path / "b.jsonl", [*GOOD, row(7, "pause", "a", "A-0")])).flips
    pq.write_table(pa.Table.from_pylist([*GOOD, row(7, "resume", "a", "A-0")]),
                   tmp_path / "c.parquet")
    assert check(tmp_path / "c.parquet").flips
    pq.write_table(pa.Table.from_pylist(GOOD), tmp_path / "c.parquet")
    assert not check(tmp_path / "c.parquet").flips


def test_a_file_named_twice_is_read_once(tmp_path):
    # By its folder and by itself, or twice: Spark would read its rows twice (twice the
    # rounds and events) though the check counts the file once and drops no repeats.
    log = write(tmp_path / "logs" / "a.jsonl", GOOD)
    found = inputs.find_and_check([str(tmp_path / "logs"), str(log),
                                   str(tmp_path / "logs" / "." / "a.jsonl")])
    assert (found.json, found.rows) == ((str(log),), 3)
