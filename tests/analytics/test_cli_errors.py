"""``kooper analyze`` with bad input or a bad master: one line on stderr, exit 1, no traceback.

Input errors are found before Spark starts: ``job.spark_session`` is replaced
by a function that fails the test if it is called.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kooper import cli
from kooper.analytics import job

GOOD = {"ts_ms": 0, "run": "r", "group": "g", "member": "a", "resource": "", "event": "join"}


@pytest.fixture
def no_spark(monkeypatch):
    def started(*_: object, **__: object) -> None:
        raise AssertionError("Spark was started for an input that fails its check")

    monkeypatch.setattr(job, "spark_session", started)


def one_line_error(capsys, *args: str) -> str:
    assert cli.main(["analyze", *args]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.err
    assert captured.err.startswith("kooper analyze: error: ")
    return captured.err.strip().removeprefix("kooper analyze: error: ")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (json.dumps(GOOD) + "\n{not json}\n", "bad.jsonl:2: not valid JSON ("),
        (json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "member": ""}) + "\n",
         "bad.jsonl:2: a join row without 'member'"),
        ("\n" + json.dumps({**GOOD, "event": "explode"}), "bad.jsonl:2: unknown event 'explode'"),
        ("", "no events: every event log is empty"),
    ],
    ids=["not-json", "join-without-member", "unknown-kind", "empty"],
)
def test_bad_input_is_one_line_before_spark_starts(tmp_path, capsys, no_spark, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    assert message in one_line_error(capsys, str(path), "--out", str(tmp_path / "r"))


def test_a_binary_file_is_one_line_before_spark_starts(tmp_path, capsys, no_spark):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\x1f\x8b\x08\x00 gzip, not text \xff\xfe")
    got = one_line_error(capsys, str(path), "--out", str(tmp_path / "r"))
    assert got.startswith(f"{path}:1: not UTF-8 text")


def test_a_bogus_master_is_one_line_before_spark_starts(tmp_path, capsys, no_spark):
    path = tmp_path / "good.jsonl"
    path.write_text(json.dumps(GOOD) + "\n")
    got = one_line_error(capsys, str(path), "--out", str(tmp_path / "r"), "--master", "bogus://x")
    assert got.startswith("--master bogus://x: not a Spark master URL")


@pytest.mark.parametrize("master", ["local[2]", "local[*]", "local", "spark://host:7077",
                                    "yarn", "k8s://https://api:6443", "local[4,3]"])
def test_real_master_urls_pass_the_check(master):
    job.check_master(master)


@pytest.mark.parametrize("master", ["bogus://x", "local[x]", "locale", "spark:/h", ""])
def test_other_master_urls_fail_the_check(master):
    with pytest.raises(job.errors.SparkStartError, match="not a Spark master URL"):
        job.check_master(master)


def test_spark_that_cannot_start_is_one_error_line_and_its_log_a_file(tmp_path):
    """A master URL that parses but Spark refuses (yarn without its configuration): the
    JVM's errors go to spark.log, the user gets one line with the reason."""
    path = tmp_path / "good.jsonl"
    path.write_text(json.dumps(GOOD) + "\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "PYSPARK_GATEWAY_PORT")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from kooper import cli; sys.exit(cli.main())",
         "analyze", str(path), "--out", str(tmp_path / "r"), "--master", "yarn"],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    *progress, last = done.stderr.splitlines()
    assert all(line.startswith("kooper analyze [") for line in progress)
    assert last.startswith("kooper analyze: error: Spark did not start with master yarn: ")
    assert "HADOOP_CONF_DIR" in last
    assert f"(Spark's log: {tmp_path / 'r' / 'spark.log'})" in last
    for noise in ("Traceback", "PySparkRuntimeError", "\tat ", "WARN", "log4j"):
        assert noise not in done.stderr


def test_spark_failing_during_the_job_is_one_error_line_and_the_rest_in_its_log(tmp_path):
    """A run from ts_ms -5 to the largest long: every row fits, but the run's duration
    does not (Spark's ANSI arithmetic refuses it). PySpark logs the failed query's
    context as JSON on stderr: that goes to spark.log like the JVM's, and the user
    gets one line (docs/events.md, "Output")."""
    path = tmp_path / "wide.jsonl"
    path.write_text(json.dumps({**GOOD, "ts_ms": -5}) + "\n"
                    + json.dumps({**GOOD, "ts_ms": 2**63 - 1, "event": "leave"}) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from kooper import cli; sys.exit(cli.main())",
         "analyze", str(path), "--out", str(tmp_path / "r"), "--no-plots",
         "--conf", "spark.sql.shuffle.partitions=1"],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    *progress, last = done.stderr.splitlines()
    assert all(line.startswith("kooper analyze [") for line in progress), done.stderr
    assert last.startswith("kooper analyze: error: Spark failed: ")
    assert "ARITHMETIC_OVERFLOW" in last
    assert "DataFrameQueryContextLogger" in (tmp_path / "r" / "spark.log").read_text()
