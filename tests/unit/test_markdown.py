"""The one Markdown table helper (myaccel.markdown) and its escaping policy."""

from __future__ import annotations

from myaccel import markdown
from myaccel.report.fmt import md_cell


def test_a_table_has_a_header_an_alignment_line_and_one_line_per_row() -> None:
    lines = markdown.table(["a", "b", "c"], [[1, 2.5, ""], ["x", "y", "z"]], "lr")
    assert lines == ["| a | b | c |", "|---|---:|---|", "| 1 | 2.5 |  |", "| x | y | z |"]


def test_pipes_are_escaped_and_line_breaks_become_spaces_in_every_cell() -> None:
    lines = markdown.table(["x|y"], [["`a|b`"], ["one\ntwo\r\nthree"]])
    assert lines == ["| x\\|y |", "|---|", "| `a\\|b` |", "| one two three |"]


def test_nothing_else_is_touched() -> None:
    assert markdown.cell("**bold** `code` <b> \\d") == "**bold** `code` <b> \\d"


def test_the_reports_cells_add_backslashes_and_html_on_top() -> None:
    assert md_cell("a|b\\c\nd<e>") == "a\\|b\\\\c d&lt;e&gt;"
