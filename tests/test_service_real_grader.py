"""The worker with the real grader (grader.grading.grade_source) behind the API."""
from pathlib import Path

import pytest

import grader
from web import create_app
from web.dispatch.worker import GradingWorker
from web.services.grading import load_grade_function

CORRECT = Path(__file__).parent.parent / "grader" / "tasks" / "sdpa" / "corpus" / "correct" / "matmul_softmax.py"
pytestmark = [pytest.mark.slow, pytest.mark.parametrize("service", ["sqlite"], indirect=True)]


def test_real_grades_and_a_broken_program_is_a_result(service):
    config = {**service.config, "GRADE_FUNCTION": "grader.grading:grade_source",
              "SANDBOX": "auto"}
    app = create_app(config)
    client = app.test_client()
    headers = {"Authorization": f"Bearer {service.people['ada']['token']}"}
    worker = GradingWorker(service.engine, config,
                           grade_fn=load_grade_function(config["GRADE_FUNCTION"]))
    good = client.post("/api/v1/submissions", headers=headers,
                       json={"task": "sdpa", "code": CORRECT.read_text()}).get_json()
    broken = client.post("/api/v1/submissions", headers=headers, json={
        "task": "sdpa", "code": "def scaled_dot_product_attention(q, k, v:\n    return q\n"}
    ).get_json()
    assert [worker.run_once(), worker.run_once(), worker.run_once()] == ["done", "done", None]

    view = client.get(good["url"], headers=headers).get_json()
    assert (view["status"], view["passed"], view["score"]) == ("done", True, view["max_score"])
    assert view["grader_version"] == grader.GRADER_VERSION and len(view["checks"]) > 10
    # every check: its verdict, its English message, and (grader/i18n.py) the message's template
    # and arguments, so a client can show it in its reader's language
    assert all(set(c) == {"id", "passed", "points", "max_points", "message", "details", "message_i18n"}
               and c["message_i18n"]["t"] for c in view["checks"])

    view = client.get(broken["url"], headers=headers).get_json()
    assert (view["status"], view["passed"], view["score"]) == ("done", False, 0)
    assert view["error"] and view["timings"]["attempts"] == 1  # a result, not a retry
