"""The grader's feedback and the CLI's output in English, Russian and Chinese.

A check's message is made in English, always, so a score and every stored report are the same
whatever language anyone reads them in. ``T(template, **args)`` is that English text (a ``str``:
every existing use keeps working) remembering its template and arguments; a report stores them
beside the English (``entry``) so that ``render`` can give the same feedback in the *viewer's*
language later: an instructor and a student may read one report in two languages, and an
account may change its language after grading. ``Texts`` is a text its author wrote in every
language (a quiz question's option feedback) and ``joined`` joins messages without losing
their templates; the quiz's feedback (questions/) is made and stored the same way.

Catalogues: ``grader/translations/<lang>/LC_MESSAGES/grader.po`` (domain ``grader``), extracted
from the ``T(...)``, ``N_(...)`` and ``_(...)`` calls by ``pybabel`` (``make i18n``) and compiled
to ``.mo``; read here with the standard library's ``gettext``, so the students' package needs
neither Babel nor Flask.
"""
from __future__ import annotations

import functools
import gettext
import math
import numbers
import os

DOMAIN = "grader"
LOCALE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "translations")
LANGUAGES = ("en", "ru", "zh")


class T(str):
    """English feedback text that also carries its ``template`` and ``args``.

    ``T("passed")`` (no arguments) is literal text; with arguments the template is ``str.format``'s.

    ``args`` are kept JSON-friendly: numbers, strings, None and other ``T`` values (rendered
    recursively, so a message can be built from translatable parts); anything else (shapes,
    dtypes) becomes its ``str`` here, so English and every translation show the same value.
    """

    template: str
    args: dict

    def __new__(cls, template: str, /, **args):
        args = {key: _argument(value) for key, value in args.items()}
        # without arguments the template is literal text (a bug's sentence may hold braces)
        self = super().__new__(cls, template.format(**args) if args else template)
        self.template, self.args = template, args
        return self

    def __reduce__(self):  # pickled as template + args, not as the English text
        return _rebuild, (self.template, self.args)

    # Joining keeps both halves translatable ("message" + " (not scored: …)").
    def __add__(self, other):
        if not isinstance(other, str):
            return NotImplemented
        return _rebuild("{first}{second}", {"first": self, "second": other})

    def __radd__(self, other):
        if not isinstance(other, str):
            return NotImplemented
        return _rebuild("{first}{second}", {"first": other, "second": self})


def _rebuild(template: str, args: dict) -> T:
    return T(template, **args)


class Texts(str):
    """A text its author wrote in each language (a quiz question's option feedback, a number as
    each language writes it: 0.5 / 0,5): the English, remembering every version, so that a
    ``T`` built from it still renders wholly in the reader's language. Stored as {"l": texts}."""

    texts: dict

    def __new__(cls, texts: dict):
        self = super().__new__(cls, texts.get("en", next(iter(texts.values()), "")))
        self.texts = {str(lang): str(text) for lang, text in texts.items()}
        return self

    def __reduce__(self):
        return Texts, (self.texts,)

    def shown(self, lang: str | None) -> str:
        return self.texts.get(normalise(lang) or "en", str(self))


def joined(parts, separator: str = " ") -> T:
    """``separator.join(parts)`` that keeps every part translatable (``str.join`` would give
    plain English). The template is only placeholders: no catalogue entry, nothing to translate."""
    parts = list(parts)
    literal = separator.replace("{", "{{").replace("}", "}}")
    template = literal.join(f"{{p{i}}}" for i in range(len(parts)))
    return _rebuild(template, {f"p{i}": part for i, part in enumerate(parts)})


def counted(n: int, one: str, many: str, /, **args) -> T:
    """The sentence for ``n`` things, never "(s)": English has two forms, each its own catalogue
    entry (mark both with ``N_``); the translations word them so that one form fits every count
    ("найдено ошибок: {n}"), since a report stores the English template it was made with."""
    return T(one if n == 1 else many, **args)


def N_(text: str) -> str:
    """Marks a constant for extraction; ``render`` translates it by its English text."""
    return text


def _argument(value):
    if isinstance(value, (T, Texts)) or value is None or type(value) in (bool, int, float):
        return value
    if isinstance(value, numbers.Integral):  # numpy integers: plain, so JSON and format specs take them
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if getattr(value, "shape", None) == () and hasattr(value, "item"):  # a 0-d tensor, as f-strings took it
        return value.item()
    return str(value)


def entry(text) -> dict | str | None:
    """What a report stores for ``text``: {"t": template, "a": {name: arg}} for a ``T`` (nested
    ``T`` args as entries, non-finite floats as {"float": "nan"}), {"l": {lang: text}} for
    ``Texts``, the text itself otherwise."""
    if isinstance(text, Texts):
        return {"l": text.texts}
    if not isinstance(text, T):
        return text
    return {"t": text.template, "a": {key: _stored(value) for key, value in text.args.items()}}


def _stored(value):
    if isinstance(value, (T, Texts)):
        return entry(value)
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    return value


@functools.lru_cache(maxsize=None)
def translation(lang: str | None) -> gettext.NullTranslations:
    """The catalogue of ``lang`` ('ru', 'zh'; English and anything unknown: no translation)."""
    lang = normalise(lang)
    if lang in (None, "en"):
        return gettext.NullTranslations()
    return gettext.translation(DOMAIN, LOCALE_DIR, languages=[lang], fallback=True)


def normalise(lang: str | None) -> str | None:
    """'ru_RU.UTF-8' -> 'ru', 'zh-Hans-CN' -> 'zh'; None for a language the grader does not speak."""
    if not lang:
        return None
    code = lang.replace("-", "_").split(".")[0].split("@")[0].split("_")[0].lower()
    return code if code in LANGUAGES else None


def language_from_environment(environ=None) -> str | None:
    """The first language the POSIX variables name (LANGUAGE, LC_ALL, LC_MESSAGES, LANG, as gettext
    reads them) that the grader speaks; None where they name none ('C', 'POSIX', unset)."""
    environ = os.environ if environ is None else environ
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(name)
        if not value:
            continue
        for part in value.split(":"):  # LANGUAGE may list several: ru:en
            lang = normalise(part)
            if lang:
                return lang
        if name != "LANGUAGE":  # the first of LC_ALL/LC_MESSAGES/LANG that is set decides
            return None
    return None


def gettext_for(lang: str | None):
    """``_`` for the CLI's fixed strings in ``lang``."""
    return translation(lang).gettext


def render(text, lang: str | None) -> str:
    """``text`` (a ``T``, a stored entry, or plain English) in ``lang``.

    A template the catalogue does not know stays English with its arguments still rendered; a
    plain string is looked up whole (constant messages, and reports stored before templates
    were). A translation whose placeholders do not fit falls back to the English template.
    """
    if text is None:
        return ""
    if isinstance(text, (T, Texts)):
        text = entry(text)
    if isinstance(text, dict) and ("t" in text or "l" in text):
        return _loaded(text, lang)
    return translation(lang).gettext(str(text)) if text else str(text)


SKIPPED = N_("skipped: ")  # how every skipped check's message starts


def skip_reason(text, lang: str | None) -> str:
    """A skipped check's message in ``lang`` without its "skipped: " (listed once per reason)."""
    shown = render(text, lang)
    return shown.removeprefix(translation(lang).gettext(SKIPPED)).removeprefix(SKIPPED)


def _render_entry(stored: dict, lang: str | None) -> str:
    template = str(stored["t"])
    args = {key: _loaded(value, lang) for key, value in (stored.get("a") or {}).items()}
    translated = translation(lang).gettext(template) if template else template
    if not args:
        return translated
    try:
        return translated.format(**args)
    except (KeyError, IndexError, ValueError):
        try:
            return template.format(**args)
        except (KeyError, IndexError, ValueError):
            return template


def _loaded(value, lang: str | None):
    if isinstance(value, dict) and "t" in value:
        return _render_entry(value, lang)
    if isinstance(value, dict) and "l" in value:  # Texts: the author's version for ``lang``
        texts = value["l"]
        return texts.get(normalise(lang) or "en", texts.get("en", ""))
    if isinstance(value, dict) and "float" in value:
        return float(value["float"])
    return value
