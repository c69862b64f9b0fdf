"""``attn-grader check`` as students and other tools use it: subprocesses only.

The implementations under tests/corpus/elsewhere follow other codebases' conventions
(nanoGPT, d2l, x-transformers, tiled online softmax, the Annotated Transformer, ...). Every one
of them is graded in-process under three seeds (test_grader_corpus.py) and at the pre-check's
level against the server's (test_local_precheck.py); here one correct file per task and each
buggy one go through the command line's JSON and exit status, which is what a tool reads.
"""
import glob
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLI = [sys.executable, "-m", "grader.cli"]
ELSEWHERE = sorted(glob.glob(os.path.join(HERE, "corpus", "elsewhere", "*", "*.py")))
CORRECT_SDPA = os.path.join(os.path.dirname(HERE), "grader", "tasks", "sdpa", "corpus", "correct", "matmul_softmax.py")


def run(*args, cwd=ROOT):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, timeout=240)


def expected_family(path):
    with open(path, encoding="utf-8") as f:
        for line in f.readlines()[:3]:
            if line.startswith("# expect:"):
                return line.split(":", 1)[1].strip()
    return None


def _through_the_cli():
    """Each buggy file from elsewhere, and the first correct one of each task."""
    chosen, correct_seen = [], set()
    for path in ELSEWHERE:
        task = os.path.basename(os.path.dirname(path))
        if expected_family(path):
            chosen.append(path)
        elif task not in correct_seen:
            chosen.append(path)
            correct_seen.add(task)
    return chosen


@pytest.fixture(scope="module")
def elsewhere_results():
    def check(path):
        task = os.path.basename(os.path.dirname(path))
        return path, run("check", path, "--task", task, "--json")
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(check, _through_the_cli()))


def test_the_cli_sample_has_both_verdicts_of_every_task():
    chosen = _through_the_cli()
    for task in {os.path.basename(os.path.dirname(p)) for p in ELSEWHERE}:
        mine = [p for p in chosen if os.path.basename(os.path.dirname(p)) == task]
        assert any(expected_family(p) is None for p in mine), task
    assert {p for p in ELSEWHERE if expected_family(p)} <= set(chosen)


@pytest.mark.parametrize("path", _through_the_cli(), ids=lambda p: os.path.relpath(p, HERE))
def test_implementations_from_elsewhere(elsewhere_results, path):
    proc = elsewhere_results[path]
    report = json.loads(proc.stdout)  # exactly one JSON object on stdout
    assert set(report) >= {"task", "score", "max_score", "passed", "checks", "error"}
    family = expected_family(path)
    if family is None:
        assert proc.returncode == 0 and report["passed"] and report["score"] == 100, \
            [c["message"] for c in report["checks"] if not c["passed"] and c["max_points"]]
    else:
        assert proc.returncode == 1 and not report["passed"]
        assert family in {c["id"].split(".")[0] for c in report["checks"] if not c["passed"] and c["max_points"]}


def test_table_output_and_public_seed(tmp_path):
    proc = run("check", CORRECT_SDPA, "--task", "sdpa", "--seed", "7")
    assert proc.returncode == 0, proc.stderr
    assert "score 100/100" in proc.stdout and "scale.default" in proc.stdout
    assert "public seed 7" in proc.stdout


def test_failing_file_exits_1_and_names_the_bug(tmp_path):
    bad = tmp_path / "bad.py"
    with open(CORRECT_SDPA, encoding="utf-8") as f:
        bad.write_text(f.read().replace("math.sqrt(query.size(-1))", "query.size(-1)"))
    proc = run("check", str(bad), "--task", "sdpa", "--json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    scale = next(c for c in report["checks"] if c["id"] == "scale.default")
    assert not scale["passed"] and "1/d_k" in scale["message"]


def test_usage_errors_exit_2(tmp_path):
    assert run("check", str(tmp_path / "missing.py"), "--task", "sdpa").returncode == 2
    assert run("check", CORRECT_SDPA, "--task", "attention").returncode == 2
    assert run("check", CORRECT_SDPA).returncode == 2


def test_unloadable_file_exits_1_with_zero_score(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def scaled_dot_product_attention(q, k, v:\n")
    proc = run("check", str(broken), "--task", "sdpa", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["score"] == 0 and "line 1" in report["error"]
    # 20 KB of 1+1+...: ast.parse raises RecursionError; the answer is still a JSON report
    deep = os.path.join(HERE, "integrity", "parse_recursion.py")
    proc = run("check", deep, "--task", "sdpa", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-1000:]
    assert report["score"] == 0 and "nest too deeply" in report["error"]


def test_strict_runs_or_refuses_with_exit_2():
    proc = run("check", CORRECT_SDPA, "--task", "sdpa", "--json", "--sandbox", "strict")
    if proc.returncode == 2:
        assert "strict" in proc.stdout + proc.stderr or "isolation" in proc.stdout + proc.stderr
    else:
        report = json.loads(proc.stdout)
        assert proc.returncode == 0 and report["sandbox"] == "strict"


def test_template_and_tasks(tmp_path):
    for task, name in (("sdpa", "scaled_dot_product_attention"), ("mha", "multi_head_attention")):
        template = run("template", task)
        assert template.returncode == 0 and f"def {name}(" in template.stdout
        path = tmp_path / f"{task}.py"
        path.write_text(template.stdout)
        report = json.loads(run("check", str(path), "--task", task, "--json").stdout)
        checks = {c["id"]: c for c in report["checks"]}
        assert checks["load.import"]["passed"] and checks["load.signature"]["passed"]
        assert not report["passed"] and "Ellipsis" in next(c for c in report["checks"] if c["id"].startswith("output."))["message"]
        spec = run("tasks", task)
        assert spec.returncode == 0 and name in spec.stdout
    listing = run("tasks")
    assert "sdpa" in listing.stdout and "mha" in listing.stdout
