"""The job end to end (files in, report out) and its one-line errors."""

from __future__ import annotations

import base64
import contextlib
import html.parser
import io
import json
import re
import shutil
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from matplotlib import image
from tests.analytics import scenarios

from kooper import cli
from kooper.analytics import errors, job, options, plots
from kooper.core import events

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_jsonl(path, evs) -> None:
    path.write_text("".join(events.dump_lines(evs)), encoding="utf-8")


@pytest.fixture(scope="module")
def analyzed(spark, tmp_path_factory):
    """A folder with a JSONL log (three runs) and a Parquet log (one run), analyzed via the CLI."""
    base = tmp_path_factory.mktemp("job")
    logs = base / "logs"
    (logs / "more").mkdir(parents=True)
    evs = []
    for run in ("handover", "eager_kill", "coop_kill"):
        rows, protocol, policy = scenarios.SCENARIOS[run]
        evs += scenarios.to_events(rows, run=run, protocol=protocol, policy=policy)
    write_jsonl(logs / "drill.jsonl", evs)
    rows, protocol, policy = scenarios.SCENARIOS["overlap"]
    parquet_rows = [e.to_row() for e in scenarios.to_events(rows, run="overlap",
                                                           protocol=protocol, policy=policy)]
    table = pa.Table.from_pylist(parquet_rows).drop_columns(["epoch"])  # optional column left out
    pq.write_table(table.set_column(0, "ts_ms", table["ts_ms"].cast(pa.int32())),
                   logs / "more" / "part-0.parquet")
    (logs / "_SUCCESS").write_text("")
    (logs / "notes.txt").write_text("not a log")
    out = base / "report"
    printed, progress = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(progress):
        code = cli.main(["analyze", str(logs), "--out", str(out), "--master", "local[2]"])
    return code, out, printed.getvalue(), progress.getvalue()


def test_job_writes_metrics_overlaps_report_and_plots(analyzed):
    code, out, printed, _ = analyzed
    assert code == 1  # the overlap run makes the command fail
    metrics = {row["run"]: row for row in pq.read_table(out / "metrics.parquet").to_pylist()}
    assert sorted(metrics) == ["coop_kill", "eager_kill", "handover", "overlap"]
    picked = {run: (m["total_pause_ms"], m["max_pause_ms"], m["undisturbed_pause_ms"],
                    m["rounds"], m["moves"], m["converge_ms"], m["overlaps"])
              for run, m in metrics.items()}
    assert picked == {
        "handover": (500, 500, 500, 1, 1, 500, 0),  # a plain move between calm members
        "eager_kill": (300, 100, 200, 2, 1, 100, 0),
        "coop_kill": (100, 100, 0, 2, 1, 100, 0),
        "overlap": (0, 0, 0, 1, 1, 0, 1),  # last start (500) before first stop (800)
    }
    assert (metrics["eager_kill"]["protocol"], metrics["overlap"]["policy"]) == ("eager", "kip415")
    assert metrics["handover"]["events"] == 6
    assert metrics["eager_kill"]["resources"] == 3
    overlaps = pq.read_table(out / "overlaps.parquet").to_pylist()
    assert [(o["run"], o["member"], o["other_member"], o["start_ms"], o["end_ms"])
            for o in overlaps] == [("overlap", "b", "a", 500, 800)]
    for name in ("resources", "imbalance", "timeline"):
        assert pq.read_table(out / f"{name}.parquet").num_rows > 0
    report = (out / "report.md").read_text()
    assert "| run | protocol | policy |" in report
    assert "| eager_kill | eager | kooper | 3 | 3 | 0.300 | 0.100 | 0.200 |" in report
    assert "| compatible | kooper | 2 |" in report  # protocol x policy: two runs
    assert "**1 overlap(s)**" in report
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == ["imbalance.png", "pause_distribution.png", "running_coop_kill.png",
                    "running_eager_kill.png", "running_handover.png", "running_overlap.png"]
    for png in out.glob("*.png"):
        assert png.read_bytes().startswith(PNG_MAGIC)
        assert f"![{png.name}]({png.name})" in report
    assert ("eager_kill [eager/kooper]: pause 0.300 task-s (max 0.100 s, undisturbed"
            " 0.200 task-s), rounds 2, moves 1, converge 0.100 s, overlaps 0") in printed
    # the overlap table: seconds after the run's first event, not epoch milliseconds
    assert "| overlap | g | r | b | a | 0.500 | 0.800 | 0.300 |" in report


def test_progress_goes_to_stderr_stage_by_stage_and_results_to_stdout(analyzed):
    _, _, printed, progress = analyzed
    stages = [line.split("] ", 1)[1] for line in progress.splitlines()]
    assert all(line.startswith("kooper analyze [") and " s] " in line
               for line in progress.splitlines())
    assert stages[0].startswith("checked 34 event(s) of 4 run(s) in 2 file(s) in ")
    assert any(s.startswith("starting Spark (local[2])") for s in stages)
    tables = [s.split(" (")[0] for s in stages if s.startswith("table ")]
    assert tables == ["table 1/5: metrics", "table 2/5: overlaps", "table 3/5: resources",
                      "table 4/5: imbalance", "table 5/5: timeline"]
    assert stages[-2:] == ["plots", "report"]
    assert "kooper analyze [" not in printed
    assert printed.splitlines()[-1].startswith("report: ")


def test_folder_without_logs_is_one_line_error(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("x")
    assert cli.main(["analyze", str(tmp_path), "--out", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no event logs" in err


def test_missing_path_and_unknown_suffix_are_rejected(tmp_path):
    with pytest.raises(errors.NoInputsError, match="no such file"):
        job.find_inputs([str(tmp_path / "absent.jsonl")])
    (tmp_path / "log.csv").write_text("x")
    with pytest.raises(errors.NoInputsError, match="not an event log"):
        job.find_inputs([str(tmp_path / "log.csv")])


def test_missing_java_is_reported_before_spark_starts(monkeypatch, tmp_path):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(errors.JavaMissingError, match="has no bin/java"):
        job.check_java()
    monkeypatch.delenv("JAVA_HOME")
    with pytest.raises(errors.JavaMissingError, match="no java on PATH"):
        job.check_java()


def test_parquet_with_wrong_column_type_names_file_and_column(tmp_path):
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"ts_ms": ["soon"], "run": ["r"], "event": ["start"]}), path)
    with pytest.raises(errors.SchemaMismatchError, match=r"bad\.parquet: column 'ts_ms' has type"):
        job.read_events(None, job.Inputs(parquet=(str(path),)))  # fails on the footer alone
    pq.write_table(pa.table({"ts_ms": [1], "event": ["start"]}), path)
    with pytest.raises(errors.SchemaMismatchError, match="column 'run' is missing"):
        job.read_events(None, job.Inputs(parquet=(str(path),)))


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"ts_ms": "soon", "run": "r", "event": "start"}, "column 'ts_ms' is 'soon', expected an"),
        ({"ts_ms": 5, "event": "start"}, "column 'run' is missing"),
        ({"ts_ms": 5, "run": "r", "event": "teleport"}, "column 'event' is teleport"),
    ],
)
def test_json_line_that_does_not_fit_names_file_and_column(spark, tmp_path, row, message):
    path = tmp_path / "bad.jsonl"
    good = {"ts_ms": 1, "run": "r", "event": "round"}
    path.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(errors.SchemaMismatchError) as caught:
        job.read_events(spark, job.Inputs(json=(str(path),)))
    assert "bad.jsonl: " in str(caught.value)
    assert message in str(caught.value)


def test_inputs_skip_the_output_folder_and_hidden_files(tmp_path):
    from kooper.analytics import inputs

    (tmp_path / "a.jsonl").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.parquet").write_bytes(b"")
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "metrics.parquet").write_bytes(b"")
    (tmp_path / ".hidden.jsonl").write_text("")
    found = inputs.find([str(tmp_path)], exclude=tmp_path / "report")
    assert found == inputs.Found(json=(str(tmp_path / "a.jsonl"),),
                                 parquet=(str(tmp_path / "sub" / "b.parquet"),))


def test_spark_submit_entry_point_reports_errors_in_one_line(tmp_path, capsys):
    assert job.main([str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.startswith("job.py: error: no event logs")
    with pytest.raises(errors.AnalyticsError, match="KEY=VALUE"):
        options.parse_conf(["novalue"])


def test_pause_and_resume_rows_are_accepted_in_json_lines_and_parquet(spark, tmp_path):
    rows, protocol, policy = scenarios.SCENARIOS["handover_paused"]
    write_jsonl(tmp_path / "a.jsonl",
                scenarios.to_events(rows, run="j", protocol=protocol, policy=policy))
    rows, protocol, policy = scenarios.SCENARIOS["coop_kill_paused"]
    parquet_rows = [e.to_row() for e in scenarios.to_events(rows, run="p", protocol=protocol,
                                                             policy=policy)]
    pq.write_table(pa.Table.from_pylist(parquet_rows), tmp_path / "b.parquet")
    got = job.read_events(spark, job.find_inputs([str(tmp_path)]))
    kinds = {(row["run"], row["event"]): row["n"]
             for row in got.groupBy("run", "event").count().withColumnRenamed("count", "n")
             .collect()}
    assert (kinds[("j", "pause")], kinds[("j", "resume")]) == (4, 2)
    assert (kinds[("p", "pause")], kinds[("p", "resume")]) == (4, 2)
    assert got.count() == 12 + 16


def test_json_lines_are_split_at_newlines_only_as_the_check_reads_them(spark, tmp_path):
    # A carriage return is whitespace inside a JSON line (the check reads the row whole)
    # and ends a CRLF line; neither may split a row in two or lose it.
    (tmp_path / "a.jsonl").write_bytes(
        b'{"ts_ms":0,"run":"r","event":"start","member":"a","resource":"x"}\r\n'
        b'{"ts_ms":10,"run":"r",\r"event":"stop","member":"a","resource":"x"}\n'
        b'{"ts_ms":100,"run":"r","event":"round"}\r\n'
    )
    got = job.read_events(spark, job.find_inputs([str(tmp_path)]))
    assert sorted((row["ts_ms"], row["run"], row["event"]) for row in got.collect()) == [
        (0, "r", "start"), (10, "r", "stop"), (100, "r", "round")]


class _Links(html.parser.HTMLParser):
    """Every URL-valued attribute, every image and every table id of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.images: dict[str, str] = {}
        self.tables: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.urls += [v or "" for k, v in attrs if k in ("src", "href", "srcset", "poster")]
        if tag == "img":
            self.images[found.get("alt") or ""] = found.get("src") or ""
        if tag == "table":
            self.tables.append(found.get("id") or "")


def test_html_report_is_self_contained_with_every_table_and_plot(analyzed):
    _, out, _, _ = analyzed
    page = (out / "report.html").read_text(encoding="utf-8")
    links = _Links()
    links.feed(page)
    assert links.tables == ["runs", "compare", "overlaps"]
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert sorted(links.images) == pngs
    for name, src in links.images.items():
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]) == (out / name).read_bytes()
    assert all(url.startswith("data:") for url in links.urls)
    assert not re.search(r"\w+://|url\(|@import|<link|<script", page)
    assert "<td>eager_kill</td><td>eager</td><td>kooper</td>" in page
    assert '<td class="num">0.500</td><td class="num">0.800</td>' in page  # overlap, in s


def test_html_report_renders_in_headless_chromium(analyzed, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium not installed: no screenshot of report.html")
    _, out, _, _ = analyzed
    shot = tmp_path / "report.png"
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
         "--window-size=1280,2000", (out / "report.html").resolve().as_uri()],
        check=True, capture_output=True, timeout=300,
    )
    pixels = image.imread(shot)
    assert pixels.shape[:2] == (2000, 1280)
    assert pixels[..., :3].std() > 0.05  # tables and plots drawn, not a blank page


def test_rows_repeated_in_a_run_of_one_file_are_kept_beside_a_run_of_several(spark, tmp_path):
    # docs/events.md, "Rows repeated across files": only a run that spans several files
    # loses rows identical in every column; "a run in one file is read as is", whatever
    # the other runs beside it do.
    def row(ts: int, run: str, kind: str, member: str = "", resource: str = "") -> str:
        return json.dumps({"ts_ms": ts, "run": run, "member": member, "resource": resource,
                           "event": kind}) + "\n"

    (tmp_path / "one.jsonl").write_text(row(0, "one", "round") * 2 + row(5, "one", "round"))
    (tmp_path / "two-a.jsonl").write_text(row(0, "two", "round") * 2)
    (tmp_path / "two-b.jsonl").write_text(row(0, "two", "round"))
    got = job.read_events(spark, job.find_inputs([str(tmp_path)]))
    assert sorted((row["run"], row["ts_ms"]) for row in got.collect()) == [
        ("one", 0), ("one", 0), ("one", 5), ("two", 0)]


def test_runs_whose_names_make_one_file_name_get_a_plot_each():
    # "a/b" and "a b" both make running_a_b.png: one plot overwrote the other.
    metric = {"protocol": "", "policy": "", "duration_ms": 10, "total_pause_ms": 0,
              "max_pause_ms": 0, "overlaps": 0}
    runs = [{**metric, "run": "a/b"}, {**metric, "run": "a b"}]
    figures = plots.all_figures(metrics=runs, timeline=[], resources=[], imbalance=[],
                                file_name=job._file_name)
    assert sorted(name for name in figures if name.startswith("running_")) == [
        "running_a_b-2.png", "running_a_b.png"]
    for figure in figures.values():
        plots.close(figure)
