"""Scores a student and an instructor can trust: one bug charged once, the same inputs for the same
code, output of any size, a failure reproducible alone, and a score whose making is shown."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from grader.grading import grade_source
from pages_support import ada, db_session, env, grade_queued, prof  # noqa: F401
from web.services.grading import grading_seed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "grader", "tasks")
CORRECT = os.path.join(CORPUS, "sdpa", "corpus", "correct", "matmul_softmax.py")
NO_SCALE = os.path.join(CORPUS, "sdpa", "corpus", "buggy", "no_scale.py")
POLARITY = os.path.join(CORPUS, "sdpa", "corpus", "buggy", "mask_polarity.py")


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_the_missing_scale_costs_the_scale_points_only_and_says_so():
    report = grade_source(_read(NO_SCALE), "sdpa", seed=5, sandbox="auto").to_dict()
    (cause,) = report["causes"]
    assert cause["diagnosis"] == "no_scale" and cause["family"] == "scale"
    assert cause["charged"] == ["scale.default"] and len(cause["knock_on"]) >= 8
    assert report["summary"].startswith("1 bug found: you do not scale the scores")
    for c in report["checks"]:
        if c["id"] in cause["knock_on"]:
            assert not c["passed"] and c["points"] == c["max_points"]
            assert c["message"].startswith("fails because of a bug already counted")
            assert c["message"].count("you do not scale the scores") == 1, c["message"]  # said once
    assert report["score"] == 100 - next(c["max_points"] for c in report["checks"] if c["id"] == "scale.default")


def test_scaling_by_the_values_width_is_named_and_charged_to_scale():
    """1/√(value.size(-1)) is right whenever E = Ev, so only the checks with a wider or narrower
    value see it; the scale read-out and those checks name the same bug, charged once."""
    path = os.path.join(CORPUS, "sdpa", "corpus", "buggy", "scale_value_dim.py")
    report = grade_source(_read(path), "sdpa", seed=5, sandbox="auto").to_dict()
    (cause,) = report["causes"]
    assert (cause["diagnosis"], cause["family"], cause["charged"]) == ("scale_dv", "scale", ["scale.default"])
    assert "output.shapes" in cause["knock_on"]
    read_out = next(c for c in report["checks"] if c["id"] == "scale.default")
    assert "the values' last dimension" in read_out["message"]
    assert report["score"] == 100 - read_out["max_points"]


def test_a_correct_file_that_prints_megabytes_still_scores_full_marks(tmp_path):
    loud = _read(CORRECT).replace("def scaled_dot_product_attention(", "def _quiet(") + (
        "\n\ndef scaled_dot_product_attention(*args, **kwargs):\n"
        "    print('x' * 200_000)\n"
        "    import sys\n"
        "    print('y' * 100_000, file=sys.stderr)\n"
        "    return _quiet(*args, **kwargs)\n")
    report = grade_source(loud, "sdpa", seed=3, sandbox="auto")
    assert report.score == 100, [c.message for c in report.checks if not c.passed and c.max_points]
    assert "more were dropped]" in report.student_stdout and len(report.student_stdout) <= 4200


def test_the_server_seed_follows_the_code_and_the_secret_and_is_never_echoed():
    config = {"SECRET_KEY": "s3cret"}
    code = _read(CORRECT)
    seed = grading_seed(config, "sdpa", code)
    assert seed == grading_seed(config, "sdpa", code)                       # same code: same inputs
    assert seed != grading_seed(config, "sdpa", code + "\n# edited\n")      # any edit: new inputs
    assert seed != grading_seed({"SECRET_KEY": "other"}, "sdpa", code)      # unknowable without the key
    assert seed != grading_seed(config, "mha", code)
    report = grade_source(code, "sdpa", server_seed=seed, sandbox="auto").to_dict()
    assert report["seed_public"] is None and report["score"] == 100
    with pytest.raises(ValueError, match="SECRET_KEY"):
        grading_seed({}, "sdpa", code)


def test_regrading_the_same_code_gives_the_same_score():
    config = {"SECRET_KEY": "s3cret"}
    code = _read(os.path.join(CORPUS, "sdpa", "corpus", "buggy", "float16_inside.py"))
    scores = {grade_source(code, "sdpa", server_seed=grading_seed(config, "sdpa", code), sandbox="auto").score
              for _ in range(2)}
    assert len(scores) == 1


def test_the_grader_version_changes_with_the_checks(tmp_path):
    copy = tmp_path / "copy"
    for package in ("grader", "reference_impl"):
        shutil.copytree(os.path.join(ROOT, package), copy / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    probe = [sys.executable, "-c", "import grader; print(grader.GRADER_VERSION)"]
    before = subprocess.run(probe, cwd=copy, capture_output=True, text=True, check=True).stdout
    import grader
    assert before.strip() == grader.GRADER_VERSION
    with open(copy / "grader" / "checks" / "masks.py", "a") as f:
        f.write("\n# a changed check\n")
    after = subprocess.run(probe, cwd=copy, capture_output=True, text=True, check=True).stdout
    assert after != before


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "grader.cli", *args], capture_output=True, text=True,
                          timeout=240, cwd=ROOT)


def test_a_failing_check_says_how_to_see_it_alone_and_only_shows_its_smallest_case():
    proc = _cli("check", POLARITY, "--task", "sdpa", "--json")
    report = json.loads(proc.stdout)
    failing = [c for c in report["checks"] if not c["passed"] and c["max_points"] and c["points"] == 0]
    assert all(c["details"]["reproduce"] == f"attn-grader check FILE --task sdpa --only {c['id']}" for c in failing)
    proc = _cli("check", POLARITY, "--task", "sdpa", "--only", "mask.bool_broadcast")
    assert proc.returncode == 1
    assert "mask.bool_broadcast: FAIL" in proc.stdout and "wrong polarity" in proc.stdout
    assert "smallest case of the check that still fails" in proc.stdout
    shapes = re.search(r"shapes: query (\S+), key (\S+)", proc.stdout)
    assert shapes  # the case it ran is shown
    assert "diagnosis" not in proc.stdout  # no internal ids for students
    unknown = _cli("check", POLARITY, "--task", "sdpa", "--only", "mask.nonsense")
    assert unknown.returncode == 2 and "unknown check 'mask.nonsense'" in unknown.stderr


def test_only_on_a_passing_check_runs_it_at_its_ordinary_sizes():
    report = grade_source(_read(CORRECT), "sdpa", seed=1, sandbox="auto", only="causal.rectangular")
    ids = [c.id for c in report.checks]
    assert ids[-1] == "causal.rectangular" and report.checks[-1].passed
    assert "output.shapes" not in ids


def test_the_page_shows_the_cause_and_how_a_late_penalty_made_the_score(env, ada):  # noqa: F811
    from web.models import Assignment, Submission

    with db_session(env) as session:
        task = session.query(Assignment).filter_by(task_id="sdpa").first()
        task.late_policy, task.late_penalty = "penalty", 0.25
        slug = task.slug
        session.commit()

    def graded(code, task_id, **_):
        return grade_source(_read(NO_SCALE), "sdpa", seed=2, sandbox="auto")

    response = ada.post(f"/tasks/{slug}", data={"code": _read(NO_SCALE)})
    assert response.status_code == 302
    with db_session(env) as session:
        sub = session.query(Submission).order_by(Submission.id.desc()).first()
        sub.late = True
        session.commit()
    grade_queued(env, grade_fn=graded)
    page = ada.get(response.location).get_data(as_text=True)
    assert "1 bug found: you do not scale the scores" in page
    assert "late penalty of 25 %" in page and "The grader gave 90 / 100" in page and "67.5 / 100" in page


def test_an_instructor_sets_points_per_family_and_scores_follow(env, ada, prof):  # noqa: F811
    from web.models import Assignment, Submission

    base = {"title": "SDPA", "visible": "y", "late_policy": "reject", "feedback": "full"}
    page = prof.get("/instructor/assignments/sdpa/settings").get_data(as_text=True)
    assert "The task's own split is load=5 forbidden=5 output=20" in page  # a translated message, not escaped twice
    bad = prof.post("/instructor/assignments/sdpa/settings", data={**base, "family_points": "output=50 speed=5"})
    text = bad.get_data(as_text=True)
    assert "&#39;speed&#39; is not a scored check family of this task" in text
    bad = prof.post("/instructor/assignments/sdpa/settings", data={**base, "family_points": "output=50"})
    assert "give every family its points (missing: load, forbidden" in bad.get_data(as_text=True)
    points = "load=0 forbidden=0 output=50 dtype=0 scale=50 weights=0 mask=0 causal=0 stability=0 batch=0 " \
             "grad=0 inputs=0"
    assert prof.post("/instructor/assignments/sdpa/settings", data={**base, "family_points": points}).status_code == 302
    with db_session(env) as session:
        assert session.query(Assignment).filter_by(slug="sdpa").one().family_points["scale"] == 50.0

    def graded(code, task_id, **_):
        return grade_source(_read(NO_SCALE), "sdpa", seed=2, sandbox="auto")

    response = ada.post("/tasks/sdpa", data={"code": _read(NO_SCALE)})
    grade_queued(env, grade_fn=graded)
    with db_session(env) as session:
        sub = session.query(Submission).order_by(Submission.id.desc()).first()
        # output: every check a knock-on of the missing scale (full 50); scale: scale.default's 10 of 15 lost
        assert (sub.score, sub.max_score) == (pytest.approx(50 + 50 * 5 / 15), 100.0)
    page = ada.get(response.location).get_data(as_text=True)
    assert "points per check family: output 50, scale 50" in page
    assert prof.post("/instructor/assignments/sdpa/settings", data={**base, "family_points": ""}).status_code == 302
    with db_session(env) as session:
        assert session.query(Assignment).filter_by(slug="sdpa").one().family_points is None
