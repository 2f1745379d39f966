"""``report.html``: the report as one self-contained page a person opens in a browser.

The same tables as ``report.md`` (``report``), and every plot embedded as a
base64 PNG: no external stylesheet, script, font or image, so the file can be
mailed or attached to a ticket and still shows everything. Pure text from
collected rows; ``job`` writes it.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from typing import Any

from kooper.analytics import report

Rows = Sequence[Mapping[str, Any]]

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222;
       padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f3f3f3; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.bad { color: #b00020; font-weight: bold; } .ok { color: #1b5e20; }
figure { margin: 1em 0; } figcaption { font-size: 0.85em; color: #555; }
img { max-width: 100%; border: 1px solid #eee; }
code { font-size: 0.9em; }
"""


def _number(text: str) -> bool:
    return text.replace(".", "", 1).replace("-", "", 1).replace(",", "").isdigit()


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, name: str) -> str:
    """An HTML table; numeric cells right-aligned."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(
            f'<td class="num">{html.escape(c)}</td>' if _number(c) else f"<td>{html.escape(c)}</td>"
            for c in row
        ) + "</tr>"
        for row in rows
    )
    return f'<table id="{name}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def image(name: str, data: bytes) -> str:
    """A figure with its PNG inline (``data:`` URI) and the file name as caption."""
    encoded = base64.b64encode(data).decode("ascii")
    label = html.escape(name)
    return (f'<figure><img alt="{label}" src="data:image/png;base64,{encoded}">'
            f"<figcaption>{label}</figcaption></figure>")


def render(
    *,
    metrics: Rows,
    overlaps: Rows,
    images: Mapping[str, bytes],
    inputs: Sequence[str],
    starts: Mapping[str, int],
) -> str:
    """The whole report as one HTML document."""
    summary = html.escape(report.overlaps_summary(metrics, overlaps).replace("**", ""))
    verdict = "bad" if overlaps else "ok"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>kooper analyze</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>kooper analyze</h1>",
        f"<p>{len(metrics)} run(s) from {len(inputs)} file(s). Definitions: "
        "<code>docs/events.md</code>.</p>",
        f"<p>{html.escape(report.INTRO).replace('*undisturbed*', '<em>undisturbed</em>')}</p>",
        "<h2>Runs</h2>",
        table(*report.runs_table(metrics), name="runs"),
        "<h2>Protocol × policy</h2>",
        table(*report.compare_table(metrics), name="compare"),
        "<h2>Overlaps</h2>",
        f'<p class="{verdict}">{summary}</p>',
    ]
    if overlaps:
        parts.append(table(*report.overlaps_table(overlaps, starts), name="overlaps"))
    if images:
        parts.append("<h2>Plots</h2>")
        parts += [image(name, data) for name, data in images.items()]
    parts.append("<h2>Inputs</h2><ul>")
    parts += [f"<li><code>{html.escape(name)}</code></li>" for name in inputs]
    parts.append("</ul></body></html>")
    return "\n".join(parts) + "\n"
