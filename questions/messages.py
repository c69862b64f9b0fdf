"""The quiz grader's own feedback sentences, and the bank's texts as feedback parts.

Feedback is made in English as a :class:`grader.i18n.T` (template + arguments), like the
grader's checks, and rendered in the *reader's* language when a page shows it
(``grader.i18n.render``): a student, their instructor and a later language switch each read it
in their own language. The sentences are in the grader's catalogue (domain ``grader``,
grader/translations; ``make i18n`` extracts them from questions/ too, see babel-grader.cfg).

What the question's author wrote (option feedback, a known mistake's feedback, the
explanation) is in the bank in every language already; it enters the feedback as
:class:`grader.i18n.Texts` holding each language's version, numbers written as each
language writes them.
"""
from __future__ import annotations

from grader.i18n import N_, T, Texts, render

from .schema import LANGS
from .variants import format_number, substitute

# The fixed verdicts, also used by the exports (Moodle's correct/partial/incorrect feedback)
CORRECT = N_("Correct.")
INCORRECT = N_("Not correct.")
PARTLY_CORRECT = N_("Partly correct.")
DECIMAL_POINT = N_("Write the number with a decimal point, for example 0.125.")


def in_language(text: str, lang: str) -> str:
    """A fixed sentence in ``lang``, for the exports (one file per language)."""
    return render(text, lang)


def bank_text(texts: dict, env: dict) -> Texts:
    """An author's text ({en, ru, zh} in the bank) with the variant's parameters filled in, each
    language's numbers written its way."""
    return Texts({lang: substitute(texts.get(lang, texts["en"]), env, lang) for lang in LANGS})


def number(value) -> Texts:
    """A number in feedback: 0.125 in English and Chinese, 0,125 in Russian."""
    return Texts({lang: format_number(value, lang) for lang in LANGS})


# An answer the grading workers could not grade (host lost, grader error; ``reason`` in English)
def not_graded(reason: str) -> T:
    return T("Not graded: {reason}.", reason=reason)


def not_graded_kept(reason: str) -> T:
    """The attempt is still open: the student may send the answer again."""
    return T("Not graded ({reason}). Your answer is kept; send it again.", reason=reason)


def not_graded_for_instructor(reason: str) -> T:
    """The attempt is submitted: the answer goes to the instructor's grading queue."""
    return T("Not graded automatically ({reason}); your instructor will grade it.", reason=reason)
