"""``kooper analyze <demo output folder>``: the runs' own logs, audit rows joined to their run.

A hand-made folder in ``kooper demo``'s layout: for each run, the merged log
``<run>.events.jsonl`` beside a folder ``<run>/`` with the worker logs and the
operator's audit log (``run: "operator"``, group ``default/demo``, an extra
``change`` column, and the operator's start/stop *intent* rows). Both runs use
the same members and resources at interleaved wall-clock times: read as one
run, as ``kooper analyze`` once did, the audit rows overlap.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kooper import cli

MERGED = [  # (ms after the run's start, member, resource, event, generation)
    (0, "workers-0", "", "join", 1), (0, "workers-1", "", "join", 1), (0, "", "", "round", 1),
    (10, "workers-0", "A-0", "start", 1), (10, "workers-1", "A-1", "start", 1),
    (1000, "workers-1", "A-1", "stop", 1), (1000, "workers-1", "", "leave", 2),
    (1100, "", "", "round", 2), (1200, "workers-0", "A-1", "start", 2),
    (2000, "workers-1", "", "join", 3), (2100, "", "", "round", 3),
    (2200, "workers-0", "A-1", "stop", 3), (2300, "workers-1", "A-1", "start", 3),
]
RUNS = {"compatible-kooper": (1_795_553_870_000, "compatible"),
        "eager-kooper": (1_795_553_870_500, "eager")}


def rows(run: str) -> list[dict[str, object]]:
    start, protocol = RUNS[run]
    swap = {"workers-0": "workers-1", "workers-1": "workers-0", "": ""}
    return [
        {"ts_ms": start + at, "run": run, "group": "demo",
         # the second run swaps the members: merged into one run, A-0 would overlap
         "member": member if protocol == "compatible" else swap[member],
         "resource": resource, "event": kind, "generation": generation, "epoch": -1,
         "protocol": protocol, "policy": "kooper"}
        for at, member, resource, kind, generation in MERGED
    ]


def write(path: Path, lines: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def make_demo_folder(base: Path) -> Path:
    for run in RUNS:
        merged = rows(run)
        write(base / f"{run}.events.jsonl", merged)
        audit = [{**r, "run": "operator", "group": "default/demo", "change": r["event"]}
                 for r in merged]  # round/join/leave as recorded, start/stop as intended
        write(base / run / "operator.audit.jsonl", audit)
        for member in ("workers-0", "workers-1"):
            write(base / run / f"{member}.1.events.jsonl",
                  [r for r in merged if r["member"] == member and r["event"] in ("start", "stop")])
        (base / run / "operator.log").write_text("INFO kopf started\n")
    return base


def analyze(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(["analyze", *args, "--master", "local[2]", "--no-plots"])
    return code, out.getvalue()


@pytest.fixture(scope="module")
def reports(spark, tmp_path_factory):
    base = make_demo_folder(tmp_path_factory.mktemp("demo") / "out")
    whole = analyze(str(base), "--out", str(base / "report"))
    merged_only = analyze(*(str(base / f"{run}.events.jsonl") for run in RUNS),
                          "--out", str(base.parent / "merged-report"))
    return base, whole, merged_only


def metrics(folder: Path) -> dict[str, dict[str, object]]:
    return {row["run"]: row for row in pq.read_table(folder / "metrics.parquet").to_pylist()}


def test_a_demo_folder_has_its_two_runs_and_no_false_overlap(reports):
    base, (code, printed), _ = reports
    assert code == 0
    got = metrics(base / "report")
    assert sorted(got) == ["compatible-kooper", "eager-kooper"]  # no run "operator"
    assert [got[run]["overlaps"] for run in RUNS] == [0, 0]
    assert "overlaps 1" not in printed


def test_the_folder_gives_the_same_metrics_as_the_merged_logs_alone(reports):
    base, _, (code, _) = reports
    assert code == 0
    # audit and worker rows repeat the merged logs' rows: each counts once
    assert metrics(base / "report") == metrics(base.parent / "merged-report")
    assert metrics(base / "report")["eager-kooper"]["rounds"] == 3
    assert metrics(base / "report")["eager-kooper"]["events"] == len(MERGED)


def test_audit_rows_alone_complete_a_run_whose_log_has_only_starts_and_stops(spark, tmp_path):
    base = tmp_path / "out"
    merged = rows("compatible-kooper")
    write(base / "compatible-kooper" / "workers.events.jsonl",
          [r for r in merged if r["event"] in ("start", "stop")])
    write(base / "compatible-kooper" / "operator.audit.jsonl",
          [{**r, "run": "operator", "group": "default/demo"} for r in merged])
    code, _ = analyze(str(base), "--out", str(tmp_path / "report"))
    assert code == 0
    [row] = metrics(tmp_path / "report").values()
    assert (row["run"], row["rounds"], row["events"], row["members"]) == (
        "compatible-kooper", 3, len(MERGED), 2)


def test_the_operators_leave_does_not_hide_a_double_run_the_pods_rows_show(spark, tmp_path):
    """The pods' own log says when each process came and went (``kooper demo`` writes
    the runner's ``join``/``leave``). The operator thought workers-1 left at 1000 and
    came back at 1300 (its Lease was deleted and renewed); its process ran A-1 until
    1500 while workers-0 ran it from 1200."""
    start = RUNS["compatible-kooper"][0]
    base = tmp_path / "out"

    def row(at, member, resource, event, run="compatible-kooper"):
        return {"ts_ms": start + at, "run": run, "group": "demo", "member": member,
                "resource": resource, "event": event, "generation": 1, "epoch": -1,
                "protocol": "compatible", "policy": "kooper"}

    write(base / "compatible-kooper.events.jsonl", [
        row(0, "workers-0", "", "join"), row(0, "workers-1", "", "join"),
        row(10, "workers-1", "A-1", "start"), row(1200, "workers-0", "A-1", "start"),
        row(1500, "workers-1", "A-1", "stop")])
    write(base / "compatible-kooper" / "operator.audit.jsonl", [
        row(1000, "workers-1", "", "leave", run="operator"),
        row(1300, "workers-1", "", "join", run="operator")])
    code, _ = analyze(str(base), "--out", str(tmp_path / "report"))
    assert code == 1  # kooper analyze exits 1 when something overlapped
    [got] = metrics(tmp_path / "report").values()
    assert got["overlaps"] == 1
