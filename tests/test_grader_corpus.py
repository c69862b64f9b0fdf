"""Every file of the corpus graded once: correct ones pass with 100, buggy ones fail the family they name.

Each buggy file starts with ``# expect: <family>``. The grades are computed once per session, two
submissions at a time (one sandboxed child each), and each file is then its own test.
"""
import glob
import json
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from grader.grading import grade_source
from grader.tasks import TASKS

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
# Every registered task's corpus: tests/corpus/<task id>/{correct,buggy}/*.py
FILES = sorted(f for task_id in TASKS for f in glob.glob(os.path.join(CORPUS, task_id, "*", "*.py")))
SEED = int(os.environ.get("ATTN_GRADER_TEST_SEED", "12345"))


def expected_family(path):
    with open(path, encoding="utf-8") as f:
        first = f.readline()
    return first.split(":", 1)[1].strip() if first.startswith("# expect:") else None


def _task(path):
    return os.path.relpath(path, CORPUS).split(os.sep)[0]


@pytest.fixture(scope="session")
def corpus_reports():
    def grade(path):
        with open(path, "rb") as f:
            return path, grade_source(f.read(), _task(path), seed=SEED, sandbox="auto").to_dict()
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(grade, FILES))


def test_corpus_size():
    correct = [f for f in FILES if expected_family(f) is None]
    buggy = [f for f in FILES if expected_family(f)]
    assert len([f for f in correct if "/sdpa/" in f]) >= 10
    assert len([f for f in buggy if "/sdpa/" in f]) >= 25
    for task_id in TASKS:  # every task shipped with the grader has a corpus of its own
        assert len([f for f in correct if _task(f) == task_id]) >= 5, task_id
        assert len([f for f in buggy if _task(f) == task_id]) >= 10, task_id
    assert len(correct) + len(buggy) == len(FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: os.path.relpath(p, CORPUS))
def test_verdict(corpus_reports, path):
    report = corpus_reports[path]
    family = expected_family(path)
    scored = [c for c in report["checks"] if c["max_points"] > 0]
    internal = {c["id"]: c["details"]["internal_error"] for c in report["checks"]
                if "internal_error" in c["details"]}
    assert not internal, f"grader errors in {internal}"
    assert sum(c["max_points"] for c in report["checks"]) == report["max_score"] == 100
    assert len(json.dumps(report)) < 200_000
    for c in report["checks"]:
        assert len(json.dumps(c["details"])) < 20_000, c["id"]
    if family is None:
        failed = {c["id"]: c["message"] for c in scored if not c["passed"]}
        assert report["passed"] and report["score"] == 100, failed
    else:
        measured = [c for c in report["checks"] if c["id"].startswith("memory.")]
        if family == "memory" and measured and not measured[0]["details"].get("measured", True):
            pytest.skip("peak memory is read from the run's cgroup, and this sandbox has none")
        failed_families = {c["id"].split(".")[0] for c in scored if not c["passed"]}
        assert not report["passed"] and report["score"] < 100
        assert family in failed_families, f"expected {family} to fail; failed: {sorted(failed_families)}"
        for c in scored:
            if not c["passed"]:
                assert c["message"] and "Traceback (most recent call last)" not in c["message"]
                assert c["points"] == 0
