"""Test-wise strategies (questions/strategies.py): validate bounds each at chance + 5 points per
language, each single-choice question counted once."""
from __future__ import annotations

import pytest
import yaml

from questions.check import validate_bank
from questions.model import load_bank
from questions.schema import LANGS
from questions.strategies import MAX_GAIN, hedge_score, play, stem_score, strategy_problems

T = {lang: "A question" for lang in LANGS}


def _texts(en, ru, zh):
    return {"en": en, "ru": ru, "zh": zh}


def _question(qid, prompt, options):
    opts = [{"id": f"o{i}", "correct": i == key, "text": text, "feedback": _texts("why", "почему", "原因")}
            for i, (text, key) in enumerate(options)]
    opts = [{**o, "correct": ok} for o, (_, ok) in zip(opts, options)]
    return {"id": qid, "kind": "single", "topics": ["scaling"], "difficulty": "easy", "title": T,
            "prompt": prompt, "options": opts}


def _write(tmp_path, data):
    (tmp_path / f"{data['id']}.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")


def test_the_hedge_and_absolute_words_of_each_language():
    assert hedge_score("It is roughly 1.", "en") == 1 and hedge_score("It is only 1.", "en") == -1
    assert hedge_score("`about` in code does not count", "en") == 0
    assert hedge_score("Примерно вдвое больше.", "ru") == 1 and hedge_score("Только так.", "ru") == -1
    assert hedge_score("Всё равно можно.", "ru") == -1 and hedge_score("Вследствие этого.", "ru") == 0
    assert hedge_score("大约是一半。", "zh") == 1 and hedge_score("只有这样。", "zh") == -1


def test_words_repeated_from_the_prompt_are_counted_per_language():
    assert stem_score("the scores of the queries", "Why scale the scores of a query?", "en") == 2
    assert stem_score("оценки запросов", "Почему масштабируют оценку запроса?", "ru") == 2
    assert stem_score("缩放分数", "为什么要缩放分数？", "zh") == 3  # character pairs: 缩放, 放分, 分数
    assert stem_score("这个头的分数", "一个查询", "zh") == 0  # function characters (这, 个, 的) cut the runs


def test_hedged_keys_fail_the_bank_in_the_language_they_are_in(tmp_path):
    """The review's cue: the key is the hedged option, a distractor the absolute one. Only the
    Russian texts carry it, so only Russian fails."""
    for n in range(4):
        _write(tmp_path, _question(f"hedged-{n}", _texts("Pick one.", "Выберите.", "选一个。"), [
            (_texts("It grows with d", "Оно примерно растёт с d", "它随 d 增长"), True),
            (_texts("It shrinks with d", "Оно всегда убывает с d", "它随 d 减小"), False),
            (_texts("It stays put", "Оно не меняется", "它保持不变"), False)]))
    _, problems = validate_bank(tmp_path, run_code=False, seeds=False)
    flagged = [p for p in problems if "prefer hedged options, avoid absolute ones" in p]
    assert len(flagged) == 1 and "options.ru" in flagged[0] and "100.0%" in flagged[0]
    assert any("options.ru" in p and "never pick an absolute option" in p for p in problems)


def test_a_key_that_echoes_the_prompt_fails(tmp_path):
    for n in range(4):
        prompt = _texts("Why divide the scores by the root of d_k?", "Зачем делить оценки на корень из d_k?",
                        "为什么把分数除以 d_k 的平方根？")
        _write(tmp_path, _question(f"echo-{n}", prompt, [
            (_texts("The divided scores keep variance one", "Поделённые оценки сохраняют дисперсию",
                    "除以后的分数方差保持为一"), True),
            (_texts("It is faster", "Так быстрее", "这样更快"), False),
            (_texts("It avoids overflow", "Так нет переполнения", "这样不会溢出"), False)]))
    _, problems = validate_bank(tmp_path, run_code=False, seeds=False)
    for lang in LANGS:
        assert any(f"options.{lang}" in p and "repeats the most words of the prompt" in p for p in problems), lang


def test_every_strategy_stays_within_chance_plus_five_points_on_the_bundled_bank():
    results = play(list(load_bank()))
    assert {r.lang for r in results} == set(LANGS) and len(results) == 12 * len(LANGS)
    worst = max(results, key=lambda r: r.gain)
    assert worst.gain <= MAX_GAIN, (worst.lang, worst.name, worst.found, worst.chance, worst.worst)
    assert strategy_problems(list(load_bank())) == []


@pytest.mark.parametrize("lang", LANGS)
def test_each_question_counts_once_whatever_its_number_of_views(lang):
    results = {(r.feature, r.way): r for r in play(list(load_bank())) if r.lang == lang}
    singles = [q for q in load_bank() if q.kind == "single"]
    assert all(r.questions == len(singles) for r in results.values())
