"""Printing tables whose identifiers stay whole. Rich fits a table to the terminal by
shortening columns with an ellipsis; an id cut that way cannot be pasted into the next
command (``gpucap drain NODE``). Identifier columns here never wrap or shrink: the other
columns wrap instead, and when the ids alone are wider than the terminal the table is
printed wider than it (the terminal wraps the line; the characters are all there)."""

from __future__ import annotations

from collections.abc import Collection

from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


def _width(cell: object) -> int:
    """The widest line of a cell (a cell may list several ids, one a line)."""
    text = cell.plain if isinstance(cell, Text) else str(cell)
    return max(cell_len(line) for line in text.split("\n"))


def keep_whole(table: Table, ids: Collection[str]) -> Table:
    """Make the columns headed ``ids`` unbreakable and let every other column wrap."""
    for column in table.columns:
        if str(column.header) in ids:
            column.no_wrap = True
            column.min_width = max([_width(c) for c in column.cells] + [_width(column.header)])
        else:
            column.overflow = "fold"
    return table


def print_table(console: Console, table: Table, ids: Collection[str] = ()) -> None:
    """Print ``table`` with its ``ids`` columns whole (see the module's doc)."""
    keep_whole(table, ids)
    needed = Measurement.get(console, console.options.update_width(1 << 16), table).minimum
    if needed > console.width:
        console.width = needed
    console.print(table)
