"""IMS QTI 2.1: one assessmentItem per question variant plus an IMS content-package manifest.

Packaged by :mod:`questions.export.qti_package` (a zip or a directory). Interactions: choiceInteraction
(single: match_correct with per-option modal feedback; multiple: map_response with the
same +1/R, -1/W weights as our grading), textEntryInteraction with a float response and an
absolute tolerance (each common mistake is a further branch with its own tolerance and modal
feedback), orderInteraction (credit by relative order, as in the bank: a share of the points
for each pair of items in the key's order, and a misplacement's cap and feedback),
a table of float textEntryInteractions for a matrix (a share per entry within the tolerance,
a modal feedback when the whole matrix is a listed mistake; one entry is a numeric item),
a string textEntryInteraction for a shape or a big-O answer (the key's usual spellings,
compared with stringMatch, ignoring case; each mistake's spellings for its feedback),
matchInteraction (directedPair, one point share per pair), extendedTextInteraction for free
text and code (scored by hand: the rubric and model answer, or the reference solution, go into
a ``rubricBlock`` for scorers; a code item shows its starter code). The explanation is a modal
feedback shown after every attempt. Validated in the tests against the IMS QTI 2.1 schema.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from . import markdown_html, plain_decimal
from ..messages import DECIMAL_POINT, in_language

QTI_NS = "http://www.imsglobal.org/xsd/imsqti_v2p1"
QTI_XSD = "http://www.imsglobal.org/xsd/qti/qtiv2p1/imsqti_v2p1.xsd"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"

ET.register_namespace("", QTI_NS)
ET.register_namespace("xsi", XSI_NS)


def _q(tag: str) -> str:
    return f"{{{QTI_NS}}}{tag}"


def _sub(parent: ET.Element, tag: str, attrs: dict | None = None, text: str | None = None) -> ET.Element:
    el = ET.SubElement(parent, _q(tag), {k: str(v) for k, v in (attrs or {}).items()})
    if text is not None:
        el.text = text
    return el


def _html_into(parent: ET.Element, markdown_text: str, inline: bool = False) -> None:
    """Markdown -> XHTML elements in the QTI namespace (QTI bodies are namespaced XHTML).

    ``inline`` unwraps a lone paragraph, for choices whose text is one short phrase.
    """
    wrapper = ET.fromstring(f"<div>{markdown_html(markdown_text)}</div>")
    for el in wrapper.iter():
        el.tag = _q(el.tag)
    if inline and len(wrapper) == 1 and wrapper[0].tag == _q("p") and not (wrapper.text or "").strip():
        para = wrapper[0]
        parent.text = (parent.text or "") + (para.text or "")
        parent.extend(list(para))
        return
    parent.append(wrapper)


def _outcomes(item: ET.Element, points: float, feedback_cardinality: str | None, explanation: bool) -> None:
    score = _sub(item, "outcomeDeclaration", {"identifier": "SCORE", "cardinality": "single", "baseType": "float"})
    _sub(_sub(score, "defaultValue"), "value", text="0")
    maxs = _sub(item, "outcomeDeclaration", {"identifier": "MAXSCORE", "cardinality": "single", "baseType": "float"})
    _sub(_sub(maxs, "defaultValue"), "value", text=plain_decimal(points))
    if feedback_cardinality:
        _sub(item, "outcomeDeclaration", {"identifier": "FEEDBACK", "cardinality": feedback_cardinality,
                                          "baseType": "identifier"})
    if explanation:
        _sub(item, "outcomeDeclaration", {"identifier": "EXPLANATION", "cardinality": "single",
                                          "baseType": "identifier"})


def _choice_id(oid: str) -> str:
    return "C_" + oid.replace("-", "_")


def build_item(inst: dict) -> ET.Element:
    kind, mode, points = inst["kind"], _mode(inst), float(inst["points"])
    item = ET.Element(_q("assessmentItem"), {
        "identifier": "Q_" + inst["id"].replace("-", "_"), "title": inst["title"],
        "adaptive": "false", "timeDependent": "false",
        "{http://www.w3.org/XML/1998/namespace}lang": inst["lang"],
        f"{{{XSI_NS}}}schemaLocation": f"{QTI_NS} {QTI_XSD}"})
    resp = {"identifier": "RESPONSE"}
    explanation = bool(inst["explanation"])
    if kind in ("single", "multiple"):
        single = kind == "single"
        decl = _sub(item, "responseDeclaration", {**resp, "cardinality": "single" if single else "multiple",
                                                  "baseType": "identifier"})
        correct = _sub(decl, "correctResponse")
        for o in inst["options"]:
            if o["correct"]:
                _sub(correct, "value", text=_choice_id(o["id"]))
        if not single:
            right = sum(o["correct"] for o in inst["options"])
            wrong = len(inst["options"]) - right
            mapping = _sub(decl, "mapping", {"lowerBound": "0", "upperBound": plain_decimal(points),
                                             "defaultValue": "0"})
            for o in inst["options"]:
                value = points / right if o["correct"] else -points / wrong
                _sub(mapping, "mapEntry", {"mapKey": _choice_id(o["id"]), "mappedValue": f"{value:.6g}"})
        _outcomes(item, points, "single" if single else "multiple", explanation)
    elif mode == "numeric":
        decl = _sub(item, "responseDeclaration", {**resp, "cardinality": "single", "baseType": "float"})
        _sub(_sub(decl, "correctResponse"), "value", text=plain_decimal(inst["answer"]))
        _outcomes(item, points, "single" if inst["mistakes"] else None, explanation)
    elif kind == "ordering":
        decl = _sub(item, "responseDeclaration", {**resp, "cardinality": "ordered", "baseType": "identifier"})
        correct = _sub(decl, "correctResponse")
        for i in inst["items"]:
            _sub(correct, "value", text=_choice_id(i["id"]))
        _outcomes(item, points, "multiple" if inst["misplacements"] else None, explanation)
    elif mode == "grid":
        for (r, c), x in _entries(inst):
            decl = _sub(item, "responseDeclaration", {"identifier": f"R_{r}_{c}", "cardinality": "single",
                                                      "baseType": "float"})
            _sub(_sub(decl, "correctResponse"), "value", text=plain_decimal(x))
        _outcomes(item, points, "single" if inst["mistakes"] else None, explanation)
    elif mode == "text":
        decl = _sub(item, "responseDeclaration", {**resp, "cardinality": "single", "baseType": "string"})
        _sub(_sub(decl, "correctResponse"), "value", text=inst["answer_text"])
        _outcomes(item, points, "single" if inst["mistakes"] else None, explanation)
    elif kind == "matching":
        decl = _sub(item, "responseDeclaration", {**resp, "cardinality": "multiple", "baseType": "directedPair"})
        correct = _sub(decl, "correctResponse")
        mapping = _sub(decl, "mapping", {"lowerBound": "0", "upperBound": plain_decimal(points),
                                         "defaultValue": "0"})
        for p in inst["pairs"]:
            key = f"L_{p['id'].replace('-', '_')} R_{p['id'].replace('-', '_')}"
            _sub(correct, "value", text=key)
            _sub(mapping, "mapEntry", {"mapKey": key, "mappedValue": f"{points / len(inst['pairs']):.6g}"})
        _outcomes(item, points, None, explanation)
    else:
        _sub(item, "responseDeclaration", {**resp, "cardinality": "single", "baseType": "string"})
        _outcomes(item, points, None, explanation)

    body = _sub(item, "itemBody")
    _html_into(body, inst["prompt"])
    if mode in ("numeric", "grid"):
        _sub(body, "p", text=in_language(DECIMAL_POINT, inst["lang"]))
    if kind == "code":
        _sub(body, "pre", text=inst["template"].rstrip())
    _interaction(body, inst)
    _scorer_rubric(body, inst)
    _processing(item, inst, points)
    if kind in ("single", "multiple"):
        for o in inst["options"]:
            fb = _sub(item, "modalFeedback", {"outcomeIdentifier": "FEEDBACK", "identifier": _choice_id(o["id"]),
                                              "showHide": "show"})
            _html_into(fb, o["feedback"])
    if mode in ("numeric", "grid", "text"):
        for n, m in enumerate(inst["mistakes"], 1):
            fb = _sub(item, "modalFeedback", {"outcomeIdentifier": "FEEDBACK", "identifier": f"MISTAKE_{n}",
                                              "showHide": "show"})
            _html_into(fb, m["feedback"])
    for n, m in enumerate(inst.get("misplacements") or [], 1):
        fb = _sub(item, "modalFeedback", {"outcomeIdentifier": "FEEDBACK", "identifier": f"MISPLACED_{n}",
                                          "showHide": "show"})
        _html_into(fb, m["feedback"])
    if explanation:
        fb = _sub(item, "modalFeedback", {"outcomeIdentifier": "EXPLANATION", "identifier": "EXPLANATION",
                                          "showHide": "show"})
        _html_into(fb, inst["explanation"])
    return item


def _scorer_rubric(body: ET.Element, inst: dict) -> None:
    """Hand-scored items carry what the scorer needs, hidden from candidates (view="scorer")."""
    if inst["kind"] == "free_text":
        block = _sub(body, "rubricBlock", {"view": "scorer"})
        points = _sub(block, "ul")
        for r in inst["rubric"]:
            _sub(points, "li", text=f"[{plain_decimal(r['points'])}] {r['text']}")
        _html_into(block, inst["model_answer"])
    elif inst["kind"] == "code":
        block = _sub(body, "rubricBlock", {"view": "scorer"})
        _sub(block, "p", text="Reference solution:")
        _sub(block, "pre", text=inst["model_solution"].rstrip())


def _interaction(body: ET.Element, inst: dict) -> None:
    kind = inst["kind"]
    if kind in ("single", "multiple"):
        inter = _sub(body, "choiceInteraction", {"responseIdentifier": "RESPONSE", "shuffle": "true",
                                                 "maxChoices": 1 if kind == "single" else 0})
        for o in inst["options"]:
            _html_into(_sub(inter, "simpleChoice", {"identifier": _choice_id(o["id"])}), o["text"], inline=True)
    elif _mode(inst) == "grid":
        table = _sub(_sub(body, "table"), "tbody")
        for r, row in enumerate(inst["matrix"], 1):
            tr = _sub(table, "tr")
            for c in range(1, len(row) + 1):
                _sub(_sub(tr, "td"), "textEntryInteraction", {"responseIdentifier": f"R_{r}_{c}",
                                                              "expectedLength": 8})
    elif _mode(inst) == "text":
        _sub(_sub(body, "p"), "textEntryInteraction", {"responseIdentifier": "RESPONSE", "expectedLength": 24})
    elif _mode(inst) == "numeric":
        p = _sub(body, "p")
        _sub(p, "textEntryInteraction", {"responseIdentifier": "RESPONSE", "expectedLength": 12})
        if inst.get("unit"):
            p.append(ET.Element(_q("span")))
            p[-1].text = " " + inst["unit"]
    elif kind == "ordering":
        inter = _sub(body, "orderInteraction", {"responseIdentifier": "RESPONSE", "shuffle": "true"})
        for i in inst["items"]:
            _sub(inter, "simpleChoice", {"identifier": _choice_id(i["id"])}, i["text"])
    elif kind == "matching":
        pairs = inst["pairs"]
        inter = _sub(body, "matchInteraction", {"responseIdentifier": "RESPONSE", "shuffle": "true",
                                                "maxAssociations": len(pairs)})
        left, right = _sub(inter, "simpleMatchSet"), _sub(inter, "simpleMatchSet")
        for p in pairs:
            _sub(left, "simpleAssociableChoice", {"identifier": "L_" + p["id"].replace("-", "_"),
                                                  "matchMax": 1}, p["left"])
        for rid, text in [(p["id"], p["right"]) for p in pairs] + [(x["id"], x["text"]) for x in inst["distractors"]]:
            _sub(right, "simpleAssociableChoice", {"identifier": "R_" + rid.replace("-", "_"), "matchMax": 1}, text)
    else:
        attrs = {"responseIdentifier": "RESPONSE", "expectedLines": 15}
        if kind == "code":
            attrs["format"] = "preformatted"
        _sub(body, "extendedTextInteraction", attrs)


def _processing(item: ET.Element, inst: dict, points: float) -> None:
    kind, mode = inst["kind"], _mode(inst)
    if kind in ("free_text", "code") and not inst["explanation"]:
        return  # scored by the instructor
    rp = _sub(item, "responseProcessing")
    if kind in ("multiple", "matching"):
        _set(rp, "SCORE", _mapped())
        if kind == "multiple":
            _set(rp, "FEEDBACK", _var("RESPONSE"))
    elif kind == "ordering":
        _ordering_processing(rp, inst, points)
    elif mode == "grid":
        share = points / sum(len(row) for row in inst["matrix"])
        for (r, c), x in _entries(inst):  # a share of the points for each entry within the tolerance
            cond = _sub(_sub(rp, "responseCondition"), "responseIf")
            test = _equal(cond, inst["tolerance"])
            test.extend([_var(f"R_{r}_{c}"), _base(x)])
            _add_to_score(cond, share)
        if inst["mistakes"]:
            condition = _sub(rp, "responseCondition")
            for n, m in enumerate(inst["mistakes"], 1):  # the whole matrix is a known mistake
                branch = _sub(condition, "responseIf" if n == 1 else "responseElseIf")
                every = _sub(branch, "and")
                for (r, c), x in _entries({"matrix": m["matrix"]}):
                    _equal(every, inst["tolerance"]).extend([_var(f"R_{r}_{c}"), _base(x)])
                _set(branch, "FEEDBACK", _identifier(f"MISTAKE_{n}"))
    elif mode == "text":
        condition = _sub(rp, "responseCondition")
        branch = _sub(condition, "responseIf")
        _any_spelling(branch, inst["spellings"], _case_sensitive(inst))
        _set(branch, "SCORE", _base(points))
        for n, m in enumerate(inst["mistakes"], 1):
            branch = _sub(condition, "responseElseIf")
            _any_spelling(branch, m["spellings"], _case_sensitive(inst))
            _set(branch, "FEEDBACK", _identifier(f"MISTAKE_{n}"))
    elif mode in ("single", "numeric"):
        condition = _sub(rp, "responseCondition")
        cond = _sub(condition, "responseIf")
        test = _equal(cond, inst["tolerance"]) if mode == "numeric" else _sub(cond, "match")
        test.append(_var("RESPONSE"))
        _sub(test, "correct", {"identifier": "RESPONSE"})
        _set(cond, "SCORE", _base(points))
        if mode == "single":
            _set(rp, "FEEDBACK", _var("RESPONSE"))
        for n, m in enumerate(inst.get("mistakes") or [], 1):  # numeric: the known mistakes, for feedback
            branch = _sub(condition, "responseElseIf")
            test = _equal(branch, m["tolerance"])
            test.append(_var("RESPONSE"))
            _sub(test, "baseValue", {"baseType": "float"}, plain_decimal(m["value"]))
            _set(branch, "FEEDBACK", _identifier(f"MISTAKE_{n}"))
    if inst["explanation"]:
        _set(rp, "EXPLANATION", _identifier("EXPLANATION"))


def _mode(inst: dict) -> str:
    """How an item is built: a matrix entry is a numeric item; a whole matrix a grid of
    numbers; a shape or a big-O answer one string; every other kind its own."""
    if inst["kind"] == "matrix":
        return "numeric" if inst["ask"] == "entry" else "grid"
    return "text" if inst["kind"] in ("shape", "big_o", "expression") else inst["kind"]


def _entries(inst: dict):
    return [((r, c), x) for r, row in enumerate(inst["matrix"], 1) for c, x in enumerate(row, 1)]


def _add_to_score(parent: ET.Element, share: float) -> None:
    total = ET.Element(_q("sum"))
    total.extend([_var("SCORE"), _base(share)])
    _set(parent, "SCORE", total)


def _case_sensitive(inst: dict) -> bool:
    """The service reads the names of a big-O or formula answer case-sensitively (``N`` is not ``n``)."""
    return inst["kind"] in ("big_o", "expression")


def _any_spelling(parent: ET.Element, spellings: list[str], case_sensitive: bool = False) -> None:
    either = _sub(parent, "or")
    for text in spellings:
        match = _sub(either, "stringMatch", {"caseSensitive": "true" if case_sensitive else "false"})
        match.append(_var("RESPONSE"))
        _sub(match, "baseValue", {"baseType": "string"}, text)


def _before(parent: ET.Element, first: str, then: str, count: int) -> None:
    """True when the response puts ``first`` somewhere before ``then`` (QTI has no "position of")."""
    either = _sub(parent, "or")
    for a in range(1, count + 1):
        for b in range(a + 1, count + 1):
            both = _sub(either, "and")
            for n, oid in ((a, first), (b, then)):
                test = _sub(both, "match")
                _sub(test, "index", {"n": n}).append(_var("RESPONSE"))
                _sub(test, "baseValue", {"baseType": "identifier"}, _choice_id(oid))


def _ordering_processing(rp: ET.Element, inst: dict, points: float) -> None:
    """A share of the points for each pair of items in the key's relative order; then each
    misplacement the order makes caps the score and names itself in FEEDBACK."""
    ids = [i["id"] for i in inst["items"]]
    pairs = [(a, b) for n, a in enumerate(ids) for b in ids[n + 1:]]
    for a, b in pairs:
        cond = _sub(_sub(rp, "responseCondition"), "responseIf")
        _before(cond, a, b, len(ids))
        _add_to_score(cond, points / len(pairs))
    for n, m in enumerate(inst["misplacements"], 1):
        cond = _sub(_sub(rp, "responseCondition"), "responseIf")
        _before(cond, m["then"], m["first"], len(ids))
        capped = _sub(_sub(cond, "setOutcomeValue", {"identifier": "SCORE"}), "min")
        capped.extend([_var("SCORE"), _base(points * m["credit"])])
        named = _sub(_sub(cond, "setOutcomeValue", {"identifier": "FEEDBACK"}), "multiple")
        named.extend([_var("FEEDBACK"), _identifier(f"MISPLACED_{n}")])


def _equal(parent: ET.Element, tolerance: float) -> ET.Element:
    tol = plain_decimal(tolerance)
    return _sub(parent, "equal", {"toleranceMode": "absolute", "tolerance": f"{tol} {tol}"})


def _identifier(value: str) -> ET.Element:
    el = ET.Element(_q("baseValue"), {"baseType": "identifier"})
    el.text = value
    return el


def _var(name: str) -> ET.Element:
    return ET.Element(_q("variable"), {"identifier": name})


def _base(value: float) -> ET.Element:
    el = ET.Element(_q("baseValue"), {"baseType": "float"})
    el.text = plain_decimal(value)
    return el


def _mapped() -> ET.Element:
    return ET.Element(_q("mapResponse"), {"identifier": "RESPONSE"})


def _set(parent: ET.Element, outcome: str, value: ET.Element) -> None:
    _sub(parent, "setOutcomeValue", {"identifier": outcome}).append(value)


def item_xml(inst: dict) -> bytes:
    item = build_item(inst)
    ET.indent(item)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(item, encoding="utf-8", xml_declaration=False)
