"""What the page views share: access rules, formatting filters, Markdown and Pygments."""
from __future__ import annotations

import difflib
import re
from datetime import datetime
from functools import wraps
from pathlib import Path

from babel.numbers import format_percent as cldr_percent
from flask import abort
from flask_babel import format_decimal, format_percent as babel_percent, get_locale
from markdown_it import MarkdownIt
from flask_login import current_user, login_required
from markupsafe import Markup, escape
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer, PythonLexer, TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

from ..extensions import db_session
from ..i18n import LANGUAGES, interface_language  # noqa: F401  (the views import them from here)
from ..models import utcnow

PYGMENTS_STYLE = "xcode"  # every token colour at 4.5:1 or more on its white (WCAG AA)


def instructor_required(view):
    """Signed-in instructors only; a student gets 403, an anonymous visitor the sign-in page."""
    @login_required
    @wraps(view)
    def wrapped(*args, **kwargs):
        if not current_user.is_instructor:
            abort(403)
        return view(*args, **kwargs)
    return wrapped


def db():
    return db_session()


# ---- filters -----------------------------------------------------------------------------

def format_when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment else "—"


def format_points(value) -> str:
    """Points as a person reads them: 2, 0.33, 6.73 (two decimals at most, no trailing zeros),
    with the page's decimal sign (6,73 in Russian)."""
    if value is None:
        return "—"
    return format_decimal(round(float(value), 2), format="0.##") if isinstance(value, float) else str(value)


def format_score(value, top=None) -> str:
    if value is None:
        return "—"
    text = format_points(value)
    return f"{text} / {format_points(top)}" if top is not None else text


def format_percent(value, decimals: int = 0) -> str:
    """A share as a percentage: 73%; with ``decimals``, in the page language's own pattern
    and at most that many decimals (13.3%, 13,3 % in Russian, 40% not 40.0%)."""
    if value is None:
        return "—"
    if decimals:
        return cldr_percent(round(value, 2 + decimals), locale=get_locale() or "en",
                            decimal_quantization=False)
    return babel_percent(value, format="#,##0%")


def format_seconds(value) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


# Chinese runs sentences together: a template's line break or space between two translated
# sentences must not show as an ASCII space after 。，：; (after a tag's end too)
_CJK_GAP = re.compile(r"(?<=[。，：；！？、）])\s+|(?<=[。，：；！？、）]</a>)\s+")


def tidy_cjk_spacing(text) -> Markup:
    """``text`` (HTML) without the whitespace that follows full-width punctuation."""
    return Markup(_CJK_GAP.sub("", str(escape(text))))


def relative_path(path) -> str:
    """A server path as an instructor can use it: relative to the service's checkout (the
    server's absolute layout is none of the page's business, review 2: N16)."""
    path = Path(str(path)).resolve()
    try:
        return str(path.relative_to(Path(__file__).resolve().parents[2]))
    except ValueError:  # installed elsewhere: the package's own folders
        return "/".join(path.parts[-2:])


def template_globals() -> dict:
    from ..security import password_rules  # the form says the rules its check enforces

    return {"languages": LANGUAGES, "now": utcnow(), "interface_lang": interface_language,
            "password_rules": password_rules}


# ---- rendering ---------------------------------------------------------------------------

def _highlight_fence(code: str, lang: str, _attrs) -> str:
    try:
        lexer = get_lexer_by_name(lang) if lang else TextLexer()
    except ClassNotFound:
        lexer = TextLexer()
    spans = highlight(code, lexer, HtmlFormatter(nowrap=True))
    return f'<pre class="highlight">{spans}</pre>'


# CommonMark (nested lists indented by two spaces, as the task specs are written) plus tables;
# raw HTML in the source is shown as text.
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "highlight": _highlight_fence}).enable("table")


def render_markdown(text: str) -> Markup:
    """Task specs and quiz prompts (Markdown from the repository) to HTML; fenced code is
    highlighted by Pygments."""
    return Markup(_MARKDOWN.render(text))


def render_inline(text: str) -> Markup:
    """One line of Markdown (a quiz option: `code`, *emphasis*) to HTML, raw HTML escaped."""
    return Markup(_MARKDOWN.renderInline(text))


def highlight_python(code: str, linenos: bool = True) -> Markup:
    """Untrusted code as highlighted HTML; Pygments escapes every token."""
    formatter = HtmlFormatter(linenos="table" if linenos else False, cssclass="highlight")
    return Markup(highlight(code, PythonLexer(), formatter))


def code_diff(old: str, new: str, old_name: str, new_name: str) -> Markup | None:
    """A unified diff of two submissions, highlighted (escaped) by Pygments; None if equal."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name,
                                      lineterm="", n=3))
    if not lines:
        return None
    return Markup(highlight("\n".join(lines), DiffLexer(), HtmlFormatter(cssclass="highlight")))


def side_by_side(old: str, new: str, old_name: str, new_name: str) -> Markup | None:
    """Two versions in columns with the changed lines marked (difflib.HtmlDiff escapes the
    code); None if they are equal."""
    if old == new:
        return None
    table = difflib.HtmlDiff(tabsize=4, wrapcolumn=80).make_table(
        old.splitlines(), new.splitlines(), old_name, new_name, context=True, numlines=3)
    return Markup(table)


def pygments_css() -> str:
    return HtmlFormatter(style=PYGMENTS_STYLE).get_style_defs(".highlight")
