"""Review 3's seams of the grader's wording and the CLI, as a student reads them in en, ru and zh.
P17: a likely cause is a sentence of its own after its message. P18: the starter file in the
chosen language (the same code in each), the sandbox level kept as typed with its meaning
translated, one Russian word for a note, full-width brackets in Chinese, and a progress bar that
counts its steps from its first frame."""
from __future__ import annotations

import ast
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader.checks.base import with_cause
from grader.checks.variants import explain
from grader.i18n import T, render

ROOT = Path(__file__).resolve().parent.parent
MASK_AFTER = ROOT / "grader" / "tasks" / "sdpa" / "corpus" / "buggy" / "mask_after_softmax.py"
TASKS = sorted(p.name for p in (ROOT / "grader" / "tasks").iterdir() if (p / "template.py.tmpl").exists())


def _cli(*args, **env):
    return subprocess.run([sys.executable, "-m", "grader.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=240, env={**os.environ, "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8",
                                            "LANGUAGE": "", "LC_ALL": "", "LC_MESSAGES": "", **env})


def _by_environment(**env) -> dict:
    """The environment of a student who set no language but LANG (conftest sets ATTN_GRADER_LANG=en)."""
    return {key: value for key, value in {**os.environ, **env}.items() if key != "ATTN_GRADER_LANG"}


def _causal(message_end: str = "0..i") -> T:
    return T("changing keys and values at positions {p}..{value} changed the output "
             "of query {row} by {worst:.3g}: with is_causal=True query i may only "
             "see keys 0..i", p=2, value=7, row=0, worst=0.174) if message_end == "0..i" else \
        T("the same inputs twice gave different outputs, so whether future keys change earlier "
          "outputs cannot be judged: is dropout (or other randomness) still on?")


def test_a_likely_cause_is_a_sentence_of_its_own_in_every_language():
    cause = explain("mask_after_softmax")
    assert cause, "the catalogue names the bug"
    joined = with_cause(_causal(), cause)
    assert "keys 0..i. Likely cause: you apply the mask after the softmax" in render(joined, "en")
    assert "ключи 0..i. Вероятная причина: вы применяете маску после softmax" in render(joined, "ru")
    assert "键 0..i。可能的原因：你在 softmax 之后应用掩码" in render(joined, "zh")
    # a message that ends its sentence already gets no second stop, and no space in Chinese
    asked = with_cause(_causal("?"), cause)
    assert "still on? Likely cause: you apply" in render(asked, "en")
    assert "？可能的原因：" in render(asked, "zh") and "？ " not in render(asked, "zh")
    for lang in ("en", "ru", "zh"):
        shown = render(joined, lang) + render(asked, lang)
        assert ".." not in shown.replace("0..i", "").replace("2..7", "") and "。。" not in shown


def test_causal_future_says_its_cause_after_a_full_stop():
    zh = _cli("check", str(MASK_AFTER), "--task", "sdpa", "--only", "causal.future", "--lang", "zh")
    text = "".join(zh.stdout.split())  # rich wraps at 80 columns
    assert "只能看到键0..i。可能的原因：你在softmax之后应用掩码" in text, zh.stdout + zh.stderr


def test_the_template_follows_the_chosen_language_with_the_same_code():
    from grader.tasks import template
    code = {task: ast.dump(_without_docstrings(template(task, "en"))) for task in TASKS}
    assert len(code) == 6
    for task in TASKS:
        for lang, script in (("ru", "[а-яё]"), ("zh", "[\u4e00-\u9fff]")):
            text = template(task, lang)
            assert text != template(task, "en") and re.search(script, text), (task, lang)
            assert ast.dump(_without_docstrings(text)) == code[task], f"{task} {lang}: the code differs"
            assert f"attn-grader check this_file.py --task {task}" in text  # the notebook rewrites it
    ru = _cli("template", "sdpa", "--lang", "ru")
    assert ru.returncode == 0 and "Проверьте локально:" in ru.stdout and "Check it locally" not in ru.stdout
    by_env = subprocess.run([sys.executable, "-m", "grader.cli", "template", "sdpa"], capture_output=True, text=True,
                            cwd=ROOT, timeout=240, env=_by_environment(LANG="zh_CN.UTF-8", LC_ALL="", LANGUAGE="",
                                                                       PYTHONPATH=str(ROOT)))
    assert "在本地检查：" in by_env.stdout and "# 1. 分数 (..., L, S)" in by_env.stdout
    notebook = _cli("template", "mha", "--notebook", "--lang", "zh")
    assert "任务 `mha`" in notebook.stdout and "this_file.ipynb --task mha" in notebook.stdout


def _without_docstrings(source: str) -> ast.Module:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:]
    return tree


@pytest.mark.parametrize("lang, verdict, sandbox, note", [
    ("ru", "баллы 92/100 (некоторые проверки не пройдены)", "песочница: local, без изоляции)", "примечание: "),
    ("zh", "得分 92/100（部分检查未通过）", "沙箱：local，无隔离）", "注意："),
])
def test_the_reports_last_lines_in_the_readers_language(lang, verdict, sandbox, note):
    run = _cli("check", str(MASK_AFTER), "--task", "sdpa", "--lang", lang)
    assert run.returncode == 1, run.stderr
    assert verdict in run.stdout and sandbox in run.stdout and f"\n{note}" in run.stdout, run.stdout
    assert "заметка" not in run.stdout and "(部分" not in run.stdout


def test_ru_has_one_word_for_a_note_in_the_grader_and_on_the_web():
    from babel.messages.pofile import read_po
    words = set()
    for path in (ROOT / "grader/translations/ru/LC_MESSAGES/grader.po",
                 ROOT / "web/translations/ru/LC_MESSAGES/messages.po"):
        with open(path, "rb") as f:
            for message in read_po(f, locale="ru"):
                if isinstance(message.id, str) and re.match(r"note\b", message.id.lower()) and message.string:
                    words.add(message.string.split()[0].strip(":").lower())
    assert words == {"примечание"}, words


def test_the_progress_bar_counts_its_steps_from_its_first_frame():
    from rich.console import Console

    from grader.console import progress_bar
    from grader.grading import progress_steps
    from grader.tasks import get_task
    total = progress_steps(get_task("sdpa"))
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=False)
    bar, job = progress_bar(console, "sdpa.py", total, "zh")
    console.print(bar.make_tasks_table(bar.tasks))  # the frame shown before the first check starts
    assert f"0/{total}" in out.getvalue() and "None" not in out.getvalue() and "检查中" in out.getvalue()
    assert total == 3 + len(get_task("sdpa").checks)


def test_the_task_list_is_in_the_readers_language():
    """The list's titles come from each translated spec's heading; its sentence from the catalogue."""
    ru = _cli("tasks", "--lang", "ru", COLUMNS="200")
    assert "sdpa  Масштабированное скалярное внимание: определите scaled_dot_product_attention()  " \
           "(вся постановка: attn-grader tasks sdpa)" in ru.stdout, ru.stdout + ru.stderr
    zh = _cli("tasks", "--lang", "zh", COLUMNS="200")
    assert "mha  多头注意力：定义 multi_head_attention()（完整说明：attn-grader tasks mha）" in zh.stdout
    assert "define" not in ru.stdout + zh.stdout and len(zh.stdout.splitlines()) == 6


def test_no_message_counts_with_an_s_in_brackets():
    """P17: "(s)" plurals became two English forms (grader: ``counted``; web: ngettext)."""
    from babel.messages.pofile import read_po

    from grader.grading import _signature_problem
    from grader.i18n import counted
    plural_marker = re.compile(r"[a-z]\(s\)")
    for path in (ROOT / "grader/translations/grader.pot", ROOT / "web/translations/messages.pot"):
        with open(path, "rb") as f:
            ids = [i for m in read_po(f) if m.id for i in ((m.id,) if isinstance(m.id, str) else m.id)]
        assert not [i for i in ids if plural_marker.search(i.replace("exp(s)", ""))], path
    task = type("Task", (), {"positional": 3, "keywords": ()})()
    one = _signature_problem(task, [{"name": "q", "kind": "POSITIONAL_OR_KEYWORD", "has_default": False}])
    assert str(one) == "your function takes 1 positional argument but the task passes 3"
    assert render(one, "ru") == "ваша функция принимает позиционных аргументов: 1, а задача передаёт 3"
    many = counted(2, "{n} correct option", "{n} correct options", n=2)
    assert str(many) == "2 correct options"
