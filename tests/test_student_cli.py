"""The students' command line: the help they see, remembered settings, `check`'s warnings,
`submit`'s messages, and the student package (`pip install attn-grader`, no server)."""
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.client import ApiError, _error_message, wait_phrase
from service_support import ROOT, env_for, running_server

CORRECT_SDPA = ROOT / "grader" / "tasks" / "sdpa" / "corpus" / "correct" / "matmul_softmax.py"
CLI = [sys.executable, "-m", "grader.cli"]


@pytest.fixture
def settings_file(tmp_path, monkeypatch):
    path = tmp_path / "settings" / "config.ini"
    monkeypatch.setenv("ATTN_GRADER_CONFIG", str(path))
    monkeypatch.delenv("ATTN_GRADER_SERVER", raising=False)
    monkeypatch.delenv("ATTN_GRADER_TOKEN", raising=False)
    return path


def test_help_lists_the_student_commands_before_the_server_ones():
    out = CliRunner().invoke(main, ["--help"]).output
    student, server = out.index("Commands for students"), out.index("instructors and operators")
    assert student < server
    for name in ("check", "submit", "template", "tasks", "config"):
        assert student < out.index(f"  {name} ") < server, name
    for name in ("serve", "db", "users", "regrade", "worker"):
        assert out.index(f"  {name} ") > server, name


def test_submit_help_sends_students_to_the_account_page_not_the_database():
    out = " ".join(CliRunner().invoke(main, ["submit", "--help"]).output.split())
    assert "account page" in out and "users token" not in out


def test_tasks_shows_the_spec_in_the_chosen_language(settings_file, monkeypatch):
    monkeypatch.delenv("ATTN_GRADER_LANG")  # the suite's English, which `config set lang` yields to
    runner = CliRunner()
    assert "масштабированное скалярное внимание" in runner.invoke(main, ["tasks", "sdpa", "--lang", "ru"]).output
    assert "缩放点积注意力" in runner.invoke(main, ["tasks", "sdpa", "--lang", "zh"]).output
    assert runner.invoke(main, ["config", "set", "lang", "ru"]).exit_code == 0
    assert "Задание" in runner.invoke(main, ["tasks", "mha"]).output  # the remembered language
    assert "Task" in runner.invoke(main, ["tasks", "mha", "--lang", "en"]).output


def test_config_remembers_the_server_and_a_private_token(settings_file):
    runner = CliRunner()
    result = runner.invoke(main, ["config", "set", "server", "https://grader.example.edu/"])
    assert result.exit_code == 0, result.output
    assert "https://grader.example.edu" in result.output
    result = runner.invoke(main, ["config", "set", "token"], input="s3cret-token-value\n")
    assert result.exit_code == 0 and "s3cret" not in result.output
    assert stat.S_IMODE(settings_file.stat().st_mode) == 0o600
    shown = runner.invoke(main, ["config", "show"]).output
    assert "server: https://grader.example.edu  [from file]" in shown
    assert "s3cret-token-value" not in shown and "18 characters" in shown
    assert "[from ATTN_GRADER_SERVER]" in runner.invoke(
        main, ["config", "show"], env={"ATTN_GRADER_SERVER": "http://other:5000"}).output
    assert runner.invoke(main, ["config", "unset", "server"]).exit_code == 0
    assert "server: not set" in runner.invoke(main, ["config", "show"]).output


def test_config_refuses_a_server_that_is_not_a_web_address(settings_file):
    result = CliRunner().invoke(main, ["config", "set", "server", "grader.example.edu"])
    assert result.exit_code == 2 and "not a web address" in result.output
    assert not settings_file.exists()


def test_waits_are_said_in_minutes_and_only_where_waiting_helps():
    assert [wait_phrase(s) for s in (40, 89, 3198, 7200, 7500)] == \
        ["40 s", "89 s", "54 min", "2 h", "2 h 5 min"]
    server = "http://grader.test"
    # Flask-Limiter sends Retry-After on every response of a limited route: a bad token or a
    # too-large file must not tell the student to retry.
    bad_token = _error_message(ApiError(401, "invalid or revoked API token", "60"), server)
    assert "retry" not in bad_token.lower() and "try again" not in bad_token
    assert "http://grader.test/account" in bad_token and "config set token" in bad_token
    too_large = _error_message(ApiError(413, "the file is 1048576 bytes; the limit is 65536 "
                                             "bytes", "60"), server)
    assert too_large == "the file is 1048576 bytes; the limit is 65536 bytes"
    limited = _error_message(ApiError(429, "rate limited", "3198"), server)
    assert limited == "rate limited (try again in 54 min)"
    # the units are the grader catalogue's: the CLI and the web's refusals say them in the reader's language
    from grader.i18n import render
    assert [render(wait_phrase(s), "ru") for s in (40, 3198, 7500)] == ["40 с", "54 мин", "2 ч 5 мин"]
    assert render(wait_phrase(7200), "zh") == "2 小时"
    assert _error_message(ApiError(429, "rate limited", "3198"), server, "zh") == "rate limited（请在 54 分钟 后重试）"
    assert "создайте новый на http://grader.test/account" in _error_message(
        ApiError(401, "invalid or revoked API token", "60"), server, "ru")


def test_check_calls_an_empty_file_a_failure(tmp_path):
    empty = tmp_path / "attention.py"
    empty.write_text("\n  \n")
    run = subprocess.run([*CLI, "check", str(empty), "--task", "sdpa"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 1
    assert "is empty" in run.stderr and "attn-grader template sdpa" in run.stderr
    assert "load.source" not in run.stdout
    run = subprocess.run([*CLI, "check", str(empty), "--task", "sdpa", "--json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    report = json.loads(run.stdout)
    assert (run.returncode, report["passed"], report["score"]) == (1, False, 0)
    assert "is empty" in report["error"]


def test_check_says_a_syntax_error_once_and_folds_the_checks_it_skipped(tmp_path):
    broken = tmp_path / "attention.py"
    broken.write_text("import torch\ndef scaled_dot_product_attention(q, k, v):\n    return (\n")
    run = subprocess.run([*CLI, "check", str(broken), "--task", "sdpa"], capture_output=True,
                         text=True, cwd=ROOT, timeout=240, env={**os.environ, "COLUMNS": "200"})
    assert run.returncode == 1
    assert run.stdout.count("Python cannot parse your file") == 1
    assert "(line 3, column 12)" in run.stdout
    # the line, and a caret under the spot where Python stopped reading
    assert "3 |     return (\n" + " " * len("3 |     return ") + "^\n" in run.stdout
    # every check it could not run folded into one row (their number grows with the task's checks)
    folded = re.findall(r"\((\d+) more\)", run.stdout)
    assert len(folded) == 1 and int(folded[0]) >= 20, run.stdout
    assert "not run: the submission could not be loaded" in run.stdout


def test_check_warns_that_the_server_refuses_a_file_over_its_limit(tmp_path):
    big = tmp_path / "attention.py"
    big.write_text(CORRECT_SDPA.read_text() + ("# padding " + "x" * 60 + "\n") * 1100)
    run = subprocess.run([*CLI, "check", str(big), "--task", "sdpa", "--json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=240)
    report = json.loads(run.stdout)
    assert report["passed"], report
    assert any("refuses submissions over 65536 bytes" in w for w in report["warnings"])


@pytest.mark.parametrize("service", ["sqlite"], indirect=True)
def test_submit_uses_the_remembered_server_and_prints_the_result_page(service, tmp_path):
    settings = tmp_path / "config.ini"
    good = tmp_path / "attention.py"
    good.write_text("# SCORE=10\n")
    with running_server(service.config, ATTN_GRADER_PAGES="true") as (url, _output):
        env = env_for(service.config, ATTN_GRADER_CONFIG=str(settings))
        subprocess.run([*CLI, "config", "set", "server", url], env=env, cwd=ROOT, check=True,
                       capture_output=True, timeout=60)
        subprocess.run([*CLI, "config", "set", "token", service.people["ada"]["token"]], env=env,
                       cwd=ROOT, check=True, capture_output=True, timeout=60)
        run = subprocess.run([*CLI, "submit", str(good), "--task", "sdpa"], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert re.search(rf"result: {re.escape(url)}/s/[0-9a-f]{{16}}\b", run.stderr), run.stderr
        assert "score 10/10" in " ".join(run.stdout.split())

        run = subprocess.run([*CLI, "submit", str(good), "--task", "sdpa", "--no-wait"],
                             env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0 and re.search(rf"result: {re.escape(url)}/s/[0-9a-f]{{16}}\b",
                                                 run.stdout), run.stdout

        run = subprocess.run([*CLI, "submit", str(good), "--task", "sdpa", "--token", "wrong"],
                             env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert run.returncode == 1 and "refused the API token" in run.stderr
        assert "retry" not in run.stderr.lower() and f"{url}/account" in run.stderr

        big = tmp_path / "big.py"
        big.write_text("# SCORE=10\n" + "#" * 70_000 + "\n")
        run = subprocess.run([*CLI, "submit", str(big), "--task", "sdpa"], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 1 and "the limit is 65536 bytes" in run.stderr
        assert "retry" not in run.stderr.lower() and "try again" not in run.stderr


STUDENT_DEPS = ["torch==2.13.0", "numpy", "click", "rich", "nbformat", "pyseccomp"]


def _share_torch(venv: Path) -> None:
    """torch and the packages it needs, linked from this environment through a ``.pth`` file
    instead of unpacked again (the wheel's 44 s were a third of this test): pip sees them as
    installed, and nothing else of this environment (none of the [server] extra) comes along."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    shared = venv / "shared-torch"
    shared.mkdir()
    todo, seen = ["torch"], set()
    while todo:
        dist = metadata.distribution(todo.pop())
        name = canonicalize_name(dist.metadata["Name"])
        if name in seen:
            continue
        seen.add(name)
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
        for top in {f.parts[0] for f in dist.files or []} - {"..", "__pycache__"}:
            if not (shared / top).exists():
                (shared / top).symlink_to(dist.locate_file(top))
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "shared-torch.pth").write_text(f"{shared}\n")


@pytest.mark.slow
@pytest.mark.parametrize("service", ["sqlite"], indirect=True)
def test_the_student_package_alone_checks_and_submits(service, tmp_path):
    """A fresh virtual environment with the project installed without its [server] extra."""
    venv = tmp_path / "student-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    _share_torch(venv)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, *STUDENT_DEPS, "-c", str(ROOT / "constraints.txt")], check=True,
                   timeout=600)
    # --no-deps: exactly what `pip install attn-grader` pulls in, which is STUDENT_DEPS
    subprocess.run([*pip, "--no-deps", str(ROOT)], check=True, timeout=600, cwd=tmp_path)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ATTN_GRADER_") and k != "PYTHONPATH"}
    env["ATTN_GRADER_CONFIG"] = str(tmp_path / "student.ini")
    cli = [str(venv / "bin" / "attn-grader")]

    def student(*args):
        return subprocess.run([*cli, *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)

    project = json.loads(subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import json, importlib.metadata as m; "
         "print(json.dumps(m.requires('attn-grader')))"], capture_output=True, text=True,
        check=True, env=env, cwd=tmp_path).stdout)
    required = sorted(r.split(">")[0].split("=")[0].split(";")[0].strip() for r in project
                      if "extra ==" not in r)
    assert required == sorted(d.split("=")[0] for d in STUDENT_DEPS)
    for server_module in ("flask", "sqlalchemy", "matplotlib"):
        probe = subprocess.run([str(venv / "bin" / "python"), "-c", f"import {server_module}"],
                               env=env, cwd=tmp_path, capture_output=True)
        assert probe.returncode != 0, f"{server_module} is installed in the student package"

    run = student("check", str(CORRECT_SDPA), "--task", "sdpa", "--json")
    assert run.returncode == 0 and json.loads(run.stdout)["passed"], run.stderr
    run = student("serve")
    assert run.returncode == 1 and "attn-grader[server]" in run.stderr

    attempt = tmp_path / "attention.py"
    attempt.write_text("# SCORE=7\n")
    with running_server(service.config, ATTN_GRADER_PAGES="true") as (url, _output):
        assert student("config", "set", "server", url).returncode == 0
        run = student("submit", str(attempt), "--task", "sdpa", "--token",
                      service.people["ada"]["token"])
        assert run.returncode == 1, run.stderr  # graded, not passed
        assert "score 7/10" in " ".join(run.stdout.split()) and "result: " + url in run.stderr
