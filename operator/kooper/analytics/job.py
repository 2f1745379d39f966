"""The ``kooper analyze`` job: the one module that owns the SparkSession and the I/O.

It finds the event logs, checks them against ``schema.EVENTS``, runs the pure
``transforms`` and writes ``metrics.parquet``, ``overlaps.parquet``,
``resources.parquet``, ``imbalance.parquet``, ``timeline.parquet``,
``report.md`` and the PNG plots into the output folder.

Results are aggregates (per run, per resource, per round, a downsampled
timeline), so they are collected to the driver and written as single Parquet
files: easy to open with pandas or DuckDB, and the report needs them anyway.

On a cluster, submit this file: ``spark-submit operator/kooper/analytics/job.py
LOGS... --out report/`` (the master then comes from spark-submit).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import sql, storagelevel
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kooper.analytics import errors, eventlog, options, plots, report, schema, transforms

JSON_SUFFIXES = (".jsonl", ".json")
PARQUET_SUFFIXES = (".parquet",)
CORRUPT = "_corrupt_record"


@dataclasses.dataclass(frozen=True, slots=True)
class Inputs:
    """Event-log files to read, by format."""

    json: tuple[str, ...] = ()
    parquet: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.json or self.parquet)


@dataclasses.dataclass(frozen=True, slots=True)
class Result:
    """What the job wrote, and the per-run metrics it computed."""

    out: Path
    files: tuple[Path, ...]
    metrics: list[dict[str, Any]]


def find_inputs(paths: Sequence[str], *, exclude: Path | None = None) -> Inputs:
    """Event-log files named by ``paths`` (files, or folders searched recursively).

    A URI with a scheme (``s3a://…``) is passed to Spark as is and must end in
    a known suffix. Files and folders starting with ``_`` or ``.`` are skipped
    in folders (Spark's ``_SUCCESS``, checksum files), and so is ``exclude``
    (the output folder: an earlier report inside a log folder is no log).
    """
    skip = exclude.resolve() if exclude else None
    found: dict[str, list[str]] = {"json": [], "parquet": []}

    def add(name: str, *, explicit: bool) -> None:
        lowered = name.lower()
        if lowered.endswith(JSON_SUFFIXES):
            found["json"].append(name)
        elif lowered.endswith(PARQUET_SUFFIXES):
            found["parquet"].append(name)
        elif explicit:
            raise errors.NoInputsError(
                f"{name}: not an event log (expected *.jsonl, *.json or *.parquet)"
            )

    for raw in paths:
        if "://" in raw:
            add(raw, explicit=True)
            continue
        path = Path(raw)
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                hidden = any(part.startswith(("_", ".")) for part in child.relative_to(path).parts)
                ours = skip is not None and child.resolve().is_relative_to(skip)
                if child.is_file() and not hidden and not ours:
                    add(str(child), explicit=False)
        elif path.is_file():
            add(str(path), explicit=True)
        else:
            raise errors.NoInputsError(f"{raw}: no such file or directory")
    inputs = Inputs(json=tuple(found["json"]), parquet=tuple(found["parquet"]))
    if not inputs:
        raise errors.NoInputsError(
            f"no event logs (*.jsonl, *.json, *.parquet) in {', '.join(paths) or 'no paths'}"
        )
    return inputs


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


def spark_session(master: str | None, conf: Sequence[tuple[str, str]] = ()) -> sql.SparkSession:
    """The session: ``master`` if given, else spark-submit's, else ``local[*]``.

    A session that is already running (a notebook, a test suite) is reused with
    its own settings; only ``conf`` is applied to it.
    """
    active = sql.SparkSession.getActiveSession()
    if active is not None:
        for key, value in conf:
            active.conf.set(key, value)
        return active
    check_java()
    builder = sql.SparkSession.builder.appName("kooper-analyze")
    submitted = bool(os.environ.get("PYSPARK_GATEWAY_PORT"))
    if master or not submitted:
        builder = builder.master(master or "local[*]")
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
    for key, value in [*defaults.items(), *conf]:
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _arrow_type_ok(kind: pa.DataType, expected: T.DataType) -> bool:
    if pa.types.is_dictionary(kind):  # pandas categoricals, dictionary-encoded writers
        kind = kind.value_type
    if isinstance(expected, T.LongType):
        return bool(pa.types.is_signed_integer(kind) or pa.types.is_null(kind))
    return bool(
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)
    )


def _check_parquet_schemas(files: Sequence[str]) -> None:
    """Column names and types of local Parquet files, from their footers (no data read)."""
    expected = {field.name: field.dataType for field in schema.EVENTS.fields}
    for name in files:
        if "://" in name:
            continue
        try:
            found = pq.read_schema(name)
        except (pa.ArrowInvalid, OSError) as exc:
            raise errors.SchemaMismatchError(f"{name}: not a readable Parquet file: {exc}") from exc
        for column in schema.REQUIRED:
            if column not in found.names:
                raise errors.SchemaMismatchError(f"{name}: column {column!r} is missing")
        for column, kind in expected.items():
            if column in found.names and not _arrow_type_ok(found.field(column).type, kind):
                raise errors.SchemaMismatchError(
                    f"{name}: column {column!r} has type {found.field(column).type},"
                    f" expected {kind.simpleString()}"
                )


def _bad_json_column(line: str) -> str:
    """Which column of one JSON line does not fit the schema, for the error message."""
    try:
        row = json.loads(line)
    except ValueError:
        return "not valid JSON"
    if not isinstance(row, dict):
        return "not a JSON object"
    for field in schema.EVENTS.fields:
        value = row.get(field.name)
        if value is None:
            continue
        if isinstance(field.dataType, T.LongType):
            fits = isinstance(value, int) and not isinstance(value, bool)
        else:
            fits = isinstance(value, str)
        if not fits:
            wanted = "an integer" if isinstance(field.dataType, T.LongType) else "a string"
            return f"column {field.name!r} is {value!r}, expected {wanted}"
    return "row does not fit the schema"


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


def read_events(
    spark: sql.SparkSession, inputs: Inputs, *, cached: list[sql.DataFrame] | None = None
) -> sql.DataFrame:
    """Every input as one normalized, validated and persisted event DataFrame.

    Raises ``SchemaMismatchError`` naming the first offending file and column.
    The persisted frame is appended to ``cached`` for the caller to unpersist.
    """
    frames = []
    if inputs.json:
        with_corrupt = T.StructType([*schema.EVENTS.fields, T.StructField(CORRUPT, T.StringType())])
        frames.append(
            spark.read.schema(with_corrupt)
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT)
            .json(list(inputs.json))
        )
    if inputs.parquet:
        _check_parquet_schemas(inputs.parquet)
        raw = spark.read.schema(schema.EVENTS).parquet(*inputs.parquet)
        frames.append(raw.withColumn(CORRUPT, F.lit(None).cast("string")))
    both = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
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
        files = [found[0]["file"] for found in where if found]
        raise errors.SchemaMismatchError(f"{files[0] if files else 'input'}: {detail}")
    return eventlog.normalize(checked.drop(CORRUPT))


def _write(table: pa.Table, path: Path) -> Path:
    pq.write_table(table, path)
    return path


def _file_name(run: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", run)[:80] or "run"


def run(
    paths: Sequence[str],
    *,
    out: str | Path,
    master: str | None = None,
    conf: Sequence[tuple[str, str]] = (),
    with_plots: bool = True,
) -> Result:
    """Analyze the event logs under ``paths`` and write the report into ``out``."""
    target = Path(out)
    inputs = find_inputs(paths, exclude=target)
    spark = spark_session(master, conf)
    target.mkdir(parents=True, exist_ok=True)
    cached: list[sql.DataFrame] = []
    events = read_events(spark, inputs, cached=cached)
    tables = transforms.analyze(events)
    metrics = tables.metrics.toArrow()
    overlaps = tables.overlaps.orderBy("run", "start_ms", "resource").toArrow()
    resources = tables.resources.toArrow()
    imbalance = tables.imbalance.orderBy("run", "ts_ms").toArrow()
    timeline = tables.timeline.orderBy("run", "ts_ms").toArrow()
    written = [
        _write(metrics, target / "metrics.parquet"),
        _write(overlaps, target / "overlaps.parquet"),
        _write(resources, target / "resources.parquet"),
        _write(imbalance, target / "imbalance.parquet"),
        _write(timeline, target / "timeline.parquet"),
    ]
    metric_rows: list[dict[str, Any]] = metrics.to_pylist()
    figures: dict[str, str] = {}
    if with_plots:
        for name, figure in plots.all_figures(
            metrics=metric_rows,
            timeline=timeline.to_pylist(),
            resources=resources.select(["run", "pause_ms"]).to_pylist(),
            imbalance=imbalance.to_pylist(),
            file_name=_file_name,
        ).items():
            path = target / name
            figure.savefig(path, dpi=100)
            plots.close(figure)
            written.append(path)
            figures[name] = name
    markdown = report.render(
        metrics=metric_rows,
        overlaps=overlaps.to_pylist(),
        figures=list(figures),
        inputs=[*inputs.json, *inputs.parquet],
    )
    report_path = target / "report.md"
    report_path.write_text(markdown, encoding="utf-8")
    written.append(report_path)
    for frame in [*cached, *tables.cached]:
        frame.unpersist()
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
                     conf=options.parse_conf(args.conf), with_plots=not args.no_plots)
    except errors.AnalyticsError as exc:
        print(f"job.py: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(result.files)} files to {result.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
