"""The grader's feedback and the CLI's output in English, Russian and Chinese (grader/i18n.py).

Messages are made in English with their template and arguments; a report stores both, so a
page or the CLI renders them in the reader's language later, and the score never depends on it.
"""
from __future__ import annotations

import ast
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po

from grader.i18n import LOCALE_DIR, T, entry, language_from_environment, render, skip_reason

ROOT = Path(__file__).resolve().parent.parent
NO_SCALE = ROOT / "grader" / "tasks" / "sdpa" / "corpus" / "buggy" / "no_scale.py"
CYRILLIC, CJK = re.compile("[а-яА-Я]"), re.compile("[\u4e00-\u9fff]")
FIELDS = re.compile(r"\{[^{}]*\}")


def _catalogue(lang: str):
    with open(os.path.join(LOCALE_DIR, lang, "LC_MESSAGES", "grader.po"), "rb") as f:
        return read_po(f, locale=lang)


def _source_msgids() -> set[str]:
    """What `make i18n` extracts for the domain (babel-grader.cfg's sources: the grader's and
    the quiz's, questions/; the Makefile's keywords)."""
    keywords = {"T": None, "N_": None, "_": None}
    with open(ROOT / "babel-grader.cfg", encoding="utf-8") as f:
        method_map, options_map = parse_mapping_cfg(f)
    assert ("questions/**.py", "python") in method_map  # the quiz's feedback is in this catalogue
    found = extract_from_dir(str(ROOT), method_map=method_map, options_map=options_map, keywords=keywords)
    return {message for _, _, message, _, _ in found if message}


@pytest.mark.parametrize("lang", ["ru", "zh"])
def test_catalogue_translates_every_message_of_the_sources(lang):
    catalogue = _catalogue(lang)
    entries = {m.id: m for m in catalogue if m.id}
    missing = _source_msgids() - set(entries)
    assert not missing, f"run `make i18n` and translate: {sorted(missing)[:5]}"
    untranslated = [m.id for m in entries.values() if not m.string or m.fuzzy]
    assert not untranslated, untranslated[:5]
    # a translation keeps the template's placeholders (names and format specs)
    wrong = [m.id for m in entries.values() if sorted(FIELDS.findall(m.string)) != sorted(FIELDS.findall(m.id))]
    assert not wrong, wrong[:5]


@pytest.mark.parametrize("lang", ["ru", "zh"])
def test_compiled_catalogue_matches_the_po(lang):
    with open(os.path.join(LOCALE_DIR, lang, "LC_MESSAGES", "grader.mo"), "rb") as f:
        compiled = {m.id: m.string for m in read_mo(f) if m.id}
    assert compiled == {m.id: m.string for m in _catalogue(lang) if m.id}, \
        "the .mo is stale: run `make i18n` (pybabel compile -D grader -d grader/translations)"


def test_text_keeps_its_template_through_joins_pickles_and_json():
    inner = T("largest difference is {err:.3g} at {where}", err=0.123456, where=(1, 2))
    message = T("{what}: {comparison}.", what=T("float64 inputs"), comparison=inner)
    joined = message + T(" (not scored: built-in attention was used or the grader was tampered with)")
    assert str(joined) == ("float64 inputs: largest difference is 0.123 at (1, 2). (not scored: built-in "
                           "attention was used or the grader was tampered with)")
    assert pickle.loads(pickle.dumps(joined)) == joined
    stored = json.loads(json.dumps(entry(joined)))
    assert render(stored, "en") == joined
    assert render(stored, "ru") == render(joined, "ru")
    assert "не засчитано" in render(stored, "ru") and "входы float64" in render(stored, "ru")
    # non-finite numbers survive JSON and still take their format spec
    nan = json.loads(json.dumps(entry(T("your output has shape {got} ({err:.2g})", got=(2,), err=float("nan")))))
    assert render(nan, "en") == "your output has shape (2,) (nan)"


def test_no_grader_function_hides_the_message_class():
    """A local ``T`` (a sequence length, say) would turn ``T("...")`` into calling an int."""
    clashes = []
    for path in sorted((ROOT / "grader").rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            nodes = list(ast.walk(fn))
            bound = {a.arg for a in fn.args.args + fn.args.kwonlyargs} | {
                n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            if "T" in bound and any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "T" for n in nodes):
                clashes.append(f"{path.name}:{fn.name}")
    assert not clashes


def test_numbers_of_any_library_keep_their_format_spec():
    import numpy as np
    import torch
    text = T("{a:.2f} {b:.1f} {c:.3g} {d}", a=np.int64(3), b=np.float32(0.25), c=torch.tensor(1.23456), d=True)
    assert text == "3.00 0.2 1.23 True"
    assert json.loads(json.dumps(entry(text)))["a"] == {"a": 3, "b": 0.25, "c": 1.2345600128173828, "d": True}


def test_quiz_feedback_keeps_the_authors_text_in_every_language():
    from grader.i18n import Texts, joined
    from questions.messages import number

    option = Texts({"en": "Too small.", "ru": "Слишком мало.", "zh": "太小。"})
    feedback = joined([T("Not correct."), option, T("Your value {value} is too large.", value=number(0.5))])
    assert feedback == "Not correct. Too small. Your value 0.5 is too large."
    stored = json.loads(json.dumps(entry(feedback)))
    assert render(stored, "ru") == "Неверно. Слишком мало. Ваше значение 0,5 слишком велико."
    assert render(stored, "zh") == "不正确。 太小。 你的数值 0.5 偏大。"
    assert render(pickle.loads(pickle.dumps(feedback)), "zh") == render(stored, "zh")
    assert render(joined(["{odd} braces", "kept"], "{}"), "ru") == "{odd} braces{}kept"


def test_unknown_template_or_language_falls_back_to_english():
    text = T("a sentence no catalogue has: {n}", n=3)
    assert render(text, "ru") == render(text, "de") == render(text, None) == "a sentence no catalogue has: 3"
    assert render("valid UTF-8 Python", "zh") == "有效的 UTF-8 Python"  # plain text: looked up whole
    assert render("not a message the grader makes", "zh") == "not a message the grader makes"
    assert skip_reason(T("skipped: the submission could not be loaded"), "en") == "the submission could not be loaded"
    assert skip_reason(T("skipped: the submission could not be loaded"), "ru") == "решение не удалось загрузить"


@pytest.mark.parametrize("environ, lang", [
    ({"LANG": "ru_RU.UTF-8"}, "ru"), ({"LC_ALL": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
    ({"LANGUAGE": "de:zh", "LANG": "en_US"}, "zh"), ({"LANG": "C.UTF-8"}, None), ({}, None),
    ({"LC_ALL": "de_DE.UTF-8", "LANG": "ru_RU"}, None)])
def test_language_from_the_environment(environ, lang):
    assert language_from_environment(environ) == lang


@pytest.fixture(scope="module")
def no_scale_report():
    from grader.grading import grade_source
    report = grade_source(NO_SCALE.read_text(), "sdpa", seed=20240607, sandbox="local")
    return json.loads(json.dumps(report.to_dict()))  # as stored


def test_a_graded_file_renders_in_every_language(no_scale_report):
    failing = [c for c in no_scale_report["checks"] if not c["passed"] and c["max_points"]]
    assert failing and all(c.get("message_i18n") for c in failing)
    for c in no_scale_report["checks"]:
        stored = c.get("message_i18n") or c["message"]
        assert render(stored, "en") == c["message"]  # English is what the API always gave
    scale = next(c for c in no_scale_report["checks"] if c["id"] == "scale.default")
    assert "Scale found: no scaling" in render(scale["message_i18n"], "en")
    assert "нет масштабирования: оценки не делятся на √d_k" in render(scale["message_i18n"], "ru")
    assert "没有缩放：分数没有除以 √d_k" in render(scale["message_i18n"], "zh")
    summary = no_scale_report["summary_i18n"]
    assert render(summary, "en") == no_scale_report["summary"]
    ru, zh = render(summary, "ru"), render(summary, "zh")
    assert "вы не масштабируете оценки: разделите Q·Kᵀ на √d_k перед softmax" in ru
    assert "你没有缩放分数" in zh and "scale" in zh  # the family's id stays an identifier
    for c in failing:
        assert CYRILLIC.search(render(c["message_i18n"], "ru")), c["id"]
        assert CJK.search(render(c["message_i18n"], "zh")), c["id"]


def test_the_score_does_not_depend_on_the_language(no_scale_report, monkeypatch):
    from grader.grading import grade_source
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.setenv("ATTN_GRADER_LANG", "ru")
    again = json.loads(json.dumps(grade_source(NO_SCALE.read_text(), "sdpa", seed=20240607,
                                               sandbox="local").to_dict()))

    def verdicts(report):  # all but what is timed (the unscored speed check, on a busy machine)
        return ({key: value for key, value in report.items() if key not in ("timings", "checks")},
                [c for c in report["checks"] if c["id"] != "speed.relative"])

    assert verdicts(again) == verdicts(no_scale_report)


def _cli(*args, **env):
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG", "ATTN_GRADER_"))}
    return subprocess.run([sys.executable, "-m", "grader.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=240, env={**environ, **env, "COLUMNS": "200"})


def test_check_prints_in_the_chosen_language(tmp_path):
    config = str(tmp_path / "config.ini")
    ru = _cli("check", str(NO_SCALE), "--task", "sdpa", "--lang", "ru", ATTN_GRADER_CONFIG=config)
    assert ru.returncode == 1, ru.stderr
    # piped, so one line per failing check (grader/console.py: print_checks), in Russian
    assert "\nОШИБКА scale.default 0/10: " in ru.stdout and "баллы 90/100" in ru.stdout
    assert "вы не масштабируете оценки" in ru.stdout and "FAIL" not in ru.stdout
    # no --lang: the remembered language, then LANG
    remembered = _cli("config", "set", "lang", "zh", ATTN_GRADER_CONFIG=config)
    assert remembered.returncode == 0 and "lang 已保存到" in remembered.stdout, remembered.stderr
    zh = _cli("check", str(NO_SCALE), "--task", "sdpa", ATTN_GRADER_CONFIG=config, LANG="ru_RU.UTF-8")
    assert "\n失败 scale.default 0/10: " in zh.stdout and "得分 90/100" in zh.stdout
    os.remove(config)
    by_env = _cli("check", str(NO_SCALE), "--task", "sdpa", ATTN_GRADER_CONFIG=config, LANG="ru_RU.UTF-8")
    assert "\nОШИБКА scale.default" in by_env.stdout
    en = _cli("check", str(NO_SCALE), "--task", "sdpa", "--json", "--lang", "ru", ATTN_GRADER_CONFIG=config)
    assert json.loads(en.stdout)["summary"].startswith("1 bug found")  # JSON stays English


def test_submit_prints_the_servers_result_in_the_chosen_language():
    from rich.console import Console

    from grader.client import print_result
    message = T("your function raised {exc_type}{during}: {message}{at}", exc_type="ValueError",
                during=T(" ({during})", during=T("float64 inputs")), message="boom", at="")
    view = {"id": 7, "task": "sdpa", "status": "done", "score": 0.0, "max_score": 100.0, "passed": False,
            "checks": [{"id": "output.float64", "passed": False, "points": 0, "max_points": 4,
                        "message": str(message), "message_i18n": entry(message), "details": {}},
                       {"id": "mask.bool", "passed": False, "points": 0, "max_points": 4,
                        "message": "skipped: the submission could not be loaded", "details": {"skipped": True}}]}
    shown = {}
    for lang in ("en", "ru", "zh"):
        console = Console(record=True, width=200)
        print_result(view, console=console, lang=lang)
        shown[lang] = console.export_text()
    assert "your function raised ValueError (float64 inputs): boom" in shown["en"]
    assert "ваша функция выбросила ValueError (входы float64): boom" in shown["ru"]
    assert "не запускалось: решение не удалось загрузить" in shown["ru"] and "баллы 0/100" in shown["ru"]
    assert "你的函数抛出了 ValueError（float64 输入）：boom" in shown["zh"] and "得分 0/100" in shown["zh"]
