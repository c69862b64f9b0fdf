"""``attn-grader submit``: send a file to a grading service and wait for its result.

Uses only the JSON API (``POST /api/v1/submissions``, then ``GET`` its URL until graded), so
it works against any server; it needs nothing from the web app itself.
"""
from __future__ import annotations

import json
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


def _request(method: str, url: str, token: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"Bearer {token}", "Accept": "application/json",
        **({"Content-Type": "application/json"} if data is not None else {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read().decode())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read().decode()).get("error") or exc.reason
        except (ValueError, AttributeError):
            message = str(exc.reason)
        raise ApiError(exc.code, message, exc.headers.get("Retry-After")) from None
    except urllib.error.URLError as exc:
        raise ApiError(0, f"cannot reach {url}: {exc.reason}") from None


def submit_and_wait(server: str, token: str, task: str, code: str, *, timeout: float = 600,
                    poll: float = 0.5) -> dict:
    """Submit ``code`` for ``task`` and return the graded submission (the API's JSON)."""
    accepted = _request("POST", server.rstrip("/") + "/api/v1/submissions", token,
                        {"task": task, "code": code})
    deadline = time.monotonic() + timeout
    while True:
        view = _request("GET", accepted["url"], token)
        if view["status"] in ("done", "failed"):
            return view
        if time.monotonic() > deadline:
            raise ApiError(0, f"submission {accepted['id']} not graded after {timeout:.0f} s "
                              f"(status {view['status']}); see {accepted['url']}")
        time.sleep(poll)
        poll = min(poll * 1.5, 3.0)


def format_result(view: dict) -> str:
    """The graded submission as the terminal shows it: a summary, then one line per check."""
    lines = []
    if view["status"] == "failed":
        return f"submission {view['id']} ({view['task']}): not graded: {view.get('error')}"
    score, top = view.get("score") or 0, view.get("max_score") or 0
    verdict = "PASSED" if view.get("passed") else "NOT PASSED"
    lines.append(f"{view['task']}: {score:g}/{top:g} points  {verdict}"
                 + ("  (late)" if view.get("late") else ""))
    if view.get("error"):
        lines.append(f"error: {view['error']}")
    for check in view.get("checks") or []:
        mark = "ok  " if check["passed"] else "FAIL"
        lines.append(f"  {mark} {check['id']:<28} {check['points']:g}/{check['max_points']:g}")
        if check.get("message") and not check["passed"]:
            for text in str(check["message"]).splitlines():
                lines.append(f"       {text}")
    if view.get("feedback") == "hidden":
        lines.append("  (per-check feedback is hidden for this assignment)")
    timings = view.get("timings") or {}
    if timings.get("total_seconds") is not None:
        lines.append(f"graded by {view.get('grader_version')} in {timings['total_seconds']:.1f} s "
                     f"(waited {timings.get('wait_seconds') or 0:.1f} s); submission {view['id']}")
    return "\n".join(lines)


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
        view = submit_and_wait(server, token, task, code, timeout=timeout)
    except ApiError as exc:
        hint = f" (retry after {exc.retry_after} s)" if exc.retry_after else ""
        raise click.ClickException(f"{exc.message}{hint}") from None
    click.echo(json.dumps(view, indent=2) if as_json else format_result(view))
    sys.exit(0 if view.get("passed") else 1)


if __name__ == "__main__":
    submit()
