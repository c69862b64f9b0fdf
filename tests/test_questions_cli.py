"""`attn-grader questions ...` as a user runs it, and the code questions graded in the sandbox."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.i18n import render as in_language
from questions import grade_answer, load_bank, variant_seed


def run(*args, env=None):
    result = CliRunner().invoke(main, ["questions", *args], catch_exceptions=False,
                                env={"ATTN_GRADER_QUIZ_SECRET": "cli-test-secret", **(env or {})})
    return result.exit_code, result.output, getattr(result, "stderr", "")


def test_validate_prints_a_summary(tmp_path):
    # a few files of the bundled bank (test_questions validates all of it once, in-process)
    import shutil
    from questions.model import DEFAULT_BANK
    for name in ("head-dimension", "sdpa-steps-order", "derive-score-variance", "hand-causal-weight"):
        shutil.copy(DEFAULT_BANK / f"{name}.yaml", tmp_path)
    code, out, _ = run("validate", "--no-code", str(tmp_path))
    assert code == 0
    assert "4 questions" in out and "all valid" in out and "free_text: 1" in out and "matrix: 1" in out


def test_validate_reports_file_and_field(tmp_path):
    (tmp_path / "bad-one.yaml").write_text(
        "id: bad-one\nkind: numeric\ntopics: [scaling]\ndifficulty: easy\n"
        "title: {en: t, ru: т, zh: 题}\nprompt: {en: '{d_k}', ru: '{d_k}', zh: '{d_k}'}\n"
        "params: {d_k: [0, 4]}\nanswer: 1 / d_k\n", encoding="utf-8")
    code, out, err = run("validate", str(tmp_path))
    assert code == 1
    text = out + err
    assert f"{tmp_path / 'bad-one.yaml'}: (variant): cannot be graded (variant d_k=0)" in text
    assert "1 problem(s)" in text


def test_validate_refuses_a_missing_directory(tmp_path):
    code, out, err = run("validate", str(tmp_path / "nowhere"))
    assert code == 1 and "not a directory" in out + err


def test_list_json_has_the_promised_fields():
    code, out, _ = run("list", "--json")
    assert code == 0
    rows = json.loads(out)
    assert len(rows) == len(load_bank())
    for row in rows:
        assert {"id", "kind", "topics", "difficulty", "languages"} <= set(row)
        assert row["languages"] == ["en", "ru", "zh"]


def test_export_moodle_to_a_file_and_qti_directory(tmp_path):
    code, _, _ = run("export", "--format", "moodle-xml", "--lang", "ru", "-o", str(tmp_path / "bank.xml"))
    assert code == 0
    root = ET.parse(tmp_path / "bank.xml").getroot()
    assert root.tag == "quiz" and len(root) == len(load_bank()) + 1
    code, _, _ = run("export", "--format", "qti", "-o", str(tmp_path / "qti"))
    assert code == 0 and (tmp_path / "qti" / "imsmanifest.xml").exists()
    code, out, err = run("export", "--format", "qti")
    assert code != 0 and "--output" in out + err


def test_export_can_pick_a_topic_or_kind():
    code, out, _ = run("export", "--format", "json", "--topic", "permutation", "--kind", "single")
    assert code == 0
    expected = [q.id for q in load_bank() if q.kind == "single" and "permutation" in q.topics]
    assert [q["question_id"] for q in json.loads(out)["questions"]] == expected and expected
    code, out, err = run("export", "--format", "json", "--topic", "cooking")
    assert code != 0 and "no question matches" in out + err


def test_show_renders_and_grades():
    code, out, _ = run("show", "per-head-scale", "--lang", "ru", "--student", "s1", "--grade", "8,0")
    assert code == 0
    assert "d_model" in out and '"max_points": 1.0' in out
    assert re.search(r'"feedback": "[^"]*[а-яА-Я]', out)  # the feedback in --lang
    code, out, err = run("show", "no-such-question")
    assert code != 0 and "no question 'no-such-question'" in out + err
    code, out, err = run("show", "per-head-scale", "--grade", "eight")
    assert code != 0 and "cannot grade that answer" in out + err


# -- code questions, graded by running the snippet in the sandbox ----------------------------------

@pytest.fixture(scope="module")
def bank():
    return load_bank()


@pytest.mark.parametrize("question_id", ["causal-mask-code", "masked-scores-code", "scaled-scores-code",
                                         "split-heads-code"])
def test_model_solutions_pass(bank, question_id):
    q = bank.get(question_id)
    ok = grade_answer(q, variant_seed("coder", q.id), q.data["model_solution"], "zh")
    assert ok.correct is True and ok.points == q.points and ok.details["cases"] == [True] * len(q.data["cases"])


def test_causal_mask_wrong_answer_explained(bank):
    q = bank.get("causal-mask-code")
    seed = variant_seed("coder", q.id)
    transposed = "import torch\ndef causal_mask(L, S):\n    return torch.ones(S, L, dtype=torch.bool).tril().T\n"
    bad = grade_answer(q, seed, transposed, "ru")
    assert bad.correct is False and bad.points < q.points
    assert "форма" in in_language(bad.feedback, "ru") or "неверных" in in_language(bad.feedback, "ru")


def test_code_that_does_not_load_or_raises(bank):
    q = bank.get("causal-mask-code")
    broken = grade_answer(q, 1, "def causal_mask(L, S) return 1\n")
    assert broken.correct is False and broken.points == 0 and "did not run" in broken.feedback
    raising = grade_answer(q, 1, "def causal_mask(L, S):\n    raise ValueError('boom')\n", "zh")
    assert raising.correct is False and "ValueError" in raising.feedback


def test_in_place_change_of_an_input_is_rejected(bank):
    q = bank.get("masked-scores-code")
    r = grade_answer(q, 2, q.data["wrong_solutions"][2])
    assert r.correct is False and "in place" in r.feedback


def test_a_finite_stand_in_for_minus_infinity_is_named(bank):
    q = bank.get("masked-scores-code")
    source = "def masked_scores(scores, mask):\n    return scores.masked_fill(~mask, -1e9)\n"
    r = grade_answer(q, variant_seed("coder", q.id), source)
    assert r.correct is False and "−∞" in r.feedback and "-1e+09" in r.feedback
