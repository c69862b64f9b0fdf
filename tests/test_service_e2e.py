"""A running service (`attn-grader serve`): concurrent clients, and the `submit` command."""
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from sqlalchemy import func, select

from service_support import ROOT, env_for, grade_log_lines, running_server, wait_until
from web.db import session_factory
from web.models import GradingJob, Result, Submission


@pytest.fixture
def server(service):
    log = service.tmp_path / "grades.log"
    with running_server(service.config, ATTN_TEST_GRADE_LOG=log) as (url, output):
        yield url, service, log, output


def test_concurrent_clients_every_submission_graded_exactly_once(server):
    url, service, log, output = server
    tokens = [service.people["ada"]["token"], service.people["bob"]["token"]]

    def client(n):
        with requests.Session() as http:
            http.headers["Authorization"] = f"Bearer {tokens[n % 2]}"
            r = http.post(url + "/api/v1/submissions", timeout=30,
                          json={"task": "sdpa" if n % 3 else "mha",
                                "code": f"# ID=s{n}\n# SCORE={n % 11}\n"})
            assert r.status_code == 202, r.text
            return r.json()["id"], n

    with ThreadPoolExecutor(max_workers=10) as pool:
        accepted = list(pool.map(client, range(32)))
    ids = [i for i, _ in accepted]
    assert len(set(ids)) == 32
    # serve's own level is WARNING, yet each request has its access line (docs: Operations, Logs)
    assert any('"logger": "web.access"' in line and '"status": 202' in line for line in output)

    def all_graded():
        with session_factory(service.engine)() as session:
            return session.scalar(select(func.count()).select_from(Submission)
                                  .where(Submission.status == "done")) == 32

    wait_until(all_graded, timeout=120, interval=0.2, what="32 submissions to be graded")
    with session_factory(service.engine)() as session:
        per_submission = dict(session.execute(  # submission id -> number of results
            select(Result.submission_id, func.count(Result.id))
            .group_by(Result.submission_id)).all())
        attempts = session.scalars(select(GradingJob.attempts)).all()
        workers = set(session.scalars(select(GradingJob.worker)))
    assert per_submission == {i: 1 for i in ids}
    assert attempts == [1] * 32 and {w.rsplit(':', 1)[1] for w in workers} <= {'cpu0', 'cpu1'}
    ends = [line[2] for line in grade_log_lines(log) if line[0] == "end"]
    assert sorted(ends) == sorted(f"s{n}" for n in range(32))  # each graded once, none twice
    http = requests.Session()
    http.headers["Authorization"] = f"Bearer {tokens[1]}"
    for submission_id, n in accepted:
        view = http.get(f"{url}/api/v1/submissions/{submission_id}")
        if n % 2 == 1:
            assert (view.status_code, view.json()["score"]) == (200, float(n % 11))
        else:
            assert view.status_code == 404  # ada's, asked for with bob's token


@pytest.mark.parametrize("service", ["sqlite"], indirect=True)  # the client, not the db
def test_submit_command_waits_and_prints_the_result(server, tmp_path):
    url, service, _log, _output = server
    good = tmp_path / "attention.py"
    good.write_text("# SCORE=7\ndef f():\n    return 1\n")
    env = env_for(service.config, ATTN_GRADER_TOKEN=service.people["ada"]["token"])
    run = subprocess.run([sys.executable, "-m", "grader.cli", "submit", str(good), "--task",
                          "sdpa", "--server", url], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1, run.stderr  # graded, not passed
    out = run.stdout  # piped: one line per failing check, one for those that passed (no table)
    assert "task sdpa" in out and "score 7/10 (some checks failed)" in out
    assert "FAIL values 3/6: max abs error 0.3 at [0, 1]\n" in out
    assert re.search(r"^pass .*\bshape\b", out, re.M) and "│" not in out

    run = subprocess.run([sys.executable, "-m", "grader.cli", "submit", str(good), "--task",
                          "nope", "--server", url], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 1 and "unknown task 'nope'" in run.stderr
    bad = tmp_path / "latin1.py"
    bad.write_bytes(b"x = '\xe9'\n")
    run = subprocess.run([sys.executable, "-m", "grader.cli", "submit", str(bad), "--task",
                          "sdpa", "--server", url], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 1 and "not UTF-8" in run.stderr
