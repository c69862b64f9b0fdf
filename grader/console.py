"""How a graded report looks on a terminal, once for both commands that print one.

``attn-grader check`` has the grader's report, ``attn-grader submit`` the API's view of it;
both give their checks as ``CheckResult.to_dict()`` gives them (the API's shape: ``message``
in English, ``message_i18n`` for the reader's language), so the table, the first traceback
and the score line are the same code and look the same. Every student-written text goes in
as ``Text``: a message is never read as rich markup.
"""
from __future__ import annotations

from rich.table import Table
from rich.text import Text

from .i18n import gettext_for, render, skip_reason


def _message(check: dict):
    return check.get("message_i18n") or check.get("message") or ""


def check_table(title: str, checks: list[dict], lang: str | None) -> Table:
    """One row per check that ran, one row per reason for the checks that did not."""
    _ = gettext_for(lang)
    table = Table(title=title, expand=True)
    table.add_column(_("check"), no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column(_("points"), justify="right", no_wrap=True)
    table.add_column(_("what was found"), ratio=1)
    skipped: dict[str, int] = {}
    for c in checks:
        if (c.get("details") or {}).get("skipped"):  # one line per reason, as on the web page
            reason = skip_reason(_message(c), lang)
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        mark = Text(_("pass"), style="green") if c["passed"] else Text(_("FAIL"), style="red")
        points = f"{c['points']:g}/{c['max_points']:g}" if c["max_points"] else "-"
        table.add_row(c["id"], mark, points, Text(render(_message(c), lang)))
    for reason, count in skipped.items():
        table.add_row(_("({count} more)").format(count=count), Text(_("skip"), style="dim"), "-",
                      Text(_("not run: {reason}").format(reason=reason)))
    return table


def print_first_traceback(console, checks: list[dict], lang: str | None) -> None:
    """The traceback of the first failing check that has one (the rest are usually the same)."""
    _ = gettext_for(lang)
    for c in checks:
        traceback = (c.get("details") or {}).get("traceback")
        if traceback and not c["passed"]:
            console.print(Text(_("{check}: your traceback").format(check=c["id"]), style="bold"))
            console.print(Text(traceback))
            return


def score_line(score, max_score, passed: bool, lang: str | None, late: bool = False) -> Text:
    _ = gettext_for(lang)
    colour = "green" if passed else "red"
    said = _("all scored checks passed") if passed else _("some checks failed")
    late = _(", late") if late else ""
    return Text.assemble((_("score {score}/{max_score}").format(score=f"{score or 0:g}",
                                                               max_score=f"{max_score or 0:g}"),
                          f"bold {colour}"), f" ({said}{late})")


def error_not_in_checks(error, checks: list[dict]) -> bool:
    """Whether the report's error still needs saying (a load failure is also its check's message)."""
    return bool(error) and str(error) not in {str(c.get("message")) for c in checks}
