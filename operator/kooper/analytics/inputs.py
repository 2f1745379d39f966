"""Which files ``kooper analyze`` reads, and their rows checked before Spark starts.

Pure Python and pyarrow (no Spark): a malformed row is reported as
``file:line: problem`` in a second, not after Spark's start-up and a scan.

Two kinds of files are read:

* **event logs** (``*.jsonl``, ``*.json``, ``*.parquet``): the drill rows of one
  or more runs;
* **operator audit logs** (``*.audit.jsonl``, the operator's ``--audit-log``):
  the operator's view, which names no drill run (``run`` is ``operator``). Only
  their ``round``, ``join`` and ``leave`` rows count (their ``start``/``stop``
  rows are the operator's intent, not what ran), relabelled with the run, and
  group, of the event log they sit beside: the log named after their folder
  (``out/a.events.jsonl`` for ``out/a/operator.audit.jsonl``, as ``kooper demo``
  writes them), else the logs in their own folder. They are never a run of
  their own.

Rows that appear in several files of one run (a demo's merged log and the
worker logs and audit log it was merged from) are counted once.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kooper.analytics import errors
from kooper.core import events

JSON_SUFFIXES = (".jsonl", ".json")
PARQUET_SUFFIXES = (".parquet",)
AUDIT_SUFFIXES = (".audit.jsonl", ".audit.json")
REPORT_MARKERS = ("report.md", "metrics.parquet")
"""A folder holding both is an earlier ``kooper analyze`` output: skipped."""

LONG_COLUMNS = events.LONG_COLUMNS
STRING_COLUMNS = events.STRING_COLUMNS
REQUIRED = events.REQUIRED
KINDS: tuple[str, ...] = tuple(str(kind) for kind in events.Kind)
NEEDS_MEMBER = events.NEEDS_MEMBER
NEEDS_RESOURCE = events.NEEDS_RESOURCE
FLIPS = frozenset({"pause", "resume"})
OPERATOR_KINDS = ("round", "join", "leave")
"""The audit-log rows that count (the rest is the operator's intent)."""
LIFECYCLE_KINDS = ("join", "leave")
"""Of those, the ones read only for a run whose own logs have none (``job.read_events``)."""

BIG_FILE = 64 << 20
"""Files from this size on get a progress line of their own while they are checked."""

Progress = Callable[[str], None]


@dataclasses.dataclass(frozen=True, slots=True)
class Audit:
    """An operator audit log and the run (and group) its rows are relabelled with."""

    path: str
    run: str
    group: str | None
    """The run's group when its event logs have exactly one, else ``None`` (keep the row's)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Inputs:
    """Event-log files to read, by format, and the audit logs joined to their runs."""

    json: tuple[str, ...] = ()
    parquet: tuple[str, ...] = ()
    audits: tuple[Audit, ...] = ()
    checked: bool = False
    """Every row was checked here (no remote URI): Spark need not check them again."""
    dedupe: bool = False
    """Some run spans several files: drop rows repeated across them."""
    spanning: tuple[str, ...] = ()
    """The runs that span several files, when ``checked`` (else any run may)."""
    rows: int = 0
    """Rows of the event logs (audit logs not counted), when ``checked``."""
    flips: bool = True
    """Some row is a ``pause`` or ``resume`` (true unless ``checked`` found none)."""
    runs: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.json or self.parquet)

    @property
    def files(self) -> tuple[str, ...]:
        """Every file read, audit logs last."""
        return (*self.json, *self.parquet, *(audit.path for audit in self.audits))


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """Files named by the command line, before their rows are read."""

    json: tuple[str, ...] = ()
    parquet: tuple[str, ...] = ()
    audits: tuple[str, ...] = ()


@dataclasses.dataclass(slots=True)
class Summary:
    """What one file holds: row count, and the groups seen per run."""

    rows: int = 0
    flips: int = 0
    """``pause`` and ``resume`` rows."""
    groups: dict[str, set[str]] = dataclasses.field(default_factory=dict)

    def add(self, run: str, group: str) -> None:
        self.groups.setdefault(run, set()).add(group)


def is_audit(name: str) -> bool:
    """An operator audit log (``*.audit.jsonl``), not a drill event log."""
    return name.lower().endswith(AUDIT_SUFFIXES)


def _is_report(folder: Path) -> bool:
    return all((folder / marker).is_file() for marker in REPORT_MARKERS)


def find(paths: Sequence[str], *, exclude: Path | None = None) -> Found:
    """Event and audit logs named by ``paths`` (files, or folders searched recursively).

    A URI with a scheme (``s3a://…``) is passed to Spark as is and must end in
    a known suffix. A file named twice is read once. In folders, names starting
    with ``_`` or ``.`` (Spark's ``_SUCCESS``, checksum files), ``exclude`` (the
    output folder) and earlier ``kooper analyze`` outputs (a folder with
    ``report.md`` and ``metrics.parquet``) are skipped.
    """
    skip = exclude.resolve() if exclude else None
    found: dict[str, list[str]] = {"json": [], "parquet": [], "audits": []}
    seen: set[str] = set()

    def add(name: str, *, explicit: bool) -> None:
        same = name if "://" in name else str(Path(name).resolve())
        if same in seen:
            return  # named twice (by its folder and by itself): read once
        seen.add(same)
        lowered = name.lower()
        if is_audit(lowered):
            found["audits"].append(name)
        elif lowered.endswith(JSON_SUFFIXES):
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
            reports = {folder for folder in [path, *path.rglob("*")]
                       if folder.is_dir() and _is_report(folder)}
            for child in sorted(path.rglob("*")):
                hidden = any(part.startswith(("_", ".")) for part in child.relative_to(path).parts)
                ours = skip is not None and child.resolve().is_relative_to(skip)
                report = any(child.is_relative_to(folder) for folder in reports)
                if child.is_file() and not hidden and not ours and not report:
                    add(str(child), explicit=False)
        elif path.is_file():
            add(str(path), explicit=True)
        else:
            raise errors.NoInputsError(f"{raw}: no such file or directory")
    result = Found(json=tuple(found["json"]), parquet=tuple(found["parquet"]),
                   audits=tuple(found["audits"]))
    if not (result.json or result.parquet):
        what = "only operator audit logs, which need their run's event log" if result.audits \
            else "no event logs (*.jsonl, *.json, *.parquet)"
        raise errors.NoInputsError(f"{what} in {', '.join(paths) or 'no paths'}")
    return result


# -- one JSON line ---------------------------------------------------------------------------


row_problem = events.row_problem
"""Why one decoded JSON value is not an event row (``events.row_problem``)."""
kind_problem = events.kind_problem


def _lines(path: str) -> Iterator[tuple[int, str]]:
    """Non-blank lines with their 1-based numbers; undecodable bytes are a one-line error."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise errors.SchemaMismatchError(
                    f"{path}:{number}: not UTF-8 text (byte {exc.start + 1}): a binary file, "
                    "or another encoding such as UTF-16"
                ) from None
            if number == 1 and line.startswith("\ufeff"):
                raise errors.SchemaMismatchError(
                    f"{path}:1: starts with a byte-order mark: save it as UTF-8 without BOM"
                )
            if line.strip():
                yield number, line


def check_json(path: str) -> Summary:
    """Every line of a JSON-lines file is an event row; raises ``file:line: problem``."""
    summary = Summary()
    loads = json.loads
    for number, line in _lines(path):
        try:
            row = loads(line)
        except json.JSONDecodeError as exc:
            raise errors.SchemaMismatchError(
                f"{path}:{number}: not valid JSON ({exc.msg} at column {exc.colno})"
            ) from None
        problem = row_problem(row)
        if problem is not None:
            raise errors.SchemaMismatchError(f"{path}:{number}: {problem}")
        summary.rows += 1
        summary.flips += row["event"] in FLIPS
        summary.add(row["run"], row.get("group") or "")
    return summary


# -- Parquet ---------------------------------------------------------------------------------


def _type_ok(kind: pa.DataType, *, integer: bool) -> bool:
    if pa.types.is_dictionary(kind):  # pandas categoricals, dictionary-encoded writers
        kind = kind.value_type
    if pa.types.is_null(kind):
        return True
    if integer:
        return bool(pa.types.is_signed_integer(kind))
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _strings(table: pa.Table, column: str) -> pa.Array:
    if column not in table.column_names:
        return pa.nulls(table.num_rows, pa.string())
    array = table[column].combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return array.cast(pa.string())


def _first(mask: pa.Array) -> int | None:
    """Index of the first true value of a boolean array (nulls are false)."""
    hits = pc.indices_nonzero(pc.fill_null(mask, False))
    return int(hits[0].as_py()) if len(hits) else None


def _parquet_schema(path: str) -> pa.Schema:
    try:
        found = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise errors.SchemaMismatchError(f"{path}: not a readable Parquet file ({exc})") from None
    for column in REQUIRED:
        if column not in found.names:
            raise errors.SchemaMismatchError(f"{path}: column {column!r} is missing")
    for column in (*LONG_COLUMNS, *STRING_COLUMNS):
        if column in found.names:
            kind = found.field(column).type
            if not _type_ok(kind, integer=column in LONG_COLUMNS):
                wanted = "a signed integer" if column in LONG_COLUMNS else "string"
                raise errors.SchemaMismatchError(
                    f"{path}: column {column!r} has type {kind}, expected {wanted}"
                )
    return found


def check_parquet(path: str) -> Summary:
    """Column types from the footer, then every row group's rows; raises ``file: row N: ...``."""
    names = _parquet_schema(path).names
    wanted = [c for c in ("ts_ms", "run", "event", "member", "resource", "group") if c in names]
    summary = Summary()
    try:
        handle = pq.ParquetFile(path)
        batches = (handle.read_row_group(i, columns=wanted) for i in range(handle.num_row_groups))
        for table in batches:
            _check_table(path, table, offset=summary.rows, summary=summary)
            summary.rows += table.num_rows
    except (pa.ArrowInvalid, OSError) as exc:
        raise errors.SchemaMismatchError(f"{path}: not a readable Parquet file ({exc})") from None
    return summary


def _check_table(path: str, table: pa.Table, *, offset: int, summary: Summary) -> None:
    if not table.num_rows:
        return
    kind = _strings(table, "event")
    member = _strings(table, "member")
    resource = _strings(table, "resource")
    problems = [pc.is_null(table["ts_ms"]), pc.is_null(_strings(table, "run")), pc.is_null(kind),
                pc.invert(pc.is_in(kind, value_set=pa.array(KINDS))),
                pc.and_(pc.is_in(kind, value_set=pa.array(sorted(NEEDS_MEMBER))),
                        pc.fill_null(pc.equal(member, ""), True)),
                pc.and_(pc.is_in(kind, value_set=pa.array(sorted(NEEDS_RESOURCE))),
                        pc.fill_null(pc.equal(resource, ""), True))]
    bad = [index for index in (_first(mask) for mask in problems) if index is not None]
    if bad:
        index = min(bad)
        row = {column: table[column][index].as_py() for column in table.column_names}
        row["event"], row["member"], row["resource"] = (
            kind[index].as_py(), member[index].as_py(), resource[index].as_py())
        problem = next(
            (f"column {c!r} is missing" for c in REQUIRED if row.get(c) is None), None
        ) or kind_problem(row["event"], row["member"], row["resource"])
        raise errors.SchemaMismatchError(f"{path}: row {offset + index + 1}: {problem}")
    summary.flips += int(pc.sum(pc.is_in(kind, value_set=pa.array(sorted(FLIPS)))).as_py() or 0)
    groups = _strings(table, "group")
    pairs = pa.table({"run": _strings(table, "run"),
                      "group": pc.fill_null(groups, "")}).group_by(["run", "group"]).aggregate([])
    for run, group in zip(pairs["run"].to_pylist(), pairs["group"].to_pylist(), strict=True):
        summary.add(str(run), str(group))


# -- putting it together ---------------------------------------------------------------------


def _audit_run(audit: str, logs: dict[str, Summary]) -> Audit:
    """The run an audit log sits beside: the log named after its folder, else its folder's."""
    folder = Path(audit).parent
    named = [s for name, s in logs.items() if "://" not in name
             and Path(name).parent == folder.parent
             and Path(name).name.startswith(folder.name + ".")]
    beside = [s for name, s in logs.items() if "://" not in name and Path(name).parent == folder]
    runs: dict[str, set[str]] = {}
    for summary in named or beside:
        for run, groups in summary.groups.items():
            runs.setdefault(run, set()).update(groups)
    if len(runs) != 1:
        found = f"runs {', '.join(sorted(runs))}" if runs else "no event log"
        raise errors.SchemaMismatchError(
            f"{audit}: an operator audit log beside {found}: it is joined to the run of the "
            f"event log named after its folder ({folder.parent / folder.name}.events.jsonl) "
            "or in its folder, which must hold exactly one run"
        )
    [(run, groups)] = runs.items()
    return Audit(path=audit, run=run, group=next(iter(groups)) if len(groups) == 1 else None)


def check(found: Found, *, progress: Progress | None = None) -> Inputs:
    """Read every local file's rows and check them; which runs span several files.

    Raises ``SchemaMismatchError`` (``file:line: ...``) on the first bad row, and
    ``NoInputsError`` when the event logs hold no row at all.
    """
    logs: dict[str, Summary] = {}
    remote = False
    for name in (*found.json, *found.parquet):
        if "://" in name:
            remote = True
            continue
        if progress is not None and Path(name).stat().st_size >= BIG_FILE:
            progress(f"checking {name} ({Path(name).stat().st_size / 1e6:,.0f} MB)")
        logs[name] = check_parquet(name) if name in found.parquet else check_json(name)
    for audit in found.audits:
        if "://" not in audit:
            check_json(audit)
    rows = sum(summary.rows for summary in logs.values())
    if not remote and rows == 0:
        names = ", ".join((*found.json, *found.parquet))
        raise errors.NoInputsError(f"no events: every event log is empty ({names})")
    audits = tuple(_audit_run(audit, logs) for audit in found.audits)
    files_per_run: dict[str, int] = {}
    for summary in logs.values():
        for run in summary.groups:
            files_per_run[run] = files_per_run.get(run, 0) + 1
    for joined in audits:
        files_per_run[joined.run] = files_per_run.get(joined.run, 0) + 1
    return Inputs(
        json=found.json, parquet=found.parquet, audits=audits, checked=not remote,
        dedupe=any(count > 1 for count in files_per_run.values())
        or (remote and len(found.json) + len(found.parquet) + len(audits) > 1),
        spanning=tuple(sorted(run for run, count in files_per_run.items() if count > 1)),
        rows=rows, runs=tuple(sorted(files_per_run)),
        flips=remote or any(summary.flips for summary in logs.values()),
    )


def find_and_check(
    paths: Sequence[str], *, exclude: Path | None = None, progress: Progress | None = None
) -> Inputs:
    """``find`` then ``check``: the inputs of one ``kooper analyze``."""
    return check(find(paths, exclude=exclude), progress=progress)

