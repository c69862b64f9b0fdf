"""How Moodle grades what our Moodle XML and GIFT exports give it, emulated, so that tests can
check that an exported question scores a response as the service does (no Moodle runs here).

Each rule follows Moodle's own code (question/type/*/question.php, question/format/gift):

* short answer: the answers are tried in their order and the first whose pattern matches the
  trimmed response gives its fraction; in a pattern a run of unescaped ``*`` is a wildcard and
  ``\\*`` a literal asterisk; case is ignored unless ``usecase`` is 1
  (``qtype_shortanswer_question::compare_string_with_wildcard``);
* numerical: the first answer whose value is within its (nominal) tolerance gives its fraction;
* multichoice: one option's fraction (single), or the sum of the chosen options' fractions
  clamped to [0, 1] (multiple);
* matching: the share of sub-questions matched right;
* ordering, "relative to all previous and next": for each item, the share of the other items
  that are on the same side of it as in the key, averaged;
* GIFT: ``\\\\`` is a backslash and ``\\~ \\= \\# \\{ \\} \\:`` are the literal characters, ``\\n`` a
  line break (``qformat_gift::escapedchar_pre/post``); any other backslash stays. Answers are
  split at unescaped ``=`` and ``~``, a ``%n%`` prefix is the weight, ``#`` starts the feedback.
"""
from __future__ import annotations

import re
import unicodedata

from lxml import etree


def wildcard_match(response: str, pattern: str, ignorecase: bool) -> bool:
    pattern, response = unicodedata.normalize("NFC", pattern), unicodedata.normalize("NFC", response)
    bits = re.split(r"(?<!\\)\*+", pattern)
    regex = "^" + ".*".join(re.escape(bit.replace("\\*", "*")) for bit in bits) + "$"
    return re.search(regex, response.strip(), re.I | re.S if ignorecase else re.S) is not None


def shortanswer(answers: list[tuple[float, str]], response: str, ignorecase: bool) -> float:
    """The fraction (0..1) Moodle gives ``response``; ``answers`` as (fraction in %, pattern)."""
    for fraction, pattern in answers:
        if pattern == "*" or wildcard_match(response, pattern, ignorecase):
            return fraction / 100
    return 0.0


def numerical(answers: list[tuple[float, float, float]], response: float) -> float:
    """``answers`` as (fraction in %, value, tolerance)."""
    for fraction, value, tolerance in answers:
        if abs(response - value) <= abs(tolerance) + 1e-12 * max(1.0, abs(value)):
            return fraction / 100
    return 0.0


def multichoice(fractions: list[float], picked: list[int]) -> float:
    return min(1.0, max(0.0, sum(fractions[i] for i in picked) / 100))


def relative_order(key: list[str], response: list[str]) -> float:
    """Moodle ordering's RELATIVE_ALL_PREVIOUS_AND_NEXT."""
    where = {item: n for n, item in enumerate(response)}
    total = right = 0
    for i, item in enumerate(key):
        for j, other in enumerate(key):
            if i != j:
                total += 1
                right += (where[item] < where[other]) == (i < j)
    return right / total


# -- reading the exports back as Moodle does ----------------------------------------------------

def moodle_answers(el: etree._Element) -> list[tuple[float, str]]:
    return [(float(a.get("fraction")), a.findtext("text")) for a in el.findall("answer")]


def moodle_numerical_answers(el: etree._Element) -> list[tuple[float, float, float]]:
    return [(float(a.get("fraction")), float(a.findtext("text")), float(a.findtext("tolerance")))
            for a in el.findall("answer")]


_GIFT_ESCAPES = {":": "\x01058", "#": "\x01035", "=": "\x01061", "{": "\x01123", "}": "\x01125",
                 "~": "\x01126", "n": "\x01010"}


def gift_pre(text: str) -> str:
    text = text.replace("\\\\", "\x01092")
    for char, placeholder in _GIFT_ESCAPES.items():
        text = text.replace("\\" + char, placeholder)
    return text.replace("\x01092", "\\")


def gift_post(text: str) -> str:
    for char, placeholder in _GIFT_ESCAPES.items():
        text = text.replace(placeholder, "\n" if char == "n" else char)
    return text


def gift_answers(block: str) -> tuple[str, list[tuple[str, float | None, str, str]]]:
    """The answer part of one GIFT question: (``"#"`` for numerical else ``""``, [(mark ``=``/``~``,
    weight in % or None, answer text, feedback)]), texts unescaped as Moodle does."""
    text = gift_pre("\n".join(line for line in block.split("\n") if not line.startswith("//")))
    body = text[text.index("{") + 1:text.rindex("}")]
    body = body.split("####")[0]  # general feedback
    numeric = body.startswith("#")
    if numeric:
        body = body[1:]
    out = []
    for mark, part in re.findall(r"([=~])([^=~]*)", body):
        weight = None
        m = re.match(r"\s*%(-?[\d.]+)%", part)
        if m:
            weight, part = float(m.group(1)), part[m.end():]
        answer, _, feedback = part.partition("#")
        out.append((mark, weight, gift_post(answer.strip()), gift_post(feedback.strip())))
    return ("#" if numeric else ""), out
