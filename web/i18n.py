"""The interface language: one per account, used for every page, quiz and message.

Flask-Babel is set up here, for the whole app (pages and JSON API), so a message from
``web.services`` can be marked with ``gettext`` whichever blueprint shows it. The catalogues
are web/translations (extracted by ``make i18n``; see babel.cfg).

The language is chosen in this order: a signed-in account's ``User.locale`` (set at sign-up
and by the language switch: every session and device of the account reads the one saved
value, so a session begun before a change cannot show, or write back, the old one); for a
visitor, the session's (the header's links), then the browser's Accept-Language; English
otherwise.
"""
from __future__ import annotations

from pathlib import Path

from flask import Flask, has_request_context, request, session
from flask_babel import Babel
from flask_login import current_user

from grader.i18n import LANGUAGES as GRADER_LANGUAGES

# The grader's languages (its catalogues decide which exist), each named in itself.
LANGUAGES = dict(zip(GRADER_LANGUAGES, ("English", "Русский", "中文"), strict=True))
DEFAULT_LANGUAGE = "en"
TRANSLATIONS = Path(__file__).resolve().parent / "translations"


def interface_language() -> str:
    """The language code of this request's pages and messages (one of ``LANGUAGES``)."""
    if not has_request_context():
        return DEFAULT_LANGUAGE
    if current_user and current_user.is_authenticated:
        lang = current_user.locale
    else:
        lang = session.get("lang")
    return lang if lang in LANGUAGES else _browser_language()


def visitor_language() -> str:
    """The language a page can choose without the database (the session's, else the browser's):
    what an answer to a database outage speaks."""
    if not has_request_context():
        return DEFAULT_LANGUAGE
    lang = session.get("lang")
    return lang if lang in LANGUAGES else _browser_language()


def _browser_language() -> str:
    lang = request.accept_languages.best_match(list(LANGUAGES))
    return lang if lang in LANGUAGES else DEFAULT_LANGUAGE


def _request_locale() -> str:
    from flask_babel import get_locale

    return str(get_locale() or DEFAULT_LANGUAGE)


def grader_text(text, stored=None) -> str:
    """A grader message (a check's, a wait's units, quiz feedback: the grader's own catalogue,
    grader/i18n.py) in this request's language, from its stored template when there is one."""
    from grader.i18n import render
    return render(stored or text, _request_locale())


def grader_skip_reason(text, stored=None) -> str:
    """A skipped check's message in this request's language, without its "skipped: "."""
    from grader.i18n import skip_reason
    return skip_reason(stored or text, _request_locale())


def init_app(app: Flask) -> None:
    Babel(app, locale_selector=interface_language, default_locale=DEFAULT_LANGUAGE,
          default_translation_directories=str(TRANSLATIONS))
