"""The interface in English, Russian and Chinese: complete catalogues extracted by Babel,
every page in the account's language, the browser's language for a visitor."""
from __future__ import annotations

import re
import shlex
from html import unescape
from pathlib import Path

import pytest

from pages_support import ada, db_session, env, grade_queued, prof, sign_in  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
TRANSLATIONS = ROOT / "web" / "translations"


def _catalogue(path: Path, locale=None):
    from babel.messages.pofile import read_po
    with open(path, "rb") as f:
        return read_po(f, locale=locale)


def _key(value):
    """A message id or translation comparable across .po and .mo (plurals as tuples)."""
    return tuple(value) if isinstance(value, (list, tuple)) else value


@pytest.mark.parametrize("lang, plural_forms", [("ru", 3), ("zh", 1)])
def test_catalogue_has_every_message_translated_and_none_fuzzy(lang, plural_forms):
    wanted = {m.id for m in _catalogue(TRANSLATIONS / "messages.pot") if m.id}
    catalogue = _catalogue(TRANSLATIONS / lang / "LC_MESSAGES" / "messages.po", lang)
    assert catalogue.num_plurals == plural_forms
    entries = {m.id: m for m in catalogue if m.id}
    assert wanted <= set(entries), sorted(map(str, wanted - set(entries)))
    untranslated = [m.id for m in entries.values()
                    if not (all(m.string) if isinstance(m.string, tuple) else m.string)]
    assert not untranslated
    assert not [m.id for m in entries.values() if m.fuzzy]
    plural = [m for m in entries.values() if isinstance(m.id, tuple)]
    assert plural and all(len(m.string) == plural_forms for m in plural)
    # Babel's own checks: the same %(name)s placeholders as the English, formats that parse
    problems = [(m.id, [str(e) for e in errors]) for m, errors in catalogue.check()]
    assert not problems
    # the committed .mo is compiled from this .po (what the server reads is what was reviewed)
    from babel.messages.mofile import read_mo
    with open(TRANSLATIONS / lang / "LC_MESSAGES" / "messages.mo", "rb") as f:
        compiled = {_key(m.id): _key(m.string) for m in read_mo(f) if m.id}
    assert compiled == {_key(key): _key(m.string) for key, m in entries.items()}


def test_every_marked_string_is_in_the_committed_template(tmp_path):
    """`make i18n`'s own extract command, run now, finds exactly the messages.pot's msgids
    (a string marked in a template or a view but not extracted would stay English)."""
    from babel.messages.frontend import CommandLineInterface

    line = next(l for l in (ROOT / "Makefile").read_text().splitlines() if "pybabel extract" in l)
    args = shlex.split(line.split("pybabel", 1)[1])
    out = args.index("-o") + 1
    args[out] = str(tmp_path / "now.pot")
    CommandLineInterface().run(["pybabel", "-q", *args[:-1], str(ROOT)])
    now = {m.id for m in _catalogue(tmp_path / "now.pot") if m.id}
    committed = {m.id for m in _catalogue(TRANSLATIONS / "messages.pot") if m.id}
    assert now == committed, (sorted(map(str, now - committed)), sorted(map(str, committed - now)))
    assert len(now) > 400  # the whole interface, not a handful of strings


# Text in a template that is no message: the product's name and file names shown as links.
UNTRANSLATED_WORDS = {"attn-grader", "questions", "scores", "csv"}
SHOWN_ATTRIBUTES = r'\b(?:title|alt|placeholder|aria-label|data-too-large)="([^"]*)"'


def _unmarked_words(template: str) -> list[str]:
    """Words of a template outside Jinja (so not passed through _()/ngettext()): its text
    between tags and the attributes a person reads; code and scripts are left out."""
    text = re.sub(r"\{#.*?#\}", " ", template, flags=re.S)
    text = re.sub(r"\{\{.*?\}\}|\{%.*?%\}", " ", text, flags=re.S)
    text = re.sub(r"<(script|style|pre|code)\b.*?</\1>", " ", text, flags=re.S)
    shown = " ".join(re.findall(SHOWN_ATTRIBUTES, text))
    text = re.sub(r"<[^>]*>", " ", text, flags=re.S) + " " + shown
    text = re.sub(r"&\w+;", " ", text)
    return [w for w in re.findall(r"[A-Za-z][A-Za-z'-]+", text) if w not in UNTRANSLATED_WORDS]


def test_templates_have_no_unmarked_text():
    left = {str(path.relative_to(ROOT)): words for path in sorted((ROOT / "web" / "templates").rglob("*.html"))
            if (words := _unmarked_words(path.read_text()))}
    assert not left, left
    # the check itself sees plain text and a plain attribute, and skips what _() wraps
    assert _unmarked_words('<p title="Not marked">Hello {{ _("Marked") }}</p>') == ["Hello", "Not", "marked"]


def _as(env, email: str, lang: str):
    """A client signed in to an account whose chosen language is ``lang``."""
    from web.services.users import find_user
    with db_session(env) as session:
        find_user(session, email).locale = lang
        session.commit()
    client = env.app.test_client()
    assert sign_in(client, email).status_code == 302
    return client


def _visible_text(page: str) -> str:
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return unescape(re.sub(r"<[^>]+>", " ", page))


EXPECTED = {
    "ru": {"home": ["Ваши задания", "Открыть задание", "Лучший результат"],
           "task": ["Условие", "Отправить на проверку", "Скачать заготовку"],
           "result": ["Попытка 1", "Код попытки 1", "Не пройдено проверок: 1 из 2."],
           "quiz": ["Начать тест"],
           "quiz_open": ["Сдать тест", "Проверить ответ", "отвечено 0 из"],
           "overview": ["Оценки курса", "Отобрать", "2 студента", "Распределение баллов"]},
    "zh": {"home": ["你的作业", "打开任务", "最高分"],
           "task": ["题目要求", "提交评分", "下载起始文件"],
           "result": ["第 1 次尝试", "第 1 次尝试的代码", "2 项检查中有 1 项未通过。"],
           "quiz": ["开始测验"],
           "quiz_open": ["提交测验", "检查答案", "已作答 0 /"],
           "overview": ["课程成绩", "筛选", "2 名学生", "分数分布"]},
}


@pytest.mark.parametrize("lang", ["ru", "zh"])
def test_student_and_instructor_pages_in_the_accounts_language(env, lang):
    student = _as(env, "ada@example.org", lang)
    expected = EXPECTED[lang]

    def page(client, url):
        response = client.get(url)
        assert response.status_code == 200, url
        text = response.get_data(as_text=True)
        assert f'<html lang="{lang}">' in text, url
        return text

    home = page(student, "/")
    assert all(s in home for s in expected["home"]), home
    task = page(student, "/tasks/sdpa")
    assert all(s in task for s in expected["task"])
    assert "Submit for grading" not in task and "Your attempts" not in task

    response = student.post("/tasks/sdpa", data={"code": "x = 1\n# SCORE=4\n"})
    sid = int(re.search(r"/submissions/(\d+)$", response.location).group(1))
    assert grade_queued(env) == 1
    result = page(student, f"/submissions/{sid}")
    assert all(s in result for s in expected["result"]), _visible_text(result)
    assert "checks failed" not in result and "The code of attempt" not in result

    quiz = page(student, "/quiz/quiz")
    assert all(s in quiz for s in expected["quiz"])
    assert student.post("/quiz/quiz/start").status_code == 302
    quiz = page(student, "/quiz/quiz")
    assert all(s in quiz for s in expected["quiz_open"]), _visible_text(quiz)
    assert "Check answer" not in quiz and "Submit the quiz" not in quiz

    overview = page(_as(env, "prof@example.org", lang), "/instructor/")
    assert all(s in overview for s in expected["overview"]), _visible_text(overview)
    assert "Course scores" not in overview and "Export CSV" not in overview


# What may stay in Latin letters on a translated sign-in page: the product's name and the
# language switch's own names of the languages.
LATIN_ALLOWED = {"attn-grader", "English"}


@pytest.mark.parametrize("lang, heading", [("ru", "Войти"), ("zh", "登录")])
def test_sign_in_page_has_no_english_left(env, lang, heading):
    visitor = env.app.test_client()
    page = visitor.get("/sign-in", headers={"Accept-Language": lang}).get_data(as_text=True)
    assert f'<html lang="{lang}">' in page and f"<h1>{heading}</h1>" in page
    words = set(re.findall(r"[A-Za-z][A-Za-z-]+", _visible_text(page)))
    assert words <= LATIN_ALLOWED, words - LATIN_ALLOWED
    buttons = re.findall(r"<button[^>]*>([^<]*)</button>", page)
    assert buttons and not [b for b in buttons if re.search(r"[A-Za-z]{3}", b) and b not in LATIN_ALLOWED]


def test_a_visitor_gets_the_browsers_language_and_can_switch_it(env):
    visitor = env.app.test_client()
    page = visitor.get("/sign-in", headers={"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.5"}
                       ).get_data(as_text=True)
    assert '<html lang="zh">' in page and "忘记密码？" in page and "保持登录" in page
    assert visitor.get("/sign-in").get_data(as_text=True).count('lang="en"') == 1  # no header: English

    page = visitor.get("/sign-up", headers={"Accept-Language": "zh"}).get_data(as_text=True)
    link = unescape(re.search(r'<a href="([^"]+)" lang="ru"', page).group(1))  # the header's switch
    switched = visitor.get(link)
    assert switched.status_code == 302 and switched.location.endswith("/sign-up")
    page = visitor.get("/sign-up", headers={"Accept-Language": "zh"}).get_data(as_text=True)
    assert '<html lang="ru">' in page and "Создать учётную запись студента" in page  # the choice wins

    # the account made now keeps the language it was made in, for every later sign-in
    assert visitor.post("/sign-up", data={"name": "Cleo", "email": "cleo@example.org",
                                          "password": "a long passphrase 7", "confirm": "a long passphrase 7"}
                        ).status_code == 302
    again = env.app.test_client()
    assert sign_in(again, "cleo@example.org", "a long passphrase 7").status_code == 302
    assert '<html lang="ru">' in again.get("/").get_data(as_text=True)


def test_form_messages_and_refusals_follow_the_language(env):
    visitor = env.app.test_client()
    page = visitor.post("/sign-in", data={"email": "", "password": ""},
                        headers={"Accept-Language": "ru"}).get_data(as_text=True)
    assert "Обязательное поле." in page  # WTForms' own message, from its Russian catalogue
    page = visitor.post("/sign-in", data={"email": "ada@example.org", "password": "wrong one"},
                        headers={"Accept-Language": "zh"}).get_data(as_text=True)
    assert "邮箱或密码错误。" in page
    page = visitor.post("/sign-up", headers={"Accept-Language": "ru"}, data={
        "name": "Cleo", "email": "cleo@example.org", "password": "short", "confirm": "short"}
    ).get_data(as_text=True)
    assert page.count("используйте не меньше 8 символов") == 1


def test_the_account_language_is_the_quiz_language(env, ada):
    """One concept: the account page's switch sets the pages' and the open attempt's language."""
    assert ada.post("/quiz/quiz/start").status_code == 302
    ada.post("/language", data={"lang": "zh", "next": "/account"})
    account = ada.get("/account").get_data(as_text=True)
    assert '<html lang="zh">' in account and "你的账户" in account
    assert re.search(r'<option selected value="zh">|<option value="zh" selected', account)
    from web.models import QuizAttempt
    with db_session(env) as session:
        assert [a.lang for a in session.query(QuizAttempt).filter_by(status="open")] == ["zh"]
    quiz = ada.get("/quiz/quiz").get_data(as_text=True)
    assert '<html lang="zh">' in quiz and "提交测验" in quiz


def test_english_stays_the_default(env, ada):
    page = ada.get("/").get_data(as_text=True)
    assert '<html lang="en">' in page and "Your assignments" in page and "Open task" in page


SPEC_HEADINGS = {"en": "Task `sdpa`: scaled dot-product attention",
                 "ru": "Задание `sdpa`: масштабированное скалярное внимание",
                 "zh": "任务 `sdpa`：缩放点积注意力"}


def test_the_task_page_shows_the_spec_in_the_readers_language(env, ada):
    for lang, heading in SPEC_HEADINGS.items():
        ada.post("/language", data={"lang": lang})  # the account's language
        page = ada.get("/tasks/sdpa").get_data(as_text=True)
        spec = re.search(r'<div class="markdown" lang="(\w+)"><h1>(.*?)</h1>', page, re.S)
        assert spec.group(1) == lang
        assert spec.group(2) == re.sub(r"`(\w+)`", r"<code>\1</code>", heading)
        assert "def scaled_dot_product_attention(query, key, value" in _visible_text(page)


def test_a_task_without_a_translation_is_shown_in_english(tmp_path):
    from grader.tasks import TASKS, Task

    home = tmp_path / "softmax_task.py"
    (tmp_path / "softmax.md").write_text("# Task `softmax`\n", encoding="utf-8")
    (tmp_path / "softmax.ru.md").write_text("# Задание `softmax`\n", encoding="utf-8")
    task = Task(id="softmax", title="softmax", function="softmax", home=str(home), positional=1,
                keywords=(), arg_names=("x",), points={"output": 100}, build=lambda: None)
    assert task.spec_in("ru") == ("# Задание `softmax`\n", "ru")
    assert task.spec_in("zh") == ("# Task `softmax`\n", "en")  # no softmax.zh.md: English
    assert task.spec_in(None) == task.spec_in("en") == ("# Task `softmax`\n", "en")
    for task in TASKS.values():  # every built-in task ships both translations
        assert [task.spec_in(lang)[1] for lang in ("ru", "zh")] == ["ru", "zh"], task.id


@pytest.mark.parametrize("lang", ["ru", "zh"])
def test_a_translated_spec_keeps_the_english_code_and_identifiers(lang):
    """The translations are prose around the same code: every code block and every `identifier`
    of the English spec appears in each translation, unchanged."""
    from grader.tasks import TASKS

    def code(markdown: str):
        blocks = re.findall(r"```.*?\n(.*?)```", markdown, re.S)
        inline = set(re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", markdown, flags=re.S)))
        return blocks, inline

    for task in TASKS.values():
        english, translated = code(task.spec_markdown), code(task.spec_in(lang)[0])
        assert translated[0] == english[0], task.id
        assert translated[1] == english[1], (task.id, english[1] ^ translated[1])
