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


def _cell(value: object, *, ms: bool) -> str:
    # Integers print as is, means with one decimal, durations in seconds.
    if value is None:
        return "–"
    if ms and isinstance(value, int | float):
        return f"{value / 1000:.3f}"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value).replace("|", "\\|")


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _compare(metrics: Rows) -> list[str]:
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
            cells.append(_cell(value, ms=ms))
        rows.append(cells)
    return _table(["protocol", "policy", "runs", *(h for _, h, _ in _COMPARED)], rows)


def render(*, metrics: Rows, overlaps: Rows, figures: Sequence[str], inputs: Sequence[str]) -> str:
    """The whole report as markdown."""
    total_overlaps = sum(int(row["overlaps"]) for row in metrics)
    lines = [
        "# kooper analyze",
        "",
        f"{len(metrics)} run(s) from {len(inputs)} file(s). Definitions: `docs/events.md`.",
        "Pause is task-time in which a resource ran on no member; *undisturbed* pause is"
        " that of resources whose members never left, rejoined or joined late (0 for a"
        " cooperative protocol).",
        "",
        "## Runs",
        "",
        *_table(
            [header for _, header, _ in _RUN_COLUMNS],
            [[_cell(row[c], ms=ms) for c, _, ms in _RUN_COLUMNS] for row in metrics],
        ),
        "",
        "## Protocol × policy",
        "",
        *_compare(metrics),
        "",
        "## Overlaps",
        "",
    ]
    if not overlaps:
        lines.append("None: no resource ever ran on two members at once.")
    else:
        lines.append(
            f"**{total_overlaps} overlap(s)**: a resource ran on two members at once"
            + (f" (first {OVERLAPS_SHOWN} shown)." if len(overlaps) > OVERLAPS_SHOWN else ".")
        )
        lines.append("")
        columns = ("run", "group", "resource", "member", "other_member", "start_ms", "end_ms")
        lines += _table(
            list(columns),
            [[_cell(row[c], ms=False) for c in columns] for row in overlaps[:OVERLAPS_SHOWN]],
        )
    if figures:
        lines += ["", "## Plots", ""]
        lines += [f"![{name}]({name})" for name in figures]
    lines += ["", "## Inputs", "", *(f"- `{name}`" for name in inputs), ""]
    return "\n".join(lines)
