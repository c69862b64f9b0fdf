"""``attn-grader submit``: send a file to a grading service and wait for its result.

Uses only the JSON API (``POST /api/v1/submissions``, then ``GET`` its URL with ``?wait=``
until graded: the server answers as soon as the result is stored), so it works against any
server; one that does not hold the request simply gets polled with a growing pause.
"""
from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request

import click

DEFAULT_SERVER = "http://127.0.0.1:5000"


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


def submit_and_wait(server: str, token: str, task: str, code: str, *, timeout: float = 600,
                    poll: float = 0.5, filename: str = "submission.py") -> dict:
    """Submit ``code`` for ``task`` and return the graded submission (the API's JSON).

    ``filename`` tells the server what ``code`` is: a name ending in .ipynb makes it a notebook.
    Each status request asks the server to hold it until the result is stored
    (``?wait=``); only when an answer comes back early and unfinished (an older server, or
    one with every waiting slot taken) does the client pause ``poll`` s, growing, before the next.
    """
    accepted = _request("POST", server.rstrip("/") + "/api/v1/submissions", token,
                        {"task": task, "code": code, "filename": filename})
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


def print_result(view: dict, console=None) -> None:
    """The graded submission in the layout of ``attn-grader check``: a table of checks, then
    the first failing traceback, the score, errors and notes."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    if view["status"] == "failed":
        console.print(f"[red]submission {view['id']} ({view['task']}) was not graded:[/] "
                      f"{view.get('error')}", highlight=False)
        return
    table = Table(title=f"submission {view['id']} — task {view['task']}", expand=True)
    table.add_column("check", no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column("points", justify="right", no_wrap=True)
    table.add_column("what was found", ratio=1)
    for c in view.get("checks") or []:
        details = c.get("details") or {}
        mark = "[green]pass[/]" if c["passed"] else \
            ("[dim]skip[/]" if details.get("skipped") else "[red]FAIL[/]")
        points = f"{c['points']:g}/{c['max_points']:g}" if c["max_points"] else "-"
        table.add_row(c["id"], mark, points, c.get("message") or "")
    if view.get("checks"):
        console.print(table)
    elif view.get("feedback") == "hidden":
        console.print("[dim]per-check feedback is hidden for this assignment[/]")
    for c in view.get("checks") or []:
        traceback = (c.get("details") or {}).get("traceback")
        if traceback and not c["passed"]:
            console.print(f"[bold]{c['id']}[/]: your traceback", highlight=False)
            console.print(traceback, markup=False, highlight=False)
            break
    colour = "green" if view.get("passed") else "red"
    summary = "all scored checks passed" if view.get("passed") else "some checks failed"
    late = ", late" if view.get("late") else ""
    console.print(f"[bold {colour}]score {view.get('score') or 0:g}/{view.get('max_score') or 0:g}"
                  f"[/] ({summary}{late})")
    if view.get("error"):
        console.print(f"[red]{view['error']}[/]", highlight=False)
    notebook = view.get("notebook")
    if notebook:
        console.print(f"{notebook['function']}() is defined in cell {notebook['function_cell']}"
                      if notebook.get("function_cell") else
                      f"no cell of the notebook defines {notebook['function']}()", highlight=False)
    timings = view.get("timings") or {}
    if timings.get("total_seconds") is not None:
        console.print(f"[dim]graded on the server with a secret seed by grader "
                      f"{view.get('grader_version')} in {timings['total_seconds']:.1f} s "
                      f"(waited {timings.get('wait_seconds') or 0:.1f} s)[/]")


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--task", required=True, help="task id, e.g. sdpa")
@click.option("--server", envvar="ATTN_GRADER_SERVER", default=DEFAULT_SERVER, show_default=True)
@click.option("--token", envvar="ATTN_GRADER_TOKEN",
              help="API token [env ATTN_GRADER_TOKEN]; get one from your instructor or "
                   "`attn-grader users token EMAIL`")
@click.option("--timeout", default=600.0, show_default=True, help="seconds to wait for grading")
@click.option("--json", "as_json", is_flag=True, help="print the API's JSON instead")
def submit(file, task, server, token, timeout, as_json):
    """Submit FILE to a grading service and wait for the result."""
    if not token:
        raise click.UsageError("no API token: pass --token or set ATTN_GRADER_TOKEN")
    raw = open(file, "rb").read()
    try:
        code = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.ClickException(f"{file} is not UTF-8 text (byte {exc.start}); "
                                   "save it as UTF-8") from None
    try:
        view = submit_and_wait(server, token, task, code, timeout=timeout,
                               filename=os.path.basename(file))
    except ApiError as exc:
        hint = f" (retry after {exc.retry_after} s)" if exc.retry_after else ""
        raise click.ClickException(f"{exc.message}{hint}") from None
    if as_json:
        click.echo(json.dumps(view, indent=2))
    else:
        print_result(view)
    sys.exit(0 if view.get("passed") else 1)


if __name__ == "__main__":
    submit()
