"""Tables never cut an identifier a user pastes into the next command."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from controlplane.cli.tables import print_table

NODE = "r-0123456789abcdef0123-n0"
POOL = "acme/acme-aws/ap-southeast-2/p5en.48xlarge"


def _print(width: int) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None)
    table = Table("NODE", "POOL", "MESSAGE")
    table.add_row(NODE, POOL, "a long message that may wrap over as many lines as it needs")
    print_table(console, table, ("NODE", "POOL"))
    return buf.getvalue()


def test_ids_stay_whole_when_the_terminal_is_narrow() -> None:
    for width in (40, 80, 200):
        out = _print(width)
        assert NODE in out and POOL in out and "…" not in out, out


def test_without_id_columns_rich_would_cut_them() -> None:
    """(What print_table prevents: the same table printed plainly at 40 columns.)"""
    buf = io.StringIO()
    table = Table("NODE", "POOL", "MESSAGE")
    table.add_row(NODE, POOL, "a long message")
    Console(file=buf, width=40, color_system=None).print(table)
    assert NODE not in buf.getvalue()


def test_other_columns_wrap_instead_of_widening_when_they_can() -> None:
    out = _print(100)
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "a long message" in out and "needs" in out  # wrapped, not cut


def test_a_cell_of_several_ids_one_a_line_keeps_each_whole() -> None:
    ids = ["i-0aaaaaaaaaaaaaaaa", "i-0bbbbbbbbbbbbbbbb"]
    buf = io.StringIO()
    table = Table("INSTANCE", "DETAIL")
    table.add_row("\n".join(ids), "leaked: running with gpucap's tags, in no row of the store")
    print_table(Console(file=buf, width=30, color_system=None), table, ("INSTANCE",))
    out = buf.getvalue()
    assert all(i in out for i in ids) and "…" not in out, out
    # Sized to one id, not to both side by side.
    assert max(len(line) for line in out.splitlines()) < 2 * len(ids[0]) + 10
