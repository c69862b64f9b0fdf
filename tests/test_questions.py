"""The question bank: loading, schema errors, variants, rendering and grading of every kind."""
from __future__ import annotations


import pytest
import yaml

from grader.i18n import entry, render as in_language
from questions import AnswerFormatError, grade_answer, load_bank, render, score_rubric, variant_seed
from questions import expr
from questions.answers import parse_number, solution
from questions.check import check_question, validate_bank
from questions.model import load_question
from questions.schema import KINDS, LANGS, TOPICS


@pytest.fixture(scope="module")
def bank():
    return load_bank()


# -- the bundled bank ----------------------------------------------------------------------

def test_bundled_bank_validates_without_running_code():
    bank, problems = validate_bank(run_code=False)
    assert problems == []
    assert len(bank) >= 40


def test_bank_covers_every_kind_topic_and_language(bank):
    assert {q.kind for q in bank} == set(KINDS)
    covered = {t for q in bank for t in q.topics}
    assert covered == set(TOPICS)
    assert all(q.languages == list(LANGS) for q in bank)
    kinds = [q.kind for q in bank]
    assert kinds.count("code") >= 3 and kinds.count("free_text") >= 3


def test_textbook_numbers(bank):
    # d_model = 512, h = 8 -> d_k = 64 and the per-head divisor is 8
    q = bank.get("per-head-scale")
    env = next(v for v in q.variants() if v["d_model"] == 512 and v["h"] == 8)
    assert grade_answer(q, 0, "8", params=env).correct is True
    assert grade_answer(q, 0, "64", params=env).correct is False
    q = bank.get("variance-of-dot-product")
    env = next(v for v in q.variants() if v["d_k"] == 64)
    assert grade_answer(q, 0, "64", params=env).correct is True
    assert "standard deviation" in grade_answer(q, 0, "8", params=env).feedback


# -- expressions ---------------------------------------------------------------------------

@pytest.mark.parametrize("formula, value", [
    ("d_model // h", 64), ("sqrt(d_model / h)", 8.0), ("2 ** -3", 0.125), ("max(h, 3) % 5", 3),
    ("d_model % h == 0 and h > 1", True), ("1 if h > 4 else 0", 1),
])
def test_expressions_evaluate(formula, value):
    assert expr.evaluate(formula, {"d_model": 512, "h": 8}) == value


@pytest.mark.parametrize("formula", [
    "__import__('os')", "h.__class__", "[1, 2]", "'text'", "lambda: 1", "open('x')",
    "10 ** 10 ** 10", "sqrt(x=1)", "d_model[0]",
])
def test_expressions_refuse_unsafe_or_unknown(formula):
    with pytest.raises(expr.ExprError):
        expr.evaluate(formula, {"d_model": 512, "h": 8})


# -- numbers students type -----------------------------------------------------------------

@pytest.mark.parametrize("text, value", [
    ("0.125", 0.125), ("0,125", 0.125), (" 1/8 ", 0.125), ("12.5%", 0.125), ("1e-3", 0.001),
    ("1E-3", 0.001), ("−2", -2.0), ("1.5·10^-3", 0.0015), ("2×10⁻³", 0.002), ("1 024", 1024.0),
    (64, 64.0), (".5", 0.5),
])
def test_parse_number_accepts_common_forms(text, value):
    assert parse_number(text) == pytest.approx(value)


@pytest.mark.parametrize("text, lang, value", [
    ("1,024", "en", 1024.0), ("2,359,296", "zh", 2359296.0), ("1,000.5", "en", 1000.5),
    ("1,024", "ru", 1.024), ("0,125", "en", 0.125), ("1 024", "ru", 1024.0),
])
def test_comma_follows_the_language(text, lang, value):
    assert parse_number(text, lang) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "abc", "sqrt(64)", "1,000.5,2", "1/0", "1/8/2", True, None, [1], "inf", "nan",
                                  "1,0,0"])
def test_parse_number_refuses_non_numbers(text):
    with pytest.raises(AnswerFormatError):
        parse_number(text)


# -- variants and rendering ------------------------------------------------------------------

def test_variant_seed_is_stable_and_depends_on_both_keys():
    assert variant_seed("alice", "q1") == variant_seed("alice", "q1")
    assert variant_seed("alice", "q1") != variant_seed("bob", "q1")
    assert variant_seed("alice", "q1") != variant_seed("alice", "q2")
    assert 0 <= variant_seed("alice", "q1") < 2 ** 63


def test_variant_is_the_same_in_every_language(bank):
    q = bank.get("head-dimension")
    seed = variant_seed("student-42", q.id)
    views = [render(q, seed, lang) for lang in LANGS]
    assert all(v["params"] == views[0]["params"] for v in views)
    d_model, h = views[0]["params"]["d_model"], views[0]["params"]["h"]
    for v in views:
        assert f"{d_model}" in v["prompt"] and f"h = {h}" in v["prompt"]
    answers = [grade_answer(q, seed, str(d_model // h), lang) for lang in LANGS]
    assert all(a.correct for a in answers)


def test_different_students_get_different_variants(bank):
    q = bank.get("head-dimension")
    seen = {tuple(sorted(render(q, variant_seed(f"s{i}", q.id))["params"].items())) for i in range(40)}
    assert len(seen) > 3


@pytest.mark.parametrize("lang", LANGS)
def test_render_never_reveals_the_answer(bank, lang):
    for q in bank:
        seed = variant_seed("snoop", q.id)
        view = render(q, seed, lang)
        flat = repr(view)
        for secret in ("correct", "model_solution", "model_answer", "rubric", "feedback", "answer"):
            assert f"'{secret}'" not in flat, (q.id, secret)
        ids = [o["id"] for key in ("options", "items", "left", "right") for o in view.get(key, [])]
        assert all(i.startswith("o") and len(i) == 9 for i in ids), q.id  # opaque tokens only


def test_option_order_is_shuffled_per_student_but_stable(bank):
    q = bank.get("why-scale-by-sqrt-dk")
    orders = {tuple(o["text"] for o in render(q, variant_seed(f"s{i}", q.id))["options"]) for i in range(30)}
    assert len(orders) > 1
    seed = variant_seed("same", q.id)
    assert render(q, seed, "ru")["options"] == render(q, seed, "ru")["options"]


# -- grading every kind -------------------------------------------------------------------------

def _first(bank, kind):
    return next(q for q in bank if q.kind == kind and not q.parameterised) if kind != "numeric" \
        else next(q for q in bank if q.kind == kind)


def test_single_choice_grading_with_tokens_and_feedback(bank):
    q = bank.get("why-scale-by-sqrt-dk")
    seed = variant_seed("u", q.id)
    view = render(q, seed, "zh")
    results = [grade_answer(q, seed, o["id"], "zh") for o in view["options"]]
    assert sum(r.correct for r in results) == 1
    assert all(r.feedback and r.max_points == q.points for r in results)
    wrong = next(r for r in results if not r.correct)
    # made in English, shown in the reader's language: the option's own feedback too
    assert wrong.points == 0 and wrong.feedback.startswith("Not correct.")
    stored = wrong.to_dict()["feedback_i18n"]
    option = next(o for o in q.data["options"] if not o["correct"] and o["feedback"]["en"][:30] in wrong.feedback)
    assert in_language(stored, "en") == wrong.feedback
    for lang, verdict in (("ru", "Неверно."), ("zh", "不正确。")):
        shown = in_language(stored, lang)
        assert shown.startswith(verdict) and option["feedback"][lang].strip()[:20] in shown
        assert "Not correct" not in shown and option["feedback"]["en"][:20] not in shown
    assert entry(wrong.feedback) == stored
    with pytest.raises(AnswerFormatError):
        grade_answer(q, seed, "not-an-option")


def test_multiple_choice_partial_credit(bank):
    q = next(q for q in bank if q.kind == "multiple")
    right = [o["id"] for o in q.data["options"] if o["correct"]]
    wrong = [o["id"] for o in q.data["options"] if not o["correct"]]
    full = grade_answer(q, 1, right)
    assert full.correct is True and full.points == q.points
    part = grade_answer(q, 1, right[:1] + wrong[:1])
    assert part.correct is False and 0 <= part.points < q.points
    expected = max(0.0, 1 / len(right) - 1 / len(wrong)) * q.points
    assert part.points == pytest.approx(expected, abs=1e-6)
    assert grade_answer(q, 1, wrong).points == 0


def test_numeric_grading_tolerates_formats_but_not_wrong_values(bank):
    q = bank.get("variance-after-scaling")
    env = next(v for v in q.variants() if v["d_k"] == 64 and v["power"] == 2)  # divide by d_k
    for text in ("1/64", "0.015625", "0,015625", "1.5625e-2", "1.5625%"):
        assert grade_answer(q, 0, text, "ru", params=env).correct is True, text
    assert grade_answer(q, 0, "1", params=env).correct is False
    assert grade_answer(q, 0, "1/8", params=env).correct is False


def test_ordering_grading(bank):
    q = bank.get("sdpa-steps-order")
    ids = [i["id"] for i in q.data["items"]]
    seed = variant_seed("x", q.id)
    assert grade_answer(q, seed, ids).correct is True
    swapped = [ids[1], ids[0]] + ids[2:]  # one neighbouring pair out of order: 9 of the 10 pairs kept
    r = grade_answer(q, seed, swapped, "ru")
    assert r.correct is False and r.points == pytest.approx(q.points * 9 / 10)
    assert "9 of 10 pairs" in r.feedback
    tokens = {o["text"]: o["id"] for o in render(q, seed)["items"]}
    in_order = [tokens[i["text"]["en"]] for i in q.data["items"]]
    assert grade_answer(q, seed, in_order).correct is True
    with pytest.raises(AnswerFormatError):
        grade_answer(q, seed, ids[:-1])


def test_mask_after_softmax_earns_less_than_a_harmless_shift(bank):
    """Relative order, not absolute position: moving the projection to the end keeps every other
    pair in order (6 of 10), while the mask after the softmax, the misconception the question is
    about, is capped and explained (per-position credit had them the other way: 0.6 against 0)."""
    q = bank.get("sdpa-steps-order")
    ids = ["project", "scores", "mask", "softmax", "values"]
    assert [i["id"] for i in q.data["items"]] == ids
    shifted = grade_answer(q, 0, ids[1:] + ids[:1])
    mask_late = grade_answer(q, 0, ["project", "scores", "softmax", "mask", "values"])
    assert shifted.points == pytest.approx(0.6 * q.points)
    assert mask_late.points < shifted.points and mask_late.points == pytest.approx(0.2 * q.points)
    assert "after the softmax" in mask_late.feedback and "after the softmax" not in shifted.feedback
    assert "после softmax" in in_language(mask_late.feedback, "ru")
    # the same rule in the Parsons problem, and splitting before projecting in multi-head-steps
    lines = bank.get("attention-code-lines")
    order = [i["id"] for i in lines.data["items"]]
    late = order[:2] + [order[3], order[2]] + order[4:]
    assert grade_answer(lines, 0, late).points == pytest.approx(0.2 * lines.points)
    steps = bank.get("multi-head-steps")
    order = [i["id"] for i in steps.data["items"]]
    assert grade_answer(steps, 0, [order[1], order[0]] + order[2:]).points == pytest.approx(0.4 * steps.points)


def test_matching_grading(bank):
    q = bank.get("attention-kinds-sources")
    seed = variant_seed("m", q.id)
    view = render(q, seed)
    by_text = {o["text"]: o["id"] for o in view["left"] + view["right"]}
    answer = {by_text[p["left"]["en"]]: by_text[p["right"]["en"]] for p in q.data["pairs"]}
    assert grade_answer(q, seed, answer).correct is True
    distractor = by_text[q.data["distractors"][0]["text"]["en"]]
    answer[next(iter(answer))] = distractor
    r = grade_answer(q, seed, answer)
    assert r.correct is False and r.points == pytest.approx(q.points * 2 / 3)


def test_free_text_waits_for_the_instructor_then_rubric_scores(bank):
    q = bank.get("derive-score-variance")
    r = grade_answer(q, 3, "Var(q·k) = d_k because ...", "ru")
    assert r.correct is None and r.points == 0 and r.max_points == q.points
    verdict = score_rubric(q, ["assumptions", "derivation"])
    assert verdict.points == 2 and verdict.correct is False
    assert score_rubric(q, [r["id"] for r in q.data["rubric"]]).correct is True
    with pytest.raises(AnswerFormatError):
        score_rubric(q, ["made-up"])
    assert "model_answer" in solution(q, 3, "zh")


def test_grade_refuses_unknown_language(bank):
    with pytest.raises(ValueError):
        grade_answer(bank.get("head-dimension"), 0, "64", "de")


# -- schema errors name the file and the field ----------------------------------------------------

GOOD = {
    "id": "tiny", "kind": "numeric", "topics": ["multi-head"], "difficulty": "easy",
    "params": {"d_model": [64, 128], "h": [2, 4]},
    "title": {"en": "t", "ru": "т", "zh": "题"},
    "prompt": {"en": "d_model={d_model}, h={h}", "ru": "d_model={d_model}, h={h}", "zh": "d_model={d_model}，h={h}"},
    "answer": "d_model / h", "tolerance": {"abs": 0.001},
}


def _write(tmp_path, data, name="tiny"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def test_a_small_valid_question_loads(tmp_path):
    q, problems = load_question(_write(tmp_path, GOOD))
    assert problems == [] and len(q.variants()) == 4
    assert check_question(q) == []


@pytest.mark.parametrize("change, field", [
    ({"kind": "essay"}, "kind"),
    ({"topics": ["cooking"]}, "topics"),
    ({"difficulty": 7}, "difficulty"),
    ({"answer": "__import__('os')"}, "answer"),
    ({"answer": "d_model / heads"}, "answer"),
    ({"prompt": {"en": "{d_model}", "ru": "{d_model}"}}, "prompt.zh"),
    ({"prompt": {"en": "{d_model}", "ru": "{d_model}", "zh": "{dmodel}"}}, "prompt.zh"),
    ({"prompt": {"en": "{d_model}", "ru": "{d_model}", "zh": "这是 一个"}}, "prompt.zh"),
    ({"params": {"d_model": "many"}}, "params.d_model"),
    ({"id": "other"}, "id"),
    ({"colour": "red"}, "colour"),
])
def test_schema_errors_name_file_and_field(tmp_path, change, field):
    _, problems = load_question(_write(tmp_path, {**GOOD, **change}))
    assert problems, change
    assert any(p.startswith(f"{tmp_path / 'tiny.yaml'}: {field}:") for p in problems), problems


def test_validation_catches_variant_problems(tmp_path):
    # h = 0 makes the answer fail in one variant; identical options make a choice ambiguous
    q, problems = load_question(_write(tmp_path, {**GOOD, "params": {"d_model": [64], "h": [0, 2]}}))
    assert problems == []
    found = check_question(q)
    assert any("h=0" in p for p in found), found
    choice = {
        "id": "dup", "kind": "single", "topics": ["multi-head"], "difficulty": 1,
        "params": {"a": [2, 4]}, "title": GOOD["title"], "prompt": GOOD["title"],
        "options": [
            {"id": "x", "correct": True, "text": {l: "{a}" for l in LANGS}, "feedback": GOOD["title"]},
            {"id": "y", "correct": False, "text": {l: "4" for l in LANGS}, "feedback": GOOD["title"]},
        ],
    }
    q, problems = load_question(_write(tmp_path, choice, "dup"))
    assert problems == []
    found = check_question(q)
    assert any("dup.yaml: options.en: two entries read the same (variant a=4)" in p for p in found), found


def test_broken_yaml_and_duplicate_ids_are_reported(tmp_path):
    (tmp_path / "broken.yaml").write_text("id: [unclosed\n", encoding="utf-8")
    _write(tmp_path, GOOD)
    bank = load_bank(tmp_path)
    assert len(bank) == 1
    assert any(e.startswith(f"{tmp_path / 'broken.yaml'}: (yaml):") for e in bank.errors)


def test_ordering_is_never_shown_already_in_order(bank):
    for q in (q for q in bank if q.kind == "ordering"):
        right = [i["text"]["en"] for i in q.data["items"]]
        for n in range(60):
            shown = [o["text"] for o in render(q, variant_seed(f"s{n}", q.id))["items"]]
            assert shown != right and sorted(shown) == sorted(right), q.id


def test_code_question_fields_are_checked(tmp_path):
    data = {
        "id": "code-q", "kind": "code", "topics": ["masked-attention"], "difficulty": "easy",
        "title": GOOD["title"], "prompt": GOOD["title"], "function": "causal_mask",
        "reference": "no_such_reference", "template": "def causal_mask(L, S): ...\n",
        "model_solution": "x", "wrong_solutions": ["y"],
        "cases": [{"args": [{"randn": [0, 3]}]}, {"args": [{"laplace": [2]}]}],
    }
    _, problems = load_question(_write(tmp_path, data, "code-q"))
    prefix = f"{tmp_path / 'code-q.yaml'}: "
    assert any(p.startswith(prefix + "reference: must name one of") for p in problems), problems
    assert any(p.startswith(prefix + "cases[0]: a shape must be") for p in problems), problems
    assert any(p.startswith(prefix + "cases[1]: unknown argument kind 'laplace'") for p in problems), problems


def test_loading_and_listing_the_bank_does_not_need_torch():
    import subprocess
    import sys
    code = ("import sys; from questions.check import validate_bank; "
            "bank, problems = validate_bank(run_code=False); "
            "assert not problems; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- the kinds a student types: a matrix, a shape, a big-O expression -------------------------------

def test_a_hand_computed_matrix_is_graded_entry_by_entry(bank):
    q = bank.get("hand-attention-output")
    seed = variant_seed("hand", q.id)
    view = render(q, seed, "ru")
    assert view["answer_shape"] == [2, 2] and "Q = [[" in view["prompt"] and "{Q}" not in view["prompt"]
    key = solution(q, seed)["matrix"]
    as_typed = [[f"{x:.2f}".replace(".", ",") for x in row] for row in key]  # rounded, Russian commas
    assert grade_answer(q, seed, as_typed, "ru").correct is True
    one_off = [row[:] for row in key]
    one_off[1][0] += 0.1
    r = grade_answer(q, seed, one_off)
    assert r.correct is False and r.points == pytest.approx(q.points * 3 / 4)
    assert "wrong at (row, column): (2, 1)" in r.feedback
    from questions import handcalc
    env = q.variants()[0]
    unscaled = handcalc.compute(handcalc.mistake_settings(q.data, q.data["mistakes"][0]), env)
    assert "√d_k" in grade_answer(q, 0, unscaled, params=env).feedback
    with pytest.raises(AnswerFormatError, match="2 × 2 matrix"):
        grade_answer(q, seed, [[1, 2, 3]])
    with pytest.raises(AnswerFormatError, match="entry of the matrix"):
        grade_answer(q, seed, [["1", "x"], ["1", "2"]])


def test_one_entry_of_a_masked_attention_is_graded_like_a_number(bank):
    q = bank.get("hand-causal-weight")
    for env in q.variants():
        assert env["row"] >= 2 and env["col"] <= env["row"]  # never a hidden weight or the trivial first row
    seed = variant_seed("entry", q.id)
    value = solution(q, seed)["value"]
    assert grade_answer(q, seed, f"{value:.2f}").correct is True
    assert "j ≤ i" in render(q, seed)["prompt"] and "answer_shape" not in render(q, seed)


def test_shapes_are_read_as_people_write_them(bank):
    q = bank.get("split-heads-shape")
    seed = variant_seed("shape", q.id)
    env = render(q, seed)["params"]
    want = (env["B"], env["h"], env["T"], env["d_model"] // env["h"])
    for text in (str(want), str(list(want)), f"torch.Size({list(want)})", " × ".join(map(str, want)),
                 "x".join(map(str, want)), "х".join(map(str, want))):  # х: Cyrillic
        assert grade_answer(q, seed, text).correct is True, text
    before_transpose = (want[0], want[2], want[1], want[3])
    assert "transpose" in grade_answer(q, seed, str(before_transpose)).feedback
    assert "different number of dimensions" in grade_answer(q, seed, str(want[:3])).feedback
    with pytest.raises(AnswerFormatError):
        grade_answer(q, seed, "(2, eight, 10)")


@pytest.mark.parametrize("text", ["O(n^2 d)", "n**2*d", "O(d·n²)", "2 n^2 d + n d", "О(n²d)", "n^2 d/h*h"])
def test_big_o_answers_are_compared_by_growth(bank, text):
    q = bank.get("self-attention-cost-big-o")
    if "h" in text:
        with pytest.raises(AnswerFormatError, match="unknown name 'h'"):
            grade_answer(q, 0, text)
    else:
        assert grade_answer(q, 0, text).correct is True


def test_a_wrong_big_o_is_told_where_it_grows_wrongly(bank):
    q = bank.get("self-attention-cost-big-o")
    assert "projections" in grade_answer(q, 0, "O(n d^2)").feedback
    r = grade_answer(q, 0, "O(n^3)")
    assert r.correct is False and "check how it grows with n, d" in r.feedback
    assert "O(n^3)" in in_language(r.feedback, "zh")
    from questions.bigo import canonical, text_of
    assert text_of(canonical("(n + d)^2", ["n", "d"])) == "d^2 + n^2"  # n·d lies under n² + d²
    assert canonical("n log n + n", ["n"]) == canonical("O(n log(n))", ["n"])


def test_a_chosen_matching_distractor_explains_itself(bank):
    q = bank.get("multi-head-shapes")
    answer = {p["id"]: p["id"] for p in q.data["pairs"]}
    answer["weights"] = "per-head-weights"
    r = grade_answer(q, 0, answer)
    assert r.points == pytest.approx(q.points * 4 / 5) and "one head" in r.feedback


@pytest.mark.parametrize("change, field", [
    ({"matrices": {"Q": {"shape": [2, 2], "values": [0, 1]}}}, "matrices"),
    ({"answer": {"result": "logits", "scale": 1}}, "answer.result"),
    ({"mistakes": [{"compute": {"result": "scores"}, "feedback": {"en": "x", "ru": "x", "zh": "x"}}]}, "mistakes[0].compute.result"),
    ({"ask": "row"}, "ask"),
])
def test_matrix_question_fields_are_checked(tmp_path, change, field):
    data = {"id": "tiny-matrix", "kind": "matrix", "topics": ["formula"], "difficulty": "easy",
            "title": {"en": "t", "ru": "т", "zh": "题"}, "prompt": {"en": "{Q} {K} {V}", "ru": "{Q} {K} {V}", "zh": "{Q} {K} {V}"},
            "matrices": {"Q": {"shape": [2, 2], "values": [0, 1]}, "K": {"shape": [2, 2], "values": [0, 1]},
                         "V": {"shape": [2, 2], "values": [0, 1]}},
            "answer": {"result": "output", "scale": 1}, "draws": 4, **change}
    _, problems = load_question(_write(tmp_path, data, "tiny-matrix"))
    assert any(f"tiny-matrix.yaml: {field}:" in p for p in problems), problems
