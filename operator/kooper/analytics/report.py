"""``report.md``: the runs side by side, then protocol x policy, overlaps and plots.

Pure text from collected rows; ``job`` writes it. Times are shown in seconds
with millisecond precision; the Parquet files keep the exact milliseconds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

Rows = Sequence[Mapping[str, Any]]

OVERLAPS_SHOWN = 50

# (column, header, is a duration in ms)
_RUN_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("run", "run", False),
    ("protocol", "protocol", False),
    ("policy", "policy", False),
    ("members", "members", False),
    ("resources", "resources", False),
    ("total_pause_ms", "total pause (task-s)", True),
    ("max_pause_ms", "max pause (s)", True),
    ("undisturbed_pause_ms", "undisturbed pause (task-s)", True),
    ("rounds", "rounds", False),
    ("moves", "moves", False),
    ("converge_ms", "converge (s)", True),
    ("overlaps", "overlaps", False),
    ("final_imbalance", "final imbalance", False),
)

_COMPARED: tuple[tuple[str, str, bool], ...] = (
    ("total_pause_ms", "mean total pause (task-s)", True),
    ("max_pause_ms", "worst max pause (s)", True),
    ("undisturbed_pause_ms", "mean undisturbed pause (task-s)", True),
    ("rounds", "mean rounds", False),
    ("moves", "mean moves", False),
    ("converge_ms", "mean converge (s)", True),
    ("overlaps", "overlaps", False),
)


def cell(value: object, *, ms: bool) -> str:
    """A table cell: ``–`` for none, durations (``ms``) in seconds, means with one decimal."""
    if value is None:
        return "–"
    if ms and isinstance(value, int | float):
        return f"{value / 1000:.3f}"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return lines


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def compare_table(metrics: Rows) -> tuple[list[str], list[list[str]]]:
    """Headers and cells of the protocol x policy comparison."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for row in metrics:
        groups[(str(row["protocol"]), str(row["policy"]))].append(row)
    rows = []
    for (protocol, policy), members in sorted(groups.items()):
        cells = [protocol or "–", policy or "–", str(len(members))]
        for column, header, ms in _COMPARED:
            values = [float(m[column]) for m in members if m[column] is not None]
            if header.startswith("worst"):
                value: float | None = max(values) if values else None
            elif column == "overlaps":
                value = int(sum(values))
            else:
                value = _mean(values)
            cells.append(cell(value, ms=ms))
        rows.append(cells)
    return ["protocol", "policy", "runs", *(h for _, h, _ in _COMPARED)], rows


OVERLAP_HEADERS = ("run", "group", "resource", "member", "other member",
                   "from (s after run start)", "to (s after run start)", "both ran (s)")


def runs_table(metrics: Rows) -> tuple[list[str], list[list[str]]]:
    """Headers and cells of the runs side by side."""
    return (
        [header for _, header, _ in _RUN_COLUMNS],
        [[cell(row[c], ms=ms) for c, _, ms in _RUN_COLUMNS] for row in metrics],
    )


def overlaps_table(
    overlaps: Rows, starts: Mapping[str, int]
) -> tuple[list[str], list[list[str]]]:
    """Headers and cells of the first ``OVERLAPS_SHOWN`` overlaps, times in seconds after
    their run's first event."""
    rows = []
    for row in overlaps[:OVERLAPS_SHOWN]:
        start = starts.get(str(row["run"]), 0)
        rows.append([
            *(cell(row[c], ms=False) for c in ("run", "group", "resource", "member",
                                                  "other_member")),
            cell(int(row["start_ms"]) - start, ms=True),
            cell(int(row["end_ms"]) - start, ms=True),
            cell(int(row["end_ms"]) - int(row["start_ms"]), ms=True),
        ])
    return list(OVERLAP_HEADERS), rows


def overlaps_summary(metrics: Rows, overlaps: Rows) -> str:
    """One sentence: none, or how many (and how many are listed)."""
    if not overlaps:
        return "None: no resource ever ran on two members at once."
    total = sum(int(row["overlaps"]) for row in metrics)
    shown = f" (first {OVERLAPS_SHOWN} shown)" if len(overlaps) > OVERLAPS_SHOWN else ""
    return f"**{total} overlap(s)**: a resource ran on two members at once{shown}."


INTRO = (
    "Pause is task-time in which a resource ran on no member; *undisturbed* pause is"
    " that of resources whose members never left, rejoined or joined late (0 for a"
    " cooperative protocol). Times are in seconds; the Parquet files keep milliseconds."
)


def render(
    *,
    metrics: Rows,
    overlaps: Rows,
    figures: Sequence[str],
    inputs: Sequence[str],
    starts: Mapping[str, int] | None = None,
) -> str:
    """The whole report as markdown."""
    lines = [
        "# kooper analyze",
        "",
        f"{len(metrics)} run(s) from {len(inputs)} file(s). Definitions: `docs/events.md`.",
        INTRO,
        "",
        "## Runs",
        "",
        *_table(*runs_table(metrics)),
        "",
        "## Protocol × policy",
        "",
        *_table(*compare_table(metrics)),
        "",
        "## Overlaps",
        "",
        overlaps_summary(metrics, overlaps),
    ]
    if overlaps:
        lines += ["", *_table(*overlaps_table(overlaps, starts or {}))]
    if figures:
        lines += ["", "## Plots", ""]
        lines += [f"![{name}]({name})" for name in figures]
    lines += ["", "## Inputs", "", *(f"- `{name}`" for name in inputs), ""]
    return "\n".join(lines)
