"""Markdown tables: printed by commands and benchmarks, and written into reports (one format for both)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return "-" if value is None else str(value)


def markdown_table(rows: Sequence[Mapping], columns: Sequence[str] | None = None) -> str:
    """Formats rows (dicts) as an aligned Markdown table; ``columns`` picks and orders the keys."""
    columns = list(columns or (rows[0].keys() if rows else []))
    cells = [[_cell(row.get(column)) for column in columns] for row in rows]
    widths = [max([len(column)] + [len(r[i]) for r in cells]) for i, column in enumerate(columns)]

    def line(values):
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths)) + " |"

    return "\n".join([line(columns), line(["-" * w for w in widths]), *(line(r) for r in cells)])
