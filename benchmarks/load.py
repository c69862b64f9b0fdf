"""Load test: simulated students in the last minutes before a deadline.

Each virtual student signs in, opens a task, submits code, polls the result until it is
graded, reads it, answers part of the quiz and submits it, then thinks for a moment and
submits again; every fourth one submits and polls through the JSON API with a token
instead. One instructor keeps reloading the score table, the common-mistakes page and
the job monitor. Two set-ups, started and torn down by this script:

    python benchmarks/load.py --setup serve          # `attn-grader serve`: SQLite, 2 workers
    python benchmarks/load.py --setup scaled         # gunicorn + PostgreSQL + Redis + 2 workers
    python benchmarks/load.py --setup both --students 40 --duration 60 --json out.json
    python benchmarks/load.py --url http://127.0.0.1:5000 --database-url ...   # a running one

Reported: requests/s, p50/p95/p99 latency of pages and of JSON endpoints (status polls and
the API), errors, submissions graded per minute, queue wait (p50/p95), and what was still
waiting at the end. ``--grader fake`` (default) grades with a stand-in that takes
``--grade-seconds`` per submission, to measure the service; ``--grader real`` runs the real
sandboxed grader, to measure grading throughput. The database is seeded with
``--seed-students``/``--seed-submissions`` (default 1,000 / 20,000) so that instructor
pages work at full size. The client runs on the same machine as the servers: on a small box
its own CPU use lowers every number.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import threading
import time
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CORRECT = (ROOT / "grader" / "tasks" / "sdpa" / "corpus" / "correct" / "einsum.py")
BUGGY_NO_SCALE = '''import torch

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    scores = query @ key.transpose(-2, -1)  # forgot the 1/sqrt(d_k)
    return torch.softmax(scores, dim=-1) @ value
'''


def fake_grade(code, task, *, sandbox="auto", device="cpu", seed=None, **_):
    """A stand-in grader: sleeps like a grading run, returns a report of the real shape."""
    time.sleep(float(os.environ.get("LOAD_GRADE_SECONDS", "0.5")))
    scaled = "sqrt" in code or "scale" in code
    return {"task": task, "score": 100.0 if scaled else 60.0, "max_score": 100.0,
            "passed": scaled, "error": None, "grader_version": "load-fake", "sandbox": sandbox,
            "warnings": [], "timings": {"total_s": 0.5}, "checks": [
                {"id": "output.shapes", "passed": True, "points": 60.0, "max_points": 60.0,
                 "message": "shapes match", "details": {}},
                {"id": "scale.default", "passed": scaled, "points": 40.0 if scaled else 0.0,
                 "max_points": 40.0, "message": "" if scaled else "scale: off by sqrt(d_k)",
                 "details": {}}]}


# ---- measurements --------------------------------------------------------------------------

class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.samples: list[tuple[str, str, int, float, float]] = []  # kind, name, status, s, at
        self.signed_in_at: list[float] = []
        self.errors: dict[str, int] = defaultdict(int)

    def add(self, kind, name, status, seconds):
        with self.lock:
            self.samples.append((kind, name, status, seconds, time.monotonic()))
            if status == 0 or status >= 400:
                self.errors[f"{name} {status or 'connection error'}"] += 1


def _pct(values, q):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


class Client:
    """One browser: a requests session that records every request's latency."""

    def __init__(self, base, recorder, ip):
        self.base, self.rec = base.rstrip("/"), recorder
        self.http = requests.Session()
        self.http.headers["X-Forwarded-For"] = ip  # each student is a different address

    def call(self, kind, name, method, path, **kw):
        kw.setdefault("allow_redirects", False)
        kw.setdefault("timeout", 60)
        started = time.perf_counter()
        try:
            response = self.http.request(method, self.base + path, **kw)
        except requests.RequestException:
            self.rec.add(kind, name, 0, time.perf_counter() - started)
            return None
        self.rec.add(kind, name, response.status_code, time.perf_counter() - started)
        return response

    def page(self, name, path):
        return self.call("page", name, "GET", path)

    def csrf(self, response):
        match = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', response.text if response
                          else "")
        return match.group(1) if match else ""

    def sign_in(self, email, password):
        form = self.page("sign-in form", "/sign-in")
        r = self.call("page", "sign-in", "POST", "/sign-in", data={
            "csrf_token": self.csrf(form), "email": email, "password": password})
        with self.rec.lock:
            self.rec.signed_in_at.append(time.monotonic())
        return r is not None and r.status_code == 302


class Forms(HTMLParser):
    """The quiz page's answer forms: action and the first usable value of each field."""

    def __init__(self):
        super().__init__()
        self.forms, self.current, self.select = [], None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.current = {"action": a.get("action", ""), "fields": {}}
            self.forms.append(self.current)
        elif self.current is None:
            return
        elif tag == "input" and a.get("name"):
            kind = a.get("type", "text")
            if kind in ("radio", "checkbox"):
                self.current["fields"].setdefault(a["name"], a.get("value", "on"))
            elif kind == "hidden":
                self.current["fields"][a["name"]] = a.get("value", "")
            elif kind not in ("submit", "file"):
                self.current["fields"].setdefault(a["name"], "1")
        elif tag == "textarea" and a.get("name"):
            self.current["fields"].setdefault(a["name"], "because softmax saturates")
            self.current["code"] = "code-input" in a.get("class", "")
        elif tag == "select" and a.get("name"):
            self.select = a["name"]
        elif tag == "option" and self.select:
            self.current["fields"].setdefault(self.select, a.get("value", ""))

    def handle_endtag(self, tag):
        if tag == "select":
            self.select = None
        elif tag == "form":
            self.current = None


def api_student(client, token, stop, args, rng):
    """A student who submits from the command line (`attn-grader submit`): the JSON API."""
    client.http.headers["Authorization"] = f"Bearer {token}"
    client.call("api", "api tasks", "GET", "/api/v1/tasks")
    while not stop.is_set():
        code = CORRECT.read_text() if rng.random() < 0.6 else BUGGY_NO_SCALE
        r = client.call("api", "api submit", "POST", "/api/v1/submissions",
                        json={"task": "sdpa", "code": code})
        if r is not None and r.status_code == 202:
            url = "/api/v1/submissions/%d" % r.json()["id"]
            deadline = time.monotonic() + args.poll_timeout
            while not stop.is_set() and time.monotonic() < deadline:
                status = client.call("api", "api poll", "GET", url)
                if status is None or status.status_code != 200 or \
                        status.json()["status"] in ("done", "failed"):
                    break
                stop.wait(1.0)
        stop.wait(rng.uniform(*args.think))


def student(client, email, password, stop, args, rng):
    if not client.sign_in(email, password):
        return
    client.page("home", "/")
    quiz_done = False
    while not stop.is_set():
        task = client.page("task page", "/tasks/sdpa")
        code = CORRECT.read_text() if rng.random() < 0.6 else BUGGY_NO_SCALE
        r = client.call("page", "submit", "POST", "/tasks/sdpa",
                        data={"csrf_token": client.csrf(task), "code": code})
        match = re.search(r"/submissions/(\d+)", r.headers.get("Location", "")) if r else None
        if match:
            sub = match.group(1)
            deadline = time.monotonic() + args.poll_timeout
            while not stop.is_set() and time.monotonic() < deadline:
                status = client.call("api", "status poll", "GET",
                                     f"/submissions/{sub}/status.json")
                if status is None or status.status_code != 200 or status.json()["finished"]:
                    break
                stop.wait(1.0)
            client.page("result page", f"/submissions/{sub}")
        if not quiz_done and not stop.is_set():
            quiz_done = take_quiz(client, rng)
        stop.wait(rng.uniform(*args.think))


def take_quiz(client, rng, answers=3) -> bool:
    page = client.page("quiz page", "/quiz/quiz")
    if page is None or page.status_code != 200:
        return False
    if "/quiz/quiz/start" in page.text:
        client.call("page", "quiz start", "POST", "/quiz/quiz/start",
                    data={"csrf_token": client.csrf(page)})
        page = client.page("quiz page", "/quiz/quiz")
    forms = Forms()
    forms.feed(page.text if page is not None else "")
    questions = [f for f in forms.forms if "/questions/" in f["action"] and not f.get("code")]
    for form in rng.sample(questions, min(answers, len(questions))):
        client.call("page", "quiz answer", "POST", form["action"], data=form["fields"])
    submit = next((f for f in forms.forms if f["action"].endswith("/submit")), None)
    if submit:
        client.call("page", "quiz submit", "POST", submit["action"], data=submit["fields"])
    return True


def instructor(client, password, stop):
    if not client.sign_in("prof@example.org", password):
        return
    while not stop.is_set():
        for name, path in (("instructor scores", "/instructor/"),
                           ("instructor mistakes", "/instructor/assignments/sdpa"),
                           ("instructor jobs", "/instructor/jobs")):
            client.page(name, path)
        client.call("api", "metrics", "GET", "/metrics")
        stop.wait(5.0)


def warm_up(url, email, password):
    """One visit to every page first: measure a running service, not its first imports."""
    for who in (email, "prof@example.org"):
        client = Client(url, Recorder(), "10.254.0.1" if who == email else "10.254.0.2")
        client.sign_in(who, password)
        for path in ("/", "/tasks/sdpa", "/quiz/quiz", "/instructor/",
                     "/instructor/assignments/sdpa", "/instructor/jobs"):
            client.page("warm-up", path)


# ---- one run ---------------------------------------------------------------------------------

def run(url, database_url, emails, password, args, label) -> dict:
    from sqlalchemy import select

    from web.db import get_engine, session_factory
    from web.models import GradingJob, utcnow

    rec, stop = Recorder(), threading.Event()
    rng = random.Random(args.seed)
    chosen = rng.sample(emails, min(args.students, len(emails)))
    warm_up(url, emails[-1], password)
    began_db = utcnow()
    tokens = _api_tokens(database_url, chosen[::4])  # every fourth student uses the API
    threads = []
    for i, email in enumerate(chosen):
        client = Client(url, rec, f"10.{i // 250}.{i % 250}.{1 + i % 7}")
        work, extra = (api_student, (tokens[email],)) if email in tokens else \
            (student, (email, password))
        threads.append(threading.Thread(target=work, daemon=True, args=(
            client, *extra, stop, args, random.Random(args.seed + i))))
    threads.append(threading.Thread(target=instructor, daemon=True,
                                    args=(Client(url, rec, "10.255.0.1"), password, stop)))
    started = time.monotonic()
    for i, thread in enumerate(threads):
        thread.start()
        time.sleep(args.ramp / max(1, len(threads)))  # students arrive over the ramp
    stop.wait(max(0.0, args.duration - (time.monotonic() - started)))
    stop.set()
    for thread in threads:
        thread.join(args.poll_timeout + 30)
    elapsed = time.monotonic() - started

    with session_factory(get_engine(database_url))() as db:
        jobs = db.execute(select(GradingJob.status, GradingJob.queued_at, GradingJob.started_at,
                                 GradingJob.finished_at).where(GradingJob.queued_at >= began_db)
                          ).all()
    finished = [j for j in jobs if j.status == "done"]
    waits = [(j.started_at - j.queued_at).total_seconds() for j in jobs if j.started_at]
    by_kind, steady = defaultdict(list), defaultdict(list)
    everyone_in = max(rec.signed_in_at, default=started)  # the sign-in rush is over
    for kind, _name, status, seconds, at in rec.samples:
        if status and status < 400:
            by_kind[kind].append(seconds)
            if at > everyone_in:
                steady[kind].append(seconds)
    summary = {
        "setup": label, "students": len(chosen), "duration_s": round(elapsed, 1),
        "requests": len(rec.samples), "requests_per_s": round(len(rec.samples) / elapsed, 1),
        "errors": sum(rec.errors.values()), "error_kinds": dict(rec.errors),
        "submitted": len(jobs), "graded": len(finished),
        "graded_per_min": round(len(finished) / (elapsed / 60), 1),
        "still_waiting": sum(j.status in ("queued", "running") for j in jobs),
        "failed": sum(j.status == "failed" for j in jobs),
        "queue_wait_p50_s": _round(_pct(waits, 50)), "queue_wait_p95_s": _round(_pct(waits, 95)),
    }
    for kind, values in by_kind.items():
        for q in (50, 95, 99):
            summary[f"{kind}_p{q}_ms"] = _round(1000 * _pct(values, q))
    summary["steady_after_s"] = round(everyone_in - started, 1)
    for kind, values in steady.items():
        for q in (50, 95, 99):
            summary[f"steady_{kind}_p{q}_ms"] = _round(1000 * _pct(values, q))
    per_name = defaultdict(list)
    for _kind, name, status, seconds, _at in rec.samples:
        if status and status < 400:
            per_name[name].append(seconds)
    summary["by_request_ms"] = {name: {"n": len(v), "p50": _round(1000 * _pct(v, 50)),
                                       "p95": _round(1000 * _pct(v, 95))}
                                for name, v in sorted(per_name.items())}
    return summary


def _api_tokens(database_url, emails) -> dict:
    from sqlalchemy import select

    from web.auth import issue_token
    from web.db import get_engine, session_factory
    from web.models import User

    with session_factory(get_engine(database_url))() as db:
        users = db.scalars(select(User).where(User.email.in_(emails))).all()
        tokens = {u.email: issue_token(db, u, "load test") for u in users}
        db.commit()
    return tokens


def _round(x):
    return None if x is None else round(x, 1)


def report(summary: dict) -> None:
    s = summary
    print(f"\n== {s['setup']}: {s['students']} students for {s['duration_s']} s ==")
    print(f"requests {s['requests']} ({s['requests_per_s']}/s), errors {s['errors']} "
          f"{s['error_kinds'] or ''}")
    rush = f"after the sign-in rush ({s['steady_after_s']} s)"
    for prefix, what in (("", "all"), ("steady_", rush)):
        for kind in ("page", "api"):
            if f"{prefix}{kind}_p50_ms" in s:
                print(f"{kind:5} latency, {what}: p50 {s[f'{prefix}{kind}_p50_ms']} ms  "
                      f"p95 {s[f'{prefix}{kind}_p95_ms']} ms  p99 {s[f'{prefix}{kind}_p99_ms']} ms")
    print(f"submitted {s['submitted']}, graded {s['graded']} ({s['graded_per_min']}/min), "
          f"failed {s['failed']}, still waiting {s['still_waiting']}; queue wait p50 "
          f"{s['queue_wait_p50_s']} s, p95 {s['queue_wait_p95_s']} s")
    for name, v in s["by_request_ms"].items():
        print(f"   {name:22} n={v['n']:5}  p50 {v['p50']:8} ms  p95 {v['p95']:8} ms")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--setup", choices=["serve", "scaled", "both"], default="serve")
    p.add_argument("--url", help="load a running server instead (needs --database-url)")
    p.add_argument("--database-url", help="the running server's database (for the job numbers)")
    p.add_argument("--students", type=int, default=40, help="concurrent simulated students")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    p.add_argument("--ramp", type=float, default=5.0, help="seconds over which students arrive")
    p.add_argument("--think", type=float, nargs=2, default=(2.0, 6.0), metavar=("MIN", "MAX"),
                   help="seconds a student waits between submissions")
    p.add_argument("--poll-timeout", type=float, default=120.0)
    p.add_argument("--grader", choices=["fake", "real"], default="fake")
    p.add_argument("--grade-seconds", type=float, default=0.5, help="the fake grader's time")
    p.add_argument("--workers", type=int, default=2, help="grading worker processes")
    p.add_argument("--web-processes", type=int, default=2, help="gunicorn workers (scaled)")
    p.add_argument("--seed-students", type=int, default=1000)
    p.add_argument("--seed-submissions", type=int, default=20000)
    p.add_argument("--password", default="attention-is-all-you-need")
    p.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/test",
                   help="PostgreSQL server for the scaled set-up (a database is created)")
    p.add_argument("--redis", default="redis://127.0.0.1:6379/12")
    p.add_argument("--redis-limits", default="redis://127.0.0.1:6379/11")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep", action="store_true", help="keep the temporary folders")
    p.add_argument("--json", help="also write the summaries to this file")
    args = p.parse_args(argv)

    from load_servers import Setup  # next to this file; workers importing fake_grade skip it

    summaries = []
    if args.url:
        if not args.database_url:
            p.error("--url needs --database-url to count graded jobs")
        emails = [e.strip() for e in sys.stdin] if not sys.stdin.isatty() else []
        if not emails:
            p.error("with --url, pipe the students' emails on standard input")
        summaries.append(run(args.url, args.database_url, emails, args.password, args, args.url))
    for kind in (["serve", "scaled"] if args.setup == "both" else [args.setup]) * (not args.url):
        setup = Setup(kind, args)
        try:
            made = setup.start(args.password)
            label = ("attn-grader serve (SQLite, %d workers)" % args.workers if kind == "serve"
                     else "gunicorn x%d + PostgreSQL + Redis + %d workers"
                     % (args.web_processes, args.workers))
            summaries.append(run(setup.url, setup.database_url, made["emails"], args.password,
                                 args, f"{label}, {args.grader} grader"))
        finally:
            setup.close()
    for summary in summaries:
        report(summary)
    if args.json:
        Path(args.json).write_text(json.dumps(summaries, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
