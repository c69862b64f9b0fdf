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

from .i18n import N_, gettext_for, render, skip_reason


def _message(check: dict):
    return check.get("message_i18n") or check.get("message") or ""


def _points(check: dict, checks: list[dict]) -> str:
    """``points/max``; "-" for an unscored check, and for a load step that passed in a file that
    then failed to load (it earns nothing: "pass 0/2" read as a contradiction)."""
    if not check["max_points"]:
        return "-"
    if check["passed"] and not check["points"] and check["id"].startswith("load.") and any(
            c["id"].startswith("load.") and not c["passed"] for c in checks):
        return "-"
    return f"{check['points']:g}/{check['max_points']:g}"


def _mark(check: dict, _) -> Text:
    """pass / FAIL, and a neutral "note" for a reported-only check that did not pass: it costs
    nothing, so it is not shown as a failure (a full score never shows a FAIL)."""
    if check["passed"]:
        return Text(_("pass"), style="green")
    if not check["max_points"]:
        return Text(_("note"), style="dim")
    return Text(_("FAIL"), style="red")


def check_table(title: str, checks: list[dict], lang: str | None) -> Table:
    """One row per check that ran, one row per reason for the checks that did not."""
    _ = gettext_for(lang)
    table = Table(title=title, expand=True)
    table.add_column(_("check"), no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column(_("points"), justify="right", no_wrap=True)
    # folded, not cut: Chinese has no spaces to wrap at, and rich's default for a cell too
    # narrow is "…", which cut the advice short (review 3, P3); rich measures in terminal cells
    # (a Han character is two), so the folds fall at the column's edge
    table.add_column(_("what was found"), ratio=1, overflow="fold")
    skipped: dict[str, int] = {}
    for c in checks:
        if (c.get("details") or {}).get("skipped"):  # one line per reason, as on the web page
            reason = skip_reason(_message(c), lang)
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        mark = _mark(c, _)
        points = _points(c, checks)
        table.add_row(c["id"], mark, points, Text(render(_message(c), lang)))
    for reason, count in skipped.items():
        table.add_row(_("({count} more)").format(count=count), Text(_("skip"), style="dim"), "-",
                      Text(_("not run: {reason}").format(reason=reason)))
    return table


def for_output(console):
    """``console``, made not to wrap lines when it writes to a pipe or a file (no terminal to fit)."""
    if not console.is_terminal:
        console.soft_wrap = True
    return console


def print_checks(console, title: str, checks: list[dict], lang: str | None) -> None:
    """The table on a terminal; piped or redirected (no terminal to size it), one line per
    failing check and one for every check that passed, each at its full length, so that a
    log or a grep gets the findings in a few lines instead of an 80-column box 150 lines tall."""
    if console.is_terminal:
        console.print(check_table(title, checks, lang))
        return
    _ = gettext_for(lang)
    console.print(Text(title, style="bold"), soft_wrap=True)
    passed, skipped, knock_on = [], {}, []
    for c in checks:
        if (c.get("details") or {}).get("skipped"):
            reason = skip_reason(_message(c), lang)
            skipped[reason] = skipped.get(reason, 0) + 1
        elif (c.get("details") or {}).get("because_of") and not c["passed"]:
            knock_on.append(c["id"])  # the bug is named in the summary; its points are kept
        elif c["passed"]:
            passed.append(c["id"])
        else:
            points = _points(c, checks)
            console.print(Text.assemble(_mark(c, _), f" {c['id']} {points}: ",
                                        Text(render(_message(c), lang))), soft_wrap=True)
    if knock_on:
        console.print(Text.assemble((_("FAIL"), "red"), " ", ", ".join(knock_on), ": ",
                                    _("fail because of a bug already counted (points kept)")), soft_wrap=True)
    if passed:
        console.print(Text.assemble((_("pass"), "green"), " ", ", ".join(passed)), soft_wrap=True)
    for reason, count in skipped.items():
        console.print(Text.assemble((_("skip"), "dim"), " ", _("({count} more)").format(count=count), " ",
                                    _("not run: {reason}").format(reason=reason)), soft_wrap=True)


def print_first_traceback(console, checks: list[dict], lang: str | None) -> None:
    """The traceback of the first failing check that has one (the rest are usually the same)."""
    _ = gettext_for(lang)
    for c in checks:
        traceback = (c.get("details") or {}).get("traceback")
        if traceback and not c["passed"]:
            console.print(Text(_("{check}: your traceback").format(check=c["id"]), style="bold"))
            console.print(Text(traceback))
            return


def print_source_caret(console, checks: list[dict]) -> None:
    """Where Python could not read the file: the line, with a caret under the spot."""
    for c in checks:
        caret = (c.get("details") or {}).get("caret")
        if caret and not c["passed"]:
            console.print(Text(caret), soft_wrap=True)  # never wrapped: the caret must stay under its column
            return


def progress_bar(console, file: str, total: int, lang: str | None):
    """The pre-check's transient bar and its one job; the job counts its ``total`` steps from the
    first frame ("0/31", never "0/None": review 3, P18)."""
    from rich.progress import BarColumn, Progress, TextColumn

    _ = gettext_for(lang)
    checking = _("checking")
    bar = Progress(TextColumn(f"[bold]{checking}[/] {{task.description}}"), BarColumn(),
                   TextColumn("{task.completed}/{task.total}"), console=console, transient=True)
    return bar, bar.add_task(file, total=total)


def score_line(score, max_score, passed: bool, lang: str | None, late: bool = False) -> Text:
    _ = gettext_for(lang)
    colour = "green" if passed else "red"
    said = _("all scored checks passed") if passed else _("some checks failed")
    late = _(", late") if late else ""
    # the brackets are the language's own: full-width in Chinese, beside the other messages' (review 3: P18)
    return Text.assemble((_("score {score}/{max_score}").format(score=f"{score or 0:g}",
                                                               max_score=f"{max_score or 0:g}"),
                          f"bold {colour}"), _(" ({verdict})").format(verdict=said + late))


def error_not_in_checks(error, checks: list[dict]) -> bool:
    """Whether the report's error still needs saying (a load failure is also its check's message)."""
    return bool(error) and str(error) not in {str(c.get("message")) for c in checks}


# Column titles of the tables in a check's details, where a key alone says too little.
DETAIL_COLUMNS = {"variance": N_("your variance"), "expected": N_("expected variance"),
                  "fitted_scale": N_("your scale"), "expected_scale": N_("expected scale"),
                  "seconds": N_("yours (s)"), "baseline_seconds": N_("plain (s)"),
                  "excess_units": N_("extra (small calls)"), "growth": N_("× tiny call")}


def _value(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)) and all(not isinstance(v, (dict, list, tuple)) for v in value):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return str(value)


def details_renderables(details: dict, lang: str | None, skip=()) -> list:
    """A check's details for a terminal: ``key: value`` lines, and a small table for a list of
    records (``variance_by_dk``) or a record of records (``growth``), never a raw Python structure."""
    _ = gettext_for(lang)
    out = []
    for key, value in details.items():
        if key in skip:
            continue
        rows = None
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            rows = [(None, v) for v in value]
        elif isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            rows = list(value.items())
        if rows is None:
            if isinstance(value, dict):
                value = ", ".join(f"{k} {_value(v)}" for k, v in value.items())
            out.append(Text(f"  {key}: {_value(value)}"[:400]))
            continue
        columns = list(dict.fromkeys(k for _, record in rows for k in record))
        table = Table(title=key, title_justify="left", box=None, pad_edge=False, padding=(0, 1, 0, 1))
        if rows[0][0] is not None:
            table.add_column("", no_wrap=True)
        for column in columns:
            table.add_column(_(DETAIL_COLUMNS[column]) if column in DETAIL_COLUMNS else column, justify="right",
                             no_wrap=True)
        for name, record in rows:
            cells = [_value(record.get(column, "")) for column in columns]
            table.add_row(*([name] if name is not None else []), *cells)
        out.append(table)
    return out
