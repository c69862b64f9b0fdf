"""Moodle XML: the format Moodle's question bank imports (Question bank > Import > Moodle XML).

Kinds map onto Moodle's standard question types: single/multiple -> multichoice (per-answer
feedback and fractions: +100/R for each right option, -100/W for each wrong one, like our own
partial credit), numeric -> numerical (one absolute tolerance; common mistakes as 0% answers
with their feedback), matching -> matching, ordering -> matching of each item to its position
(the ordering type is a plug-in in older Moodles), free_text -> essay with the rubric and model
answer as grader information, code -> essay in a monospaced editor with the starter code as
response template (Moodle has no code runner without the CodeRunner plug-in).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from . import markdown_html
from ..messages import msg
from ..variants import format_number


def _text(parent: ET.Element, tag: str, text: str, fmt: str | None = "html") -> ET.Element:
    el = ET.SubElement(parent, tag, {"format": fmt} if fmt else {})
    ET.SubElement(el, "text").text = text
    return el


def _fraction(value: float) -> str:
    return f"{value:.5f}".rstrip("0").rstrip(".")


def _question(inst: dict) -> ET.Element:
    kind = inst["kind"]
    qtype = {"single": "multichoice", "multiple": "multichoice", "numeric": "numerical",
             "matching": "matching", "ordering": "matching", "free_text": "essay", "code": "essay"}[kind]
    q = ET.Element("question", {"type": qtype})
    name = ET.SubElement(q, "name")
    ET.SubElement(name, "text").text = inst["title"]
    _text(q, "questiontext", markdown_html(inst["prompt"]))
    _text(q, "generalfeedback", markdown_html(inst["explanation"]) if inst["explanation"] else "")
    ET.SubElement(q, "defaultgrade").text = format_number(inst["points"])
    ET.SubElement(q, "penalty").text = "0.3333333"
    ET.SubElement(q, "hidden").text = "0"
    ET.SubElement(q, "idnumber").text = inst["id"]

    if kind in ("single", "multiple"):
        ET.SubElement(q, "single").text = "true" if kind == "single" else "false"
        ET.SubElement(q, "shuffleanswers").text = "true"
        ET.SubElement(q, "answernumbering").text = "abc"
        lang = inst["lang"]
        _text(q, "correctfeedback", msg("correct", lang))
        _text(q, "partiallycorrectfeedback", msg("partial_short", lang))
        _text(q, "incorrectfeedback", msg("incorrect", lang))
        ET.SubElement(q, "shownumcorrect")
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
    elif kind == "numeric":
        a = ET.SubElement(q, "answer", {"fraction": "100"})
        ET.SubElement(a, "text").text = repr(inst["answer"])
        ET.SubElement(a, "tolerance").text = repr(inst["tolerance"])
        _text(a, "feedback", "")
        for m in inst["mistakes"]:
            a = ET.SubElement(q, "answer", {"fraction": "0"})
            ET.SubElement(a, "text").text = repr(m["value"])
            ET.SubElement(a, "tolerance").text = repr(inst["tolerance"])
            _text(a, "feedback", markdown_html(m["feedback"]))
    elif kind in ("matching", "ordering"):
        ET.SubElement(q, "shuffleanswers").text = "true"
        if kind == "matching":
            subs = [(p["left"], p["right"]) for p in inst["pairs"]] + \
                   [("", x["text"]) for x in inst["distractors"]]  # empty stem = distractor
        else:
            subs = [(i["text"], str(n)) for n, i in enumerate(inst["items"], 1)]
        for stem, answer in subs:
            s = _text(q, "subquestion", markdown_html(stem) if stem else "")
            ET.SubElement(ET.SubElement(s, "answer"), "text").text = answer
    else:
        code = kind == "code"
        ET.SubElement(q, "responseformat").text = "monospaced" if code else "editor"
        ET.SubElement(q, "responserequired").text = "1"
        ET.SubElement(q, "responsefieldlines").text = "15"
        ET.SubElement(q, "attachments").text = "0"
        ET.SubElement(q, "attachmentsrequired").text = "0"
        if code:
            info = f"<p>Reference solution:</p><pre><code>{_escape(inst['model_solution'])}</code></pre>"
            _text(q, "graderinfo", info)
            _text(q, "responsetemplate", inst["template"], "plain")
        else:
            rubric = "".join(f"<li>[{format_number(r['points'])}] {_escape(r['text'])}</li>" for r in inst["rubric"])
            _text(q, "graderinfo", f"<ul>{rubric}</ul>{markdown_html(inst['model_answer'])}")
            _text(q, "responsetemplate", "", "html")
    tags = ET.SubElement(q, "tags")
    for tag in inst["topics"] + [f"difficulty-{inst['difficulty']}", "attn-grader"]:
        ET.SubElement(ET.SubElement(tags, "tag"), "text").text = tag
    return q


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_moodle_xml(instances: list[dict], category: str = "attn-grader") -> str:
    quiz = ET.Element("quiz")
    cat = ET.SubElement(quiz, "question", {"type": "category"})
    ET.SubElement(ET.SubElement(cat, "category"), "text").text = f"$course$/top/{category}"
    for inst in instances:
        quiz.append(_question(inst))
    ET.indent(quiz)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(quiz, encoding="unicode") + "\n"
