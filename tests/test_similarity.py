"""Similarity review: copydetect's winnowing over each student's latest submission, the template
left out, computed in the background and shown side by side."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import func, select

from pages_support import db_session, env, prof, sign_in  # noqa: F401  (fixtures)
from service_support import wait_until
from web.models import SimilarityReport, User
from web.services import similarity
from web.services.courses import find_assignment
from web.services.submissions import submit
from web.services.users import add_user

CORRECT = Path(__file__).parent.parent / "grader" / "tasks" / "sdpa" / "corpus" / "correct"
ORIGINAL = (CORRECT / "matmul_softmax.py").read_text()


def disguised(code: str) -> str:
    """The same program with its names changed, re-indented and with comments added."""
    for old, new in (("scores", "logits"), ("weights", "probabilities"), ("query", "q_in"), ("key", "k_in")):
        code = re.sub(rf"\b{old}\b", new, code)
    lines = [line.replace("    ", "  ") + ("  # my own idea" if line.strip().startswith("return") else "")
             for line in code.splitlines()]
    return "# Homework 3, all my own work\n" + "\n".join(lines) + "\n"


def from_template(body: list[str], lang: str = "en") -> str:
    """The sdpa template (in ``lang``) with its placeholder lines replaced by ``body``."""
    from grader.tasks import template

    lines = [line for line in template("sdpa", lang).splitlines()
             if not line.strip().startswith(("scores = ...", "weights = ...", "return ..."))]
    return "\n".join(lines + [f"    {line}" for line in body]) + "\n"


# ---- the detector -----------------------------------------------------------------------------

def test_a_disguised_copy_is_found_and_independent_work_is_not():
    codes = {1: ORIGINAL, 2: disguised(ORIGINAL), 3: (CORRECT / "einsum.py").read_text(),
             4: (CORRECT / "loop_rows.py").read_text()}
    pairs = similarity.similar_pairs(codes, similarity.template_fingerprints("sdpa"), 0.5,
                                     similarity.template_text("sdpa"))
    assert [(p["a"], p["b"]) for p in pairs] == [(1, 2)]
    assert pairs[0]["similarity_a"] > 0.8 and pairs[0]["similarity_b"] > 0.8
    starts, ends = pairs[0]["slices_b"]
    assert starts and all(0 <= s < e <= len(codes[2]) for s, e in zip(starts, ends))


def test_the_templates_own_code_is_not_evidence():
    one = from_template(["scores = query @ key.transpose(-2, -1) * (scale or 1 / math.sqrt(query.shape[-1]))",
                         "weights = torch.softmax(scores, dim=-1)", "return weights @ value"])
    two = from_template(["s = torch.einsum('...le,...se->...ls', query, key) / math.sqrt(query.size(-1))",
                         "if attn_mask is not None:", "    s = s + attn_mask",
                         "return torch.einsum('...ls,...sv->...lv', s.softmax(-1), value)"])
    with_template = similarity.similar_pairs({1: one, 2: two}, similarity.template_fingerprints("sdpa"), 0.0,
                                             similarity.template_text("sdpa"))
    without = similarity.similar_pairs({1: one, 2: two}, [], 0.0)
    assert without[0]["similarity_a"] > 0.5  # the handed-out signature and docstring alone look alike
    assert not with_template or max(with_template[0]["similarity_a"], with_template[0]["similarity_b"]) < 0.2
    # a copy of the whole file is still a copy of the student's part
    copied = similarity.similar_pairs({1: one, 2: one.replace("weights", "w")}, similarity.template_fingerprints(
        "sdpa"), 0.5, similarity.template_text("sdpa"))
    assert len(copied) == 1 and copied[0]["similarity_a"] > 0.9


@pytest.mark.parametrize("lang", ["ru", "zh"])
def test_the_starter_in_the_readers_language_is_not_evidence_either(lang):
    """The editor opens with the reader's starter (review 3, P18): two Russian students who kept
    its docstring and comments share them as two English students share the English ones."""
    one = from_template(["scores = query @ key.transpose(-2, -1) * (scale or 1 / math.sqrt(query.shape[-1]))",
                         "weights = torch.softmax(scores, dim=-1)", "return weights @ value"], lang)
    two = from_template(["s = torch.einsum('...le,...se->...ls', query, key) / math.sqrt(query.size(-1))",
                         "if attn_mask is not None:", "    s = s + attn_mask",
                         "return torch.einsum('...ls,...sv->...lv', s.softmax(-1), value)"], lang)
    english_only = similarity.similar_pairs({1: one, 2: two}, [], 0.0, similarity.template_text("sdpa"))
    assert max(english_only[0]["similarity_a"], english_only[0]["similarity_b"]) > 0.3  # the starter alone
    every = similarity.similar_pairs({1: one, 2: two}, similarity.template_fingerprints("sdpa"), 0.0,
                                     similarity.template_texts("sdpa"))
    assert not every or max(every[0]["similarity_a"], every[0]["similarity_b"]) < 0.2, every


def test_blanking_the_template_keeps_every_offset():
    code = from_template(["return value"])
    blanked = similarity.blank_template_lines(code, similarity.template_text("sdpa"))
    assert len(blanked) == len(code) and blanked.count("\n") == code.count("\n")
    assert "def scaled_dot_product_attention" not in blanked and "return value" in blanked


# ---- the pages --------------------------------------------------------------------------------

def _seed(env):
    """ada's latest copies bob's program (her earlier try copied carl's); carl wrote his own."""
    with db_session(env) as session:
        carl = add_user(session, "carl@example.org", "student", password="correct horse", name="Carl")
        users = {u.email.split("@")[0]: u for u in session.scalars(select(User))}
        sdpa = find_assignment(session, "sdpa")
        carl_code = (CORRECT / "einsum.py").read_text()
        submit(session, carl, sdpa, carl_code)
        submit(session, users["ada"], sdpa, disguised(carl_code))
        submit(session, users["bob"], sdpa, ORIGINAL + "\nassert 1 < 2  # <b>not markup</b>\n")
        submit(session, users["ada"], sdpa, disguised(ORIGINAL))
        submit(session, users["prof"], sdpa, ORIGINAL)  # an instructor's own try is not compared
        session.commit()


def _reports(env) -> int:
    with db_session(env) as session:
        return session.scalar(select(func.count()).select_from(SimilarityReport))


def test_instructor_starts_a_review_and_reads_the_pairs_side_by_side(env, prof):
    _seed(env)
    assert "similarity review" in prof.get("/instructor/assignments/sdpa").get_data(as_text=True)
    page = prof.get("/instructor/assignments/sdpa/similarity/").get_data(as_text=True)
    assert "No comparison yet" in page and "(3 now)" in page
    assert _reports(env) == 0  # opening the page computes nothing

    started = prof.post("/instructor/assignments/sdpa/similarity/", data={"threshold": "0.5"})
    assert started.status_code == 302
    wait_until(lambda: _reports(env) == 1 and prof.get("/instructor/assignments/sdpa/similarity/")
               .get_data(as_text=True).count('data-status="done"') == 1, timeout=60, what="the report")
    page = prof.get("/instructor/assignments/sdpa/similarity/").get_data(as_text=True)
    assert "Compared 3 latest submissions" in page
    rows = re.findall(r"<tr><td>(\w+) .*?</td>\s*<td>(\w+) ", page, re.S)
    assert [sorted(row) for row in rows] == [["ada", "bob"]]  # carl's pair with ada's *earlier* try is not listed
    link = re.search(r'href="(/instructor/assignments/sdpa/similarity/\d+/pairs/0)"', page).group(1)

    side_by_side = prof.get(link).get_data(as_text=True)
    assert 'id="side-a"' in side_by_side and 'id="side-b"' in side_by_side
    assert side_by_side.count('<mark class="shared">') >= 2
    assert "&lt;b&gt;not markup&lt;/b&gt;" in side_by_side and "<b>not markup</b>" not in side_by_side
    assert prof.get(link.replace("/pairs/0", "/pairs/5")).status_code == 404


def test_a_second_start_while_computing_is_refused_and_a_stale_one_is_replaced(env, prof):
    from datetime import timedelta

    from web.models import utcnow

    with db_session(env) as session:
        sdpa = find_assignment(session, "sdpa")
        session.add(SimilarityReport(assignment_id=sdpa.id, status="computing", threshold=0.5,
                                     created_at=utcnow()))
        session.commit()
    page = prof.post("/instructor/assignments/sdpa/similarity/", follow_redirects=True).get_data(as_text=True)
    assert "already being computed" in page and 'id="computing"' in page
    # the page refreshes itself while computing, with a box to stop it (WCAG 2.2.1)
    assert 'id="auto-refresh"' in page and "js/refresh.js" in page
    with db_session(env) as session:
        report = session.scalar(select(SimilarityReport))
        report.created_at = utcnow() - timedelta(seconds=similarity.STALE_SECONDS + 1)
        session.commit()
    prof.post("/instructor/assignments/sdpa/similarity/")
    wait_until(lambda: _reports(env) == 2 and "No pair of students" in prof.get(
        "/instructor/assignments/sdpa/similarity/").get_data(as_text=True), timeout=60, what="the new report")
    with db_session(env) as session:
        first = session.scalar(select(SimilarityReport).order_by(SimilarityReport.id))
        assert (first.status, first.error) == ("failed", "interrupted (the server restarted)")


def test_bad_thresholds_and_quizzes_are_refused(env, prof):
    page = prof.post("/instructor/assignments/sdpa/similarity/", data={"threshold": "2"},
                     follow_redirects=True).get_data(as_text=True)
    assert "the threshold is a share of the code between 0.05 and 1" in page
    assert prof.get("/instructor/assignments/quiz/similarity/").status_code == 404
    student = env.app.test_client()
    sign_in(student, "ada@example.org")
    assert student.get("/instructor/assignments/sdpa/similarity/").status_code == 403
    assert _reports(env) == 0


def test_notebook_submissions_are_compared_by_their_code(env):
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    with db_session(env) as session:
        users = {u.email.split("@")[0]: u for u in session.scalars(select(User))}
        sdpa = find_assignment(session, "sdpa")
        as_notebook = nbformat.writes(new_notebook(cells=[new_markdown_cell("mine"), new_code_cell(ORIGINAL)]))
        submit(session, users["ada"], sdpa, as_notebook, filename="hw.ipynb")
        submit(session, users["bob"], sdpa, disguised(ORIGINAL))
        session.commit()
        report = similarity.start_report(session, env.engine, sdpa, users["prof"], background=False)
        assert report.status == "done" and report.submission_count == 2
        assert len(report.pairs) == 1 and report.pairs[0]["similarity_a"] > 0.9
