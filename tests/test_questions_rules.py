"""The bank's quality rules: options drawn from pools, no answer cues, no text copied from the seeds."""
from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from grader.cli import main
from grader.i18n import render as in_language
from questions import AnswerFormatError, grade_answer, render, solution
from questions.check import check_question, validate_bank
from questions.model import load_bank, load_question
from questions.originality import SEEDS_SETTING, SeedIndex, overlap_problems
from questions.schema import LANGS
from questions.variants import shown_options

T = {"en": "t", "ru": "т", "zh": "题"}


def _same(text: str) -> dict:
    return {lang: text for lang in LANGS}


def _option(oid: str, correct: bool, text: str) -> dict:
    return {"id": oid, "correct": correct, "text": _same(text), "feedback": _same("because")}


def _choice(qid="pool", **extra) -> dict:
    options = [_option("key", True, "the right one"), _option("key2", True, "also right!")] + \
              [_option(f"w{i}", False, f"wrong number {i}") for i in range(5)]
    return {"id": qid, "kind": "single", "topics": ["scaling"], "difficulty": "easy", "title": T,
            "prompt": _same("Pick one."), "options": options, "show": 3, **extra}


def _load(tmp_path, data):
    path = tmp_path / f"{data['id']}.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return load_question(path)


# -- distractor pools ----------------------------------------------------------------------

def test_a_pool_shows_one_key_and_different_distractors_per_student(tmp_path):
    q, problems = _load(tmp_path, _choice())
    assert problems == []
    draws = [shown_options(q, seed) for seed in range(40)]
    assert all(len(d) == 3 and sum(o["correct"] for o in d) == 1 for d in draws)
    assert len({frozenset(o["id"] for o in d) for d in draws}) > 5  # the variants differ in substance
    assert {o["id"] for d in draws for o in d} == {o["id"] for o in q.data["options"]}
    assert check_question(q) == []


def test_grading_accepts_only_options_the_student_saw(tmp_path):
    q, _ = _load(tmp_path, _choice())
    seed = 3
    view = render(q, seed)
    shown = {o["id"] for o in shown_options(q, seed)}
    hidden = next(o["id"] for o in q.data["options"] if o["id"] not in shown)
    assert len(view["options"]) == 3
    with pytest.raises(AnswerFormatError, match="not one of this question's ids"):
        grade_answer(q, seed, hidden)
    key = solution(q, seed)
    assert key["options"][0] in shown and grade_answer(q, seed, key["tokens"][0]).correct is True


def test_a_multiple_choice_pool_always_shows_a_right_and_a_wrong_option(tmp_path):
    data = _choice("pool-multi", kind="multiple", show=4)
    q, problems = _load(tmp_path, data)
    assert problems == []
    for seed in range(30):
        correct = [o["correct"] for o in shown_options(q, seed)]
        assert len(correct) == 4 and any(correct) and not all(correct)
    assert check_question(q) == []


@pytest.mark.parametrize("change, message", [
    ({"show": 7}, "leave 'show' out"),
    ({"show": 1}, "must be the number of options shown"),
    ({"shuffle": False}, "always shuffled"),
])
def test_pool_and_shuffle_settings_are_checked(tmp_path, change, message):
    _, problems = _load(tmp_path, _choice(**change))
    assert any(message in p for p in problems), problems


# -- answer cues ---------------------------------------------------------------------------

def test_a_key_much_longer_than_its_distractors_fails(tmp_path):
    data = _choice("long-key")
    del data["show"]
    data["options"] = [_option("k", True, "the carefully qualified and therefore obviously right one"),
                       _option("a", False, "a wrong one"), _option("b", False, "another one")]
    q, problems = _load(tmp_path, data)
    assert problems == []
    found = check_question(q)
    assert any("long-key.yaml: options: the correct option is" in p and "as long as the wrong ones" in p
               for p in found), found
    data["options"][0]["text"] = _same("the right one")
    q, _ = _load(tmp_path, data)
    assert check_question(q) == []


def test_keys_all_in_the_same_file_position_fail_the_bank(tmp_path):
    for n in range(4):
        data = _choice(f"first-{n}")
        del data["show"]
        data["options"] = [_option("k", True, "right"), _option("a", False, "wrong"), _option("b", False, "other")]
        (tmp_path / f"first-{n}.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    _, problems = validate_bank(tmp_path, run_code=False, seeds=False)
    assert any("the key is option 1 in the file in 4 of 4 single-choice questions" in p for p in problems)


def test_no_single_choice_key_in_the_bundled_bank_is_a_length_or_position_cue():
    # the cue rules alone (test_questions validates the whole bank once, lengths included)
    from questions.cues import cue_report, longest_option_problems, position_problems
    bank = load_bank()
    assert position_problems(list(bank)) == [] and longest_option_problems(list(bank)) == []
    for lang, figures in cue_report(list(bank)).items():  # near chance in every language
        assert abs(figures["single_key_longest"] - figures["single_chance"]) < 0.05, lang
    firsts = [q for q in bank if q.kind == "single" and q.data["options"][0]["correct"]]
    assert len(firsts) <= len([q for q in bank if q.kind == "single"]) / 2


# -- copying from the seeds ----------------------------------------------------------------

SEED_RU = ("Механизм внимания позволяет каждому токену напрямую обращаться к любому более раннему "
           "токену последовательности, и поэтому модель легко учит дальние зависимости.")
SEED_ZH = "縮放點積注意力把查詢向量與每一個鍵向量做點積之後再除以維度的平方根以避免飽和。"


@pytest.fixture()
def seeds(tmp_path):
    folder = tmp_path / "seeds"
    folder.mkdir()
    (folder / "chapter.txt").write_text(SEED_RU, encoding="utf-8")
    (folder / "article.txt").write_text(SEED_ZH, encoding="utf-8")
    return folder


def _free(qid: str, ru: str, zh: str = "请解释。") -> dict:
    return {"id": qid, "kind": "free_text", "topics": ["scaling"], "difficulty": "easy", "points": 1,
            "title": T, "prompt": {"en": "Explain.", "ru": ru, "zh": zh},
            "rubric": [{"id": "r", "points": 1, "text": _same("says why")}], "model_answer": _same("Because.")}


def test_a_copied_russian_sentence_is_caught_and_a_paraphrase_is_not(tmp_path, seeds):
    copied, _ = _load(tmp_path, _free("copied", "Объясните: механизм внимания позволяет каждому токену "
                                                 "напрямую обращаться к любому более раннему токену."))
    own, _ = _load(tmp_path, _free("own", "Почему токену полезно видеть любой предыдущий токен сразу, "
                                          "а не через цепочку состояний?"))
    found = overlap_problems([copied, own], SeedIndex.load(seeds))
    assert len(found) == 1 and "copied.yaml: prompt.ru: shares 12 consecutive words with the seed chapter.txt" in found[0]


def test_simplified_chinese_copied_from_a_traditional_seed_is_caught(tmp_path, seeds):
    q, _ = _load(tmp_path, _free("zh-copy", "请解释。", "缩放点积注意力把查询向量与每一个键向量做点积之后再除以维度的平方根。"))
    found = overlap_problems([q], SeedIndex.load(seeds))
    assert len(found) == 1 and "prompt.zh: shares" in found[0] and "article.txt" in found[0]


def test_validate_runs_the_copy_rule_only_where_seeds_exist(tmp_path, seeds, monkeypatch):
    bank_dir = tmp_path / "bank"
    bank_dir.mkdir()
    data = _free("copied", "Механизм внимания позволяет каждому токену напрямую обращаться к любому более раннему.")
    (bank_dir / "copied.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    runner = CliRunner()
    monkeypatch.setenv(SEEDS_SETTING.variable, str(seeds))
    result = runner.invoke(main, ["questions", "validate", "--no-code", str(bank_dir)])
    assert result.exit_code == 1 and "prompt.ru: shares" in _text(result)
    monkeypatch.setenv(SEEDS_SETTING.variable, str(tmp_path / "none"))
    monkeypatch.setattr("questions.originality.default_seeds_dir", lambda: tmp_path / "absent")
    result = runner.invoke(main, ["questions", "validate", "--no-code", str(bank_dir)])
    assert result.exit_code == 0
    assert "note: no seed texts at" in _text(result) and "was skipped" in _text(result)


def _text(result) -> str:
    return result.output + (getattr(result, "stderr", "") if result.output != getattr(result, "stderr", "") else "")


def test_loading_the_bank_does_not_read_the_seeds(monkeypatch):
    monkeypatch.setattr("questions.originality.SeedIndex.load", lambda folder: pytest.fail("seeds read"))
    assert len(load_bank()) > 0


def test_a_numeric_answer_matching_no_known_mistake_gets_a_direction_not_the_answer():
    q = load_bank().get("std-of-dot-product")
    seed = 5
    target = solution(q, seed)["value"]
    high = grade_answer(q, seed, target * 3 + 7, "ru")
    shown = in_language(high.feedback, "ru")
    assert high.correct is False and "слишком велико" in shown and "too large" in high.feedback
    assert q.data["explanation"]["ru"][:20] not in shown and q.data["explanation"]["en"][:20] not in high.feedback
    low = grade_answer(q, seed, -1)
    assert "too small" in low.feedback


def test_quoted_code_is_not_prose_for_the_copy_rule(tmp_path):
    folder = tmp_path / "seeds"
    folder.mkdir()
    (folder / "article.txt").write_text("scores = scores.masked_fill(mask == 0, -1e9) and then softmax of it "
                                        "over the last dimension is taken", encoding="utf-8")
    quoted, _ = _load(tmp_path, _free("quoted", "Почему в коде `scores = scores.masked_fill(mask == 0, -1e9) "
                                                "and then softmax of it` стоит −1e9?"))
    assert overlap_problems([quoted], SeedIndex.load(folder)) == []


def _write(tmp_path, data):
    (tmp_path / f"{data['id']}.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")


def _texts(en: str, ru: str, zh: str) -> dict:
    return {"en": en, "ru": ru, "zh": zh}


def test_a_key_that_is_always_the_longest_option_fails(tmp_path):
    for n in range(4):
        data = _choice(f"longest-{n}")
        del data["show"]
        data["options"] = [_option("a", False, "wrong one"), _option("k", True, "the right one"),
                           _option("b", False, "other one")]  # within 1.25x, yet always the longest
        _write(tmp_path, data)
    _, problems = validate_bank(tmp_path, run_code=False, seeds=False)
    assert sum("the key is the longest option in every language" in p for p in problems) == 4
    assert all(any(f"options.{lang}: picking the longest option finds the key in 100% of single-choice "
                   "questions" in p for p in problems) for lang in LANGS)


def test_the_longest_option_cue_is_checked_in_each_language(tmp_path):
    """The review's case: English balanced, the Russian key always the longest. Averaged over the
    languages it looked fine; per language it fails, on the question and on the bank."""
    for n in range(4):
        data = _choice(f"ru-cue-{n}")  # a pool: 24 draws a language
        data["options"] = [
            {"id": "k", "correct": True, "feedback": _same("because"),
             "text": _texts("the key, of medium size", "ключ, который длиннее всех остальных", "正确答案")},
            {"id": "k2", "correct": True, "feedback": _same("because"),
             "text": _texts("another key of a size", "второй ключ длиннее всех остальных", "另一个正确答案")}] + \
            [{"id": f"w{i}", "correct": False, "feedback": _same("because"),
              "text": _texts(f"a wrong option, longer {i}", f"неверный вариант {i}", f"错误的选项之{i}")}
             for i in range(5)]
        _write(tmp_path, data)
    _, problems = validate_bank(tmp_path, run_code=False, seeds=False)
    assert sum("options.ru: the key is the longest option in 24 of 24 ru views" in p for p in problems) == 4
    assert not any("options.en: the key" in p or "options.zh: the key" in p for p in problems)
    assert any("options.ru: picking the longest option finds the key in 100%" in p for p in problems)


def test_keys_that_are_never_the_longest_are_a_cue_too(tmp_path):
    for n in range(4):
        data = _choice(f"never-{n}")
        del data["show"]
        data["options"] = [_option("k", True, "short key"), _option("a", False, "a longer wrong option"),
                           _option("b", False, "another long wrong one")]
        _write(tmp_path, data)
    _, problems = validate_bank(tmp_path, run_code=False, seeds=False)
    assert any("finds the key in only 0% of single-choice questions" in p and "never pick the longest" in p
               for p in problems)


def test_multiple_choice_whose_longest_option_is_always_right_fails(tmp_path):
    for n in range(4):
        data = _choice(f"multi-{n}", kind="multiple")
        del data["show"]
        data["options"] = [_option("r1", True, "a correct and long statement"), _option("r2", True, "right too"),
                           _option("w1", False, "wrong one here"), _option("w2", False, "wrong")]
        _write(tmp_path, data)
    _, problems = validate_bank(tmp_path, run_code=False, seeds=False)
    assert any("(bank): options.en: the longest option is a correct one in 100% of multiple-choice" in p
               for p in problems)
    data["options"][1]["text"] = _same("right, and the longest statement of all four")  # r1, r2 the two longest
    _write(tmp_path, data)
    q, _ = load_question(tmp_path / f"{data['id']}.yaml")
    assert any("the correct options are exactly the longest ones" in p for p in check_question(q) +
               validate_bank(tmp_path, run_code=False, seeds=False)[1])


def test_numeric_mistakes_that_take_one_value_fail(tmp_path):
    data = {"id": "collide", "kind": "numeric", "topics": ["scaling"], "difficulty": "easy", "title": T,
            "prompt": _same("d_model = {d_model}, h = {h}: the divisor?"),
            "params": {"d_model": [256, 1024], "h": [4, 16]}, "answer": "sqrt(d_model / h)",
            "mistakes": [{"value": "sqrt(d_model)", "feedback": _same("use d_k")},
                         {"value": "d_model / h", "feedback": _same("that is d_k")}]}
    q, problems = _load(tmp_path, data)
    assert problems == []
    found = check_question(q)
    assert any("mistakes[1].value: takes the value of mistakes[0] (variant d_model=256, h=16" in p for p in found)
    data["constraints"] = ["sqrt(d_model) != d_model / h"]
    q, _ = _load(tmp_path, data)
    assert check_question(q) == []


def test_a_prompt_that_uses_indices_states_the_convention(tmp_path):
    data = _free("indices", "Почему позиция i не видит токен x_(i+1)?", "为什么位置 i 看不到 x_(i+1)？")
    data["prompt"]["en"] = "Why does position i not see x_(i+1)?"
    q, _ = _load(tmp_path, data)
    found = check_question(q, run_code=False)
    assert {p.split(": ")[1] for p in found if "does not state the convention" in p} == \
        {"prompt.en", "prompt.ru", "prompt.zh"}
    data["prompt"] = {"en": data["prompt"]["en"] + " (Positions are numbered from 1.)",
                      "ru": data["prompt"]["ru"] + " (Позиции нумеруются с 1.)",
                      "zh": data["prompt"]["zh"] + "（位置从 1 开始编号。）"}
    q, _ = _load(tmp_path, data)
    assert check_question(q, run_code=False) == []
    data["model_answer"] = _same("Rows are counted from 0 here.")
    q, _ = _load(tmp_path, data)
    assert any("counts positions from 0" in p for p in check_question(q, run_code=False))
