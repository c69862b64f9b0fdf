"""``attn-grader submit``: send a file to a grading service and wait for its result.

Uses only the JSON API (``POST /api/v1/submissions``, then ``GET`` its URL with ``?wait=``
until graded: the server answers as soon as the result is stored), so it works against any
server; it needs nothing from the web app itself and is part of the students' package
(``pip install attn-grader``, without the ``[server]`` extra).
"""
from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request

import click

from . import userconfig
from .i18n import LANGUAGES, T, gettext_for, render

DEFAULT_SERVER = "http://127.0.0.1:5000"
ACCOUNT_PATH = "/account"  # where a student creates an API token (web/pages/auth.py)


class ApiError(Exception):
    def __init__(self, status: int, message: str, retry_after: str | None = None):
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after


def _request(method: str, url: str, token: str, body: dict | None = None,
             timeout: float = 30) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"Bearer {token}", "Accept": "application/json",
        **({"Content-Type": "application/json"} if data is not None else {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read().decode())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read().decode()).get("error") or exc.reason
        except (ValueError, AttributeError):
            message = str(exc.reason)
        raise ApiError(exc.code, message, exc.headers.get("Retry-After")) from None
    except urllib.error.URLError as exc:
        raise ApiError(0, f"cannot reach {url}: {exc.reason}") from None


LONG_POLL_SECONDS = 25  # what one request asks the server to wait (its cap is 60 s)


def wait_phrase(seconds: float) -> T:
    """A wait as a person says it: "40 s", "54 min", "2 h 5 min" (a ``T``: the units are in the
    grader's catalogue, so a page or the CLI says "54 мин" or "54 分钟" with ``render``)."""
    seconds = max(1, int(round(seconds)))
    if seconds < 90:
        return T("{seconds} s", seconds=seconds)
    minutes = -(-seconds // 60)  # rounded up: "try again in 1 min" must not be too early
    if minutes < 120:
        return T("{minutes} min", minutes=minutes)
    hours, minutes = divmod(minutes, 60)
    if minutes:
        return T("{hours} h {minutes} min", hours=hours, minutes=minutes)
    return T("{hours} h", hours=hours)


def create_submission(server: str, token: str, task: str, code: str, *,
                      filename: str = "submission.py") -> dict:
    """POST the submission; returns ``{"id", "status", "url"[, "page_url"]}``.

    ``filename`` tells the server what ``code`` is: a name ending in .ipynb makes it a notebook.
    """
    return _request("POST", server.rstrip("/") + "/api/v1/submissions", token,
                    {"task": task, "code": code, "filename": filename})


def submit_and_wait(server: str, token: str, task: str, code: str, *, timeout: float = 600,
                    poll: float = 0.5, filename: str = "submission.py",
                    on_accepted=None) -> dict:
    """Submit ``code`` for ``task`` and return the graded submission (the API's JSON).

    ``on_accepted(accepted)`` is called once the server has stored it (to show its URL). Each
    status request asks the server to hold it until the result is stored (``?wait=``); only when
    an answer comes back early and unfinished (an older server, or one with every waiting slot
    taken) does the client pause ``poll`` s, growing, before the next.
    """
    accepted = create_submission(server, token, task, code, filename=filename)
    if on_accepted is not None:
        on_accepted(accepted)
    deadline = time.monotonic() + timeout
    separator = "&" if "?" in accepted["url"] else "?"
    while True:
        wait = max(0, min(LONG_POLL_SECONDS, int(deadline - time.monotonic())))
        asked = time.monotonic()
        view = _request("GET", f"{accepted['url']}{separator}wait={wait}", token,
                        timeout=wait + 30)
        if view["status"] in ("done", "failed"):
            return view
        if time.monotonic() > deadline:
            raise ApiError(0, f"submission {accepted['id']} not graded after {timeout:.0f} s "
                              f"(status {view['status']}); see {accepted['url']}")
        if time.monotonic() - asked < min(wait, 1.0):  # not held: poll politely
            time.sleep(poll)
            poll = min(poll * 1.5, 3.0)


def print_result(view: dict, console=None, lang: str | None = None) -> None:
    """The graded submission in the layout of ``attn-grader check``: a table of checks, then
    the first failing traceback, the score, errors and notes, in ``lang`` (see grader/i18n.py)."""
    from rich.console import Console
    from rich.text import Text

    from .console import error_not_in_checks, for_output, print_checks, print_first_traceback, print_source_caret, score_line

    _ = gettext_for(lang)
    console = for_output(console or Console())
    if view["status"] == "failed":
        console.print(Text.assemble((_("submission {id} ({task}) was not graded:").format(
            id=view["id"], task=view["task"]), "red"), " ", str(view.get("error"))))
        return
    checks = view.get("checks") or []
    if checks:
        print_checks(console, _("submission {id} — task {task}").format(id=view["id"], task=view["task"]),
                     checks, lang)
    elif view.get("feedback") == "hidden":
        console.print(Text(_("per-check feedback is hidden for this assignment"), style="dim"))
    print_first_traceback(console, checks, lang)
    print_source_caret(console, checks)
    console.print(score_line(view.get("score"), view.get("max_score"), bool(view.get("passed")), lang,
                             late=bool(view.get("late"))))
    if error_not_in_checks(view.get("error"), checks):
        console.print(Text(render(view.get("error_i18n") or view["error"], lang), style="red"))
    notebook = view.get("notebook")
    if notebook:
        console.print(_("{function}() is defined in cell {cell}").format(
            function=notebook["function"], cell=notebook["function_cell"]) if notebook.get("function_cell") else
            _("no cell of the notebook defines {function}()").format(function=notebook["function"]),
            highlight=False, markup=False)
    timings = view.get("timings") or {}
    if timings.get("total_seconds") is not None:
        console.print(Text(_("graded on the server with a secret seed by grader {version} in {total:.1f} s "
                             "(waited {wait:.1f} s)").format(version=view.get("grader_version"),
                                                             total=timings["total_seconds"],
                                                             wait=timings.get("wait_seconds") or 0), style="dim"))
    if view.get("torch_version"):
        from importlib import metadata

        from .commands import torch_mismatch
        try:
            note = torch_mismatch(metadata.version("torch"), view["torch_version"])
        except metadata.PackageNotFoundError:
            note = None
        if note is not None:
            console.print(Text(_("note: {warning}").format(warning=render(note, lang)), style="yellow"))


def _error_message(exc: ApiError, server: str, lang: str | None = None) -> str:
    """What went wrong and what helps, in ``lang``: waiting only where waiting helps (429)."""
    _ = gettext_for(lang)
    account = server.rstrip("/") + ACCOUNT_PATH
    if exc.status == 401:
        return _("the server refused the API token ({message}); create a new one on {account} and run "
                 "`attn-grader config set token`").format(message=exc.message, account=account)
    if exc.status == 429 and exc.retry_after:
        try:
            wait = render(wait_phrase(float(exc.retry_after)), lang)
        except ValueError:
            return _("{message} (try again after {when})").format(message=exc.message, when=exc.retry_after)
        return _("{message} (try again in {wait})").format(message=exc.message, wait=wait)
    return exc.message


@click.command(epilog="Get an API token on the account page of the service (/account, "
                      "'API tokens'); `attn-grader config set server URL` and "
                      "`attn-grader config set token` remember the server and the token.")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--task", required=True, help="task id, e.g. sdpa")
@click.option("--server",
              help="URL of the service [env ATTN_GRADER_SERVER; default: `attn-grader config "
                   f"set server`, else {DEFAULT_SERVER}]")
@click.option("--token",
              help="API token from the account page [env ATTN_GRADER_TOKEN; default: "
                   "`attn-grader config set token`]")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="wait for the result, or only print its address")
@click.option("--timeout", default=600.0, show_default=True, help="seconds to wait for grading")
@click.option("--json", "as_json", is_flag=True, help="print the API's JSON instead")
@click.option("--lang", type=click.Choice(LANGUAGES), default=None,
              help="language of the output: en, ru or zh [default: `attn-grader config set lang`, "
                   "else LANG/LC_ALL, else en]")
def submit(file, task, server, token, wait, timeout, as_json, lang):
    """Submit FILE to the grading service and wait for the result."""
    lang = userconfig.language(lang)
    _ = gettext_for(lang)
    server = server or userconfig.current("server")[0] or DEFAULT_SERVER
    token = token or userconfig.current("token")[0]
    if not token:
        raise click.UsageError(
            _("no API token: create one on {account}, then run `attn-grader config set token` (or pass "
              "--token, or set ATTN_GRADER_TOKEN)").format(account=server.rstrip("/") + ACCOUNT_PATH))
    raw = open(file, "rb").read()
    try:
        code = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.ClickException(_("{file} is not UTF-8 text (byte {byte}); save it as UTF-8").format(
            file=file, byte=exc.start)) from None

    def announce(accepted):
        if not as_json:  # stderr: --json keeps stdout one JSON document
            where = accepted.get("page_url") or accepted["url"]
            click.echo(_("submission {id} accepted; result: {url}").format(id=accepted["id"], url=where), err=True)

    try:
        if not wait:
            accepted = create_submission(server, token, task, code,
                                         filename=os.path.basename(file))
            click.echo(json.dumps(accepted, indent=2) if as_json else
                       _("submission {id} accepted; result: {url}").format(
                           id=accepted["id"], url=accepted.get("page_url") or accepted["url"]))
            return
        view = submit_and_wait(server, token, task, code, timeout=timeout,
                               filename=os.path.basename(file), on_accepted=announce)
    except ApiError as exc:
        raise click.ClickException(_error_message(exc, server, lang)) from None
    if as_json:
        click.echo(json.dumps(view, indent=2))
    else:
        print_result(view, lang=lang)
    sys.exit(0 if view.get("passed") else 1)


if __name__ == "__main__":
    submit()
