"""Moodle XML: the format Moodle's question bank imports (Question bank > Import > Moodle XML).

Kinds map onto Moodle's standard question types: single/multiple -> multichoice (per-answer
feedback and fractions: +100/R for each right option, -100/W for each wrong one, like our own
partial credit), numeric -> numerical (the key and each common mistake as answers, each with
the bank's tolerance around its own value, mistakes at 0 % with their feedback), matching ->
matching (a distractor's feedback goes into the general feedback: Moodle has no per-choice
feedback there), ordering -> Moodle's ordering type (standard since Moodle 4.4, a plug-in
before) graded "relative to all previous and next", our relative-order credit; a misplacement's
cap is not expressible there, so its feedback goes into the general feedback. For an older
Moodle, ``legacy_ordering`` writes ordering as matching of each item to its position (absolute
positions). free_text -> essay with the rubric and model answer as grader information, code ->
essay in a monospaced editor with the starter code as response template and the reference
solution for the grader (Moodle runs no code without the CodeRunner plug-in). matrix -> Cloze
(embedded answers): one NUMERICAL blank per entry, each with the tolerance, a mark each (Moodle
totals a Cloze question's marks from its blanks: rescale it in the quiz); a matrix entry
(``ask: entry``) -> numerical. shape, big_o and expression -> short answer accepting the usual
spellings of the key (``(2, 8, 10, 16)``, ``torch.Size([...])``, ``O(n^2 d)``, ``n**2*d``,
``d_k*(1 + 2*mu^2)``...), each mistake's spellings at 0 % with its feedback; an equivalent form
Moodle does not list (an unusual order or spacing) is marked wrong there, unlike in the service,
so review those. The spellings are literal patterns: Moodle's short answer reads an unescaped
``*`` as a wildcard, so each is written ``\\*`` (``shortanswer_pattern``).

Texts are HTML inside CDATA, as Moodle's own exporter writes them: Moodle's parser drops a
whitespace-only text chunk, which turned "<code>(L, S)</code> для" into "(L, S)для" before
Cyrillic and Chinese text when the HTML was written escaped.
"""
from __future__ import annotations

import html

from lxml import etree

from . import markdown_html, plain_decimal
from ..messages import CORRECT, INCORRECT, PARTLY_CORRECT, in_language
from ..variants import format_number


def _cdata(text: str):
    return etree.CDATA(text) if text and "]]>" not in text else text


def _text(parent, tag: str, text: str, fmt: str | None = "html"):
    el = etree.SubElement(parent, tag, {"format": fmt} if fmt else {})
    etree.SubElement(el, "text").text = _cdata(text)
    return el


def _plain(parent, tag: str, text: str):
    etree.SubElement(parent, tag).text = text


def shortanswer_pattern(text: str) -> str:
    """A spelling as a Moodle short-answer pattern that matches only itself: in a pattern an
    unescaped ``*`` is a wildcard (``O(d*n^2)`` would accept ``O(d^3 n^2)``), ``\\*`` a literal one."""
    return text.replace("*", "\\*")


def _fraction(value: float) -> str:
    return f"{value:.5f}".rstrip("0").rstrip(".")


QTYPES = {"single": "multichoice", "multiple": "multichoice", "numeric": "numerical", "matching": "matching",
          "ordering": "ordering", "free_text": "essay", "code": "essay", "shape": "shortanswer",
          "big_o": "shortanswer", "expression": "shortanswer"}


def _qtype(inst: dict, legacy_ordering: bool) -> str:
    if inst["kind"] == "matrix":
        return "numerical" if inst["ask"] == "entry" else "cloze"
    if inst["kind"] == "ordering" and legacy_ordering:
        return "matching"
    return QTYPES[inst["kind"]]


def _general_feedback(inst: dict) -> str:
    parts = [inst["explanation"]] if inst["explanation"] else []
    parts += [m["feedback"] for m in inst.get("misplacements") or []]
    parts += [x["feedback"] for x in inst.get("distractors") or [] if x.get("feedback")]
    return "\n\n".join(parts)


def _question(inst: dict, legacy_ordering: bool = False):
    kind, qtype = inst["kind"], _qtype(inst, legacy_ordering)
    q = etree.Element("question", {"type": qtype})
    etree.SubElement(etree.SubElement(q, "name"), "text").text = _cdata(inst["title"])
    prompt = markdown_html(inst["prompt"])
    if qtype == "cloze":
        prompt += _cloze_table(inst)
    _text(q, "questiontext", prompt)
    general = _general_feedback(inst)
    _text(q, "generalfeedback", markdown_html(general) if general else "")
    if qtype != "cloze":  # a Cloze question's mark is the sum of its blanks'
        _plain(q, "defaultgrade", format_number(inst["points"]))
    _plain(q, "penalty", "0.3333333")
    _plain(q, "hidden", "0")
    _plain(q, "idnumber", inst["id"])
    lang = inst["lang"]

    if kind in ("single", "multiple"):
        _plain(q, "single", "true" if kind == "single" else "false")
        _plain(q, "shuffleanswers", "true")
        _plain(q, "answernumbering", "abc")
        _combined_feedback(q, lang)
        etree.SubElement(q, "shownumcorrect")
        right = sum(o["correct"] for o in inst["options"])
        wrong = len(inst["options"]) - right
        for o in inst["options"]:
            if kind == "single":
                fraction = 100.0 if o["correct"] else 0.0
            else:
                fraction = 100.0 / right if o["correct"] else -100.0 / wrong
            a = _text(q, "answer", markdown_html(o["text"]))
            a.set("fraction", _fraction(fraction))
            _text(a, "feedback", markdown_html(o["feedback"]))
    elif qtype == "numerical":
        answers = [(100, inst["answer"], inst["tolerance"], "")] + \
                  [(0, m["value"], m["tolerance"], markdown_html(m["feedback"])) for m in inst["mistakes"]]
        for fraction, value, tolerance, feedback in answers:
            a = etree.SubElement(q, "answer", {"fraction": str(fraction), "format": "moodle_auto_format"})
            _plain(a, "text", plain_decimal(value))
            _plain(a, "tolerance", plain_decimal(tolerance))
            _text(a, "feedback", feedback)
    elif qtype == "shortanswer":
        # the service reads the names in a big-O or formula answer case-sensitively (``N`` is not ``n``)
        _plain(q, "usecase", "1" if kind in ("big_o", "expression") else "0")
        answers = [(100, text, "") for text in inst["spellings"]]
        answers += [(0, text, markdown_html(m["feedback"])) for m in inst["mistakes"] for text in m["spellings"]]
        for fraction, text, feedback in answers:
            a = etree.SubElement(q, "answer", {"fraction": str(fraction), "format": "moodle_auto_format"})
            etree.SubElement(a, "text").text = shortanswer_pattern(text)
            _text(a, "feedback", feedback)
    elif qtype == "ordering":
        for tag, value in (("layouttype", "VERTICAL"), ("selecttype", "ALL"), ("selectcount", "0"),
                           ("gradingtype", "RELATIVE_ALL_PREVIOUS_AND_NEXT"), ("showgrading", "SHOW"),
                           ("numberingstyle", "none")):
            _plain(q, tag, value)
        _combined_feedback(q, lang)
        etree.SubElement(q, "shownumcorrect")
        for n, i in enumerate(inst["items"], 1):  # in the key's order; Moodle shuffles them
            a = _text(q, "answer", markdown_html(i["text"]))
            a.set("fraction", str(n))
    elif qtype == "matching":
        _plain(q, "shuffleanswers", "true")
        if kind == "matching":
            subs = [(p["left"], p["right"]) for p in inst["pairs"]] + \
                   [("", x["text"]) for x in inst["distractors"]]  # empty stem = distractor
        else:
            subs = [(i["text"], str(n)) for n, i in enumerate(inst["items"], 1)]
        for stem, answer in subs:
            s = _text(q, "subquestion", markdown_html(stem) if stem else "")
            etree.SubElement(etree.SubElement(s, "answer"), "text").text = _cdata(answer)
    elif qtype == "essay":
        code = kind == "code"
        _plain(q, "responseformat", "monospaced" if code else "editor")
        _plain(q, "responserequired", "1")
        _plain(q, "responsefieldlines", "15")
        _plain(q, "attachments", "0")
        _plain(q, "attachmentsrequired", "0")
        if code:
            info = (f"<p>Reference solution:</p><pre><code>{html.escape(inst['model_solution'])}</code></pre>"
                    f"<p>The starter code is the response template; grade against the reference.</p>")
            _text(q, "graderinfo", info)
            _text(q, "responsetemplate", inst["template"], "plain")
        else:
            rubric = "".join(f"<li>[{format_number(r['points'])}] {html.escape(r['text'])}</li>"
                             for r in inst["rubric"])
            _text(q, "graderinfo", f"<ul>{rubric}</ul>{markdown_html(inst['model_answer'])}")
            _text(q, "responsetemplate", "", "html")
    tags = etree.SubElement(q, "tags")
    for tag in inst["topics"] + [f"difficulty-{inst['difficulty']}", "attn-grader"]:
        etree.SubElement(etree.SubElement(tags, "tag"), "text").text = tag
    return q


def _combined_feedback(q, lang: str) -> None:
    _text(q, "correctfeedback", in_language(CORRECT, lang))
    _text(q, "partiallycorrectfeedback", in_language(PARTLY_CORRECT, lang))
    _text(q, "incorrectfeedback", in_language(INCORRECT, lang))


def _cloze_table(inst: dict) -> str:
    """The answer grid: one embedded NUMERICAL answer per entry (key and tolerance)."""
    tol = plain_decimal(inst["tolerance"])
    rows = "".join("<tr>" + "".join(f"<td>{{1:NUMERICAL:={plain_decimal(x)}:{tol}}}</td>" for x in row) + "</tr>"
                   for row in inst["matrix"])
    return f'<table class="attn-matrix">{rows}</table>'


def to_moodle_xml(instances: list[dict], category: str = "attn-grader", legacy_ordering: bool = False) -> str:
    quiz = etree.Element("quiz")
    cat = etree.SubElement(quiz, "question", {"type": "category"})
    etree.SubElement(etree.SubElement(cat, "category"), "text").text = f"$course$/top/{category}"
    for inst in instances:
        quiz.append(_question(inst, legacy_ordering))
    etree.indent(quiz)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + etree.tostring(quiz, encoding="unicode") + "\n"
