"""Tables as the notebooks show them and the report reads them: CSV and Markdown, written atomically."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from helpers.artifacts import atomic_write


def _cell(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}" if abs(value) < 0.01 and value else f"{value:.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def markdown(rows: list[dict]) -> str:
    """Rows of {column: value} as a Markdown table (None as n/a, floats to two decimals)."""
    if not rows:
        raise ValueError("a table needs at least one row")
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def write_table(rows: list[dict], stem: str | Path) -> str:
    """Write `<stem>.csv` and `<stem>.md`; returns the Markdown."""
    stem = Path(stem)
    text = markdown(rows)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(stem.with_suffix(".csv"), lambda p: p.write_text(buffer.getvalue()))
    atomic_write(stem.with_suffix(".md"), lambda p: p.write_text(text + "\n"))
    return text
