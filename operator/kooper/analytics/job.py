"""The ``kooper analyze`` job: the one module that owns the SparkSession and the I/O.

It finds the event logs and checks every row (``inputs``, before Spark
starts), runs the pure ``transforms`` and writes ``metrics.parquet``,
``overlaps.parquet``, ``resources.parquet``, ``imbalance.parquet``,
``timeline.parquet``, ``report.md``, ``report.html`` and the PNG plots into the
output folder, with Spark's own log in ``spark.log``.

Results are aggregates (per run, per resource, per round, a downsampled
timeline), so they are collected to the driver and written as single Parquet
files: easy to open with pandas or DuckDB, and the report needs them anyway.

On a cluster, submit this file: ``spark-submit operator/kooper/analytics/job.py
LOGS... --out report/`` (the master then comes from spark-submit).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import logging
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import sql, storagelevel
from pyspark.logger import PySparkLogger
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kooper.analytics import (
    errors,
    eventlog,
    inputs,
    options,
    plots,
    report,
    schema,
    transforms,
    webpage,
)

CORRUPT = "_corrupt_record"
Inputs = inputs.Inputs
SPARK_LOG = "spark.log"
"""Spark's own log (the JVM's stderr) in the output folder: the terminal stays quiet."""
MASTER_URL = re.compile(r"local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[.+\]|(spark|k8s|mesos)://.+|yarn")
"""The master URLs Spark parses (``SparkContext.createTaskScheduler``, spark-submit)."""

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Result:
    """What the job wrote, and the per-run metrics it computed."""

    out: Path
    files: tuple[Path, ...]
    metrics: list[dict[str, Any]]


def find_inputs(paths: Sequence[str], *, exclude: Path | None = None) -> Inputs:
    """Event logs named by ``paths``, checked row by row (``inputs.find_and_check``)."""
    return inputs.find_and_check(paths, exclude=exclude)


def check_master(master: str | None) -> None:
    """Reject a master URL Spark would not parse, before a JVM starts for it."""
    if master is not None and not MASTER_URL.fullmatch(master):
        raise errors.SparkStartError(
            f"--master {master}: not a Spark master URL (expected local, local[N], local[*],"
            " spark://HOST:PORT, yarn or k8s://URL)"
        )


def check_java() -> None:
    """Fail with one clear line when there is no JVM to start Spark on."""
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return  # launched by spark-submit: the JVM is already running
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return
    if shutil.which("java"):
        return
    hint = f"JAVA_HOME={java_home} has no bin/java" if java_home else "no java on PATH"
    raise errors.JavaMissingError(
        f"Spark needs Java 17 or newer and found none ({hint}): install a JDK or set JAVA_HOME"
    )


@contextlib.contextmanager
def _stderr_to(path: Path | None) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` meanwhile: the JVM started inside inherits it.

    Spark's log4j output, the JVM's warnings and spark-submit's own errors then
    go to ``path`` for the JVM's whole life, not to the user's terminal.
    """
    if path is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


PYSPARK_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")
"""PySpark's Python loggers: a failed query's context as JSON, on stderr by default."""


@contextlib.contextmanager
def _python_logs_to(path: Path) -> Iterator[None]:
    """Send ``PYSPARK_LOGGERS`` to ``path`` meanwhile, as the JVM's log: the terminal gets
    the one-line error only."""
    handler = logging.FileHandler(path, encoding="utf-8")
    loggers = [PySparkLogger.getLogger(name) for name in PYSPARK_LOGGERS]
    saved = [list(logger.handlers) for logger in loggers]
    for logger in loggers:
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger, handlers in zip(loggers, saved, strict=True):
            logger.removeHandler(handler)
            for old in handlers:
                logger.addHandler(old)
        handler.close()


def _log_reason(path: Path | None) -> str:
    """The line of Spark's log that says why it failed (spark-submit's ``Error:``, else none)."""
    if path is None or not path.exists():
        return ""
    lines = path.read_text(errors="replace").splitlines()
    for line in reversed(lines):
        text = line.strip()
        if text.startswith("Error:"):
            return text.removeprefix("Error:").strip()
        if "Exception: " in text and not text.startswith("at "):
            return text.split("Exception: ", 1)[1]
    return ""


def spark_session(
    master: str | None, conf: Sequence[tuple[str, str]] = (), *, log: Path | None = None
) -> sql.SparkSession:
    """The session: ``master`` if given, else spark-submit's, else ``local[*]``.

    A session that is already running (a notebook, a test suite) is reused with
    its own settings; only ``conf`` is applied to it. A new JVM writes its
    stderr (Spark's logs) to ``log`` when given. A session that cannot start
    raises ``SparkStartError`` with the reason in one line.
    """
    active = sql.SparkSession.getActiveSession()
    if active is not None:
        for key, value in conf:
            active.conf.set(key, value)
        return active
    check_master(master)
    check_java()
    builder = sql.SparkSession.builder.appName("kooper-analyze")
    submitted = bool(os.environ.get("PYSPARK_GATEWAY_PORT"))
    if master or not submitted:
        builder = builder.master(master or "local[*]")
    for key, value in [*session_defaults(master, submitted=submitted).items(), *conf]:
        builder = builder.config(key, value)
    try:
        with _stderr_to(log):
            session = builder.getOrCreate()
    except Exception as exc:  # PySparkException, py4j's errors: any reason not to start
        reason = _log_reason(log) or _first_line(exc)
        where = f" (Spark's log: {log})" if log else ""
        raise errors.SparkStartError(
            f"Spark did not start with master {master or 'local[*]'}: {reason}{where}"
        ) from None
    session.sparkContext.setLogLevel("WARN" if log else "ERROR")
    return session


def session_defaults(master: str | None, *, submitted: bool) -> dict[str, str]:
    """Settings for a session this job starts (``--conf`` overrides any of them)."""
    defaults = {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    if not submitted:
        defaults["spark.driver.memory"] = "2g"  # only takes effect before the JVM starts
    if (master or "local").startswith("local") and not submitted:
        # Every step is a sort by resource or member: a few large partitions
        # beat the default 200 on one machine (measured 2x on 1M events).
        defaults["spark.sql.shuffle.partitions"] = "8"
    return defaults


def _first_line(exc: BaseException) -> str:
    """The message of a Spark or Py4J exception without the Java stack."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        with contextlib.suppress(Exception):
            return str(java.toString()).splitlines()[0]
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _bad_json_column(line: str) -> str:
    """Which column of one JSON line does not fit the schema, for the error message."""
    try:
        row = json.loads(line)
    except ValueError:
        return "not valid JSON"
    return inputs.row_problem(row) or "row does not fit the schema"


def _problem() -> sql.Column:
    """Why a raw row does not fit (null when it does): corrupt, required null, unknown kind."""
    problem = F.when(F.col(CORRUPT).isNotNull(), F.lit("corrupt"))
    for column in schema.REQUIRED:
        problem = problem.when(F.col(column).isNull(), F.lit(f"column {column!r} is missing"))
    return problem.when(
        ~F.col("event").isin(*schema.KINDS),
        F.concat(
            F.lit("column 'event' is "),
            F.col("event"),
            F.lit(f", expected one of {'/'.join(schema.KINDS)}"),
        ),
    )


def _json(spark: sql.SparkSession, files: Sequence[str], *, corrupt: bool) -> sql.DataFrame:
    fields = [*schema.EVENTS.fields]
    if corrupt:
        fields.append(T.StructField(CORRUPT, T.StringType()))
    # Lines end at "\n" only, as inputs.check reads them: Spark's default also splits
    # at a lone "\r", which JSON allows as whitespace inside a row.
    reader = spark.read.schema(T.StructType(fields)).option("lineSep", "\n")
    if corrupt:
        reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT)
    return reader.json(list(files))


def read_events(
    spark: sql.SparkSession, found: Inputs, *, cached: list[sql.DataFrame] | None = None
) -> sql.DataFrame:
    """Every input as one normalized event DataFrame, audit rows joined to their runs.

    Inputs that ``inputs.check`` read are not checked again. Others (remote
    URIs) are checked here: raises ``SchemaMismatchError`` naming the first
    offending file and column, and the checked frame is persisted (appended to
    ``cached`` for the caller to unpersist).
    """
    if not found.checked:
        for name in found.parquet:
            if "://" not in name:
                inputs.check_parquet(name)
    frames = []
    if found.json:
        frames.append(_json(spark, found.json, corrupt=not found.checked))
    if found.parquet:
        raw = spark.read.schema(schema.EVENTS).parquet(*found.parquet)
        frames.append(raw if found.checked else raw.withColumn(CORRUPT, F.lit(None).cast("string")))
    both = frames[0]
    for frame in frames[1:]:
        both = both.unionByName(frame)
    if not found.checked:
        both = _checked(both, frames, cached)
    events = eventlog.normalize(both)
    lifecycle = F.col("event").isin(*inputs.LIFECYCLE_KINDS)
    # Runs whose own logs say when their processes came and went (``kooper demo``'s
    # pods): the operator's join/leave (when it *thought* so) would cut a process's
    # runs where the operator thought they ended, and hide a double run.
    recorded = events.where(lifecycle).select("run").distinct()
    for audit in found.audits:
        rows = eventlog.normalize(_json(spark, [audit.path], corrupt=False))
        rows = rows.where(F.col("event").isin(*inputs.OPERATOR_KINDS)).withColumn(
            "run", F.lit(audit.run)
        )
        if audit.group is not None:
            rows = rows.withColumn("group", F.lit(audit.group))
        rows = rows.where(~lifecycle).unionByName(
            rows.where(lifecycle).join(F.broadcast(recorded), "run", "left_anti"))
        events = events.unionByName(rows)
    if not found.dedupe:
        return events
    if not found.checked:
        return events.dropDuplicates()
    # Only a run that spans several files repeats rows across them; a run in one file
    # is read as is (docs/events.md), its own repeated rows included.
    spanning = F.col("run").isin(*found.spanning)
    return events.where(spanning).dropDuplicates().unionByName(events.where(~spanning))


def _checked(
    both: sql.DataFrame, frames: list[sql.DataFrame], cached: list[sql.DataFrame] | None
) -> sql.DataFrame:
    checked = both.persist(storagelevel.StorageLevel.MEMORY_AND_DISK)
    if cached is not None:
        cached.append(checked)
    problem = _problem().alias("problem")
    bad = checked.select(CORRUPT, problem).where(F.col("problem").isNotNull()).limit(1).collect()
    if bad:
        row = bad[0]
        detail = _bad_json_column(row[CORRUPT]) if row["problem"] == "corrupt" else row["problem"]
        # Only now pay for file names: a second scan, of the raw inputs (not
        # the cache, which has no file names: hence the unpersist first).
        checked.unpersist(blocking=True)
        where = [
            frame.withColumn("file", F.input_file_name())
            .select("file", problem)
            .where(F.col("problem") == row["problem"])
            .limit(1)
            .collect()
            for frame in frames
        ]
        files = [hit[0]["file"] for hit in where if hit]
        raise errors.SchemaMismatchError(f"{files[0] if files else 'input'}: {detail}")
    return checked.drop(CORRUPT)


def _write(table: pa.Table, path: Path) -> Path:
    pq.write_table(table, path)
    return path


def _file_name(run: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", run)[:80] or "run"


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plots.close(figure)
    return buffer.getvalue()


def run(
    paths: Sequence[str],
    *,
    out: str | Path,
    master: str | None = None,
    conf: Sequence[tuple[str, str]] = (),
    with_plots: bool = True,
    progress: Progress = _quiet,
) -> Result:
    """Analyze the event logs under ``paths`` and write the report into ``out``.

    ``progress`` gets one line per stage (checking inputs, starting Spark, each
    table, plots, report). Spark failures raise ``SparkFailedError`` in one line.
    """
    target = Path(out)
    check_master(master)
    started = time.monotonic()
    found = inputs.find_and_check(paths, exclude=target, progress=progress)
    took = f" in {time.monotonic() - started:.1f} s"
    progress(
        f"checked {found.rows:,} event(s) of {len(found.runs)} run(s) in {len(found.files)}"
        f" file(s){took}"
        + (f", {len(found.audits)} of them operator audit log(s)" if found.audits else "")
        if found.checked else f"found {len(found.files)} file(s), to be checked by Spark"
    )
    target.mkdir(parents=True, exist_ok=True)
    log = target / SPARK_LOG
    log.unlink(missing_ok=True)
    progress(f"starting Spark ({master or 'local[*]'}); its log: {log}")
    spark = spark_session(master, conf, log=log)
    try:
        with _python_logs_to(log):
            return _analyze(spark, found, target, with_plots=with_plots, progress=progress)
    except Exception as exc:
        if isinstance(exc, errors.AnalyticsError) or not _from_spark(exc):
            raise
        raise errors.SparkFailedError(f"Spark failed: {_first_line(exc)} (log: {log})") from None


def _from_spark(exc: BaseException) -> bool:
    module = type(exc).__module__
    return module.startswith(("pyspark", "py4j"))


def _analyze(
    spark: sql.SparkSession, found: Inputs, target: Path, *, with_plots: bool, progress: Progress
) -> Result:
    cached: list[sql.DataFrame] = []
    events = read_events(spark, found, cached=cached)
    tables = transforms.analyze(events, flips=found.flips)
    collected: dict[str, pa.Table] = {}
    steps = [
        ("metrics", tables.metrics),
        ("overlaps", tables.overlaps.orderBy("run", "start_ms", "resource")),
        ("resources", tables.resources),
        ("imbalance", tables.imbalance.orderBy("run", "ts_ms")),
        ("timeline", tables.timeline.orderBy("run", "ts_ms")),
    ]
    for number, (name, frame) in enumerate(steps, 1):
        started = time.monotonic()
        collected[name] = frame.toArrow()
        progress(f"table {number}/{len(steps)}: {name} ({collected[name].num_rows:,} rows,"
                 f" {time.monotonic() - started:.1f} s)")
    written = [_write(table, target / f"{name}.parquet") for name, table in collected.items()]
    bounds = {row["run"]: row for row in tables.bounds.collect()}
    disruptions = [row.asDict() for row in tables.disruptions.collect()]
    for frame in [*cached, *tables.cached]:
        frame.unpersist()

    metric_rows: list[dict[str, Any]] = collected["metrics"].to_pylist()
    starts = {run: int(row["run_start_ms"]) for run, row in bounds.items()}
    images: dict[str, bytes] = {}
    if with_plots:
        progress("plots")
        figures = plots.all_figures(
            metrics=metric_rows,
            timeline=collected["timeline"].to_pylist(),
            resources=collected["resources"].select(["run", "pause_ms"]).to_pylist(),
            imbalance=collected["imbalance"].to_pylist(),
            disruptions=disruptions,
            starts=starts,
            file_name=_file_name,
        )
        for name, figure in figures.items():
            images[name] = _png(figure)
            (target / name).write_bytes(images[name])
            written.append(target / name)
    progress("report")
    overlaps = collected["overlaps"].to_pylist()
    files = list(found.files)
    markdown = report.render(
        metrics=metric_rows, overlaps=overlaps, figures=list(images), inputs=files, starts=starts,
    )
    page = webpage.render(
        metrics=metric_rows, overlaps=overlaps, images=images, inputs=files, starts=starts,
    )
    for name, text in (("report.md", markdown), ("report.html", page)):
        (target / name).write_text(text, encoding="utf-8")
        written.append(target / name)
    return Result(out=target, files=tuple(written), metrics=metric_rows)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Arguments shared by ``kooper analyze`` and ``spark-submit job.py``."""
    parser = parser or argparse.ArgumentParser(prog="job.py", description=__doc__.splitlines()[0])
    options.add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``spark-submit``: same arguments as ``kooper analyze``."""
    args = build_parser().parse_args(argv)
    try:
        result = run(args.events, out=args.out, master=args.master,
                     conf=options.parse_conf(args.conf), with_plots=not args.no_plots,
                     progress=lambda line: print(line, file=sys.stderr))
    except errors.AnalyticsError as exc:
        print(f"job.py: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(result.files)} files to {result.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
