"""IMS QTI 2.1: one assessmentItem per question variant plus an IMS content-package manifest.

Written as a zip (``--output bank.zip``) or a directory. Interactions: choiceInteraction
(single: match_correct with per-option modal feedback; multiple: map_response with the
same +1/R, -1/W weights as our grading), textEntryInteraction with a float response and an
absolute tolerance (each common mistake is a further branch with its own tolerance and modal
feedback), orderInteraction (a share of the points per item in its place, as in the bank),
matchInteraction (directedPair, one point share per pair), extendedTextInteraction for free
text and code (scored by hand: the rubric and model answer, or the reference solution, go into
a ``rubricBlock`` for scorers; a code item shows its starter code). The explanation is a modal
feedback shown after every attempt. Validated in the tests against the IMS QTI 2.1 schema.
"""
from __future__ import annotations

import io
import os
import xml.etree.ElementTree as ET
import zipfile

from . import markdown_html, plain_decimal
from ..messages import DECIMAL_POINT, in_language

QTI_NS = "http://www.imsglobal.org/xsd/imsqti_v2p1"
QTI_XSD = "http://www.imsglobal.org/xsd/qti/qtiv2p1/imsqti_v2p1.xsd"
CP_NS = "http://www.imsglobal.org/xsd/imscp_v1p1"
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
    kind, points = inst["kind"], float(inst["points"])
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
    elif kind == "numeric":
        decl = _sub(item, "responseDeclaration", {**resp, "cardinality": "single", "baseType": "float"})
        _sub(_sub(decl, "correctResponse"), "value", text=plain_decimal(inst["answer"]))
        _outcomes(item, points, "single" if inst["mistakes"] else None, explanation)
    elif kind == "ordering":
        decl = _sub(item, "responseDeclaration", {**resp, "cardinality": "ordered", "baseType": "identifier"})
        correct = _sub(decl, "correctResponse")
        for i in inst["items"]:
            _sub(correct, "value", text=_choice_id(i["id"]))
        _outcomes(item, points, None, explanation)
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
    if kind == "numeric":
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
    if kind == "numeric":
        for n, m in enumerate(inst["mistakes"], 1):
            fb = _sub(item, "modalFeedback", {"outcomeIdentifier": "FEEDBACK", "identifier": f"MISTAKE_{n}",
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
    elif kind == "numeric":
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
    kind = inst["kind"]
    if kind in ("free_text", "code") and not inst["explanation"]:
        return  # scored by the instructor
    rp = _sub(item, "responseProcessing")
    if kind in ("multiple", "matching"):
        _set(rp, "SCORE", _mapped())
        if kind == "multiple":
            _set(rp, "FEEDBACK", _var("RESPONSE"))
    elif kind == "ordering":
        share = points / len(inst["items"])
        for n, i in enumerate(inst["items"], 1):  # a share of the points for each item in its place
            cond = _sub(_sub(rp, "responseCondition"), "responseIf")
            test = _sub(cond, "match")
            _sub(test, "index", {"n": n}).append(_var("RESPONSE"))
            _sub(test, "baseValue", {"baseType": "identifier"}, _choice_id(i["id"]))
            total = ET.Element(_q("sum"))
            total.extend([_var("SCORE"), _base(share)])
            _set(cond, "SCORE", total)
    elif kind in ("single", "numeric"):
        condition = _sub(rp, "responseCondition")
        cond = _sub(condition, "responseIf")
        test = _equal(cond, inst["tolerance"]) if kind == "numeric" else _sub(cond, "match")
        test.append(_var("RESPONSE"))
        _sub(test, "correct", {"identifier": "RESPONSE"})
        _set(cond, "SCORE", _base(points))
        if kind == "single":
            _set(rp, "FEEDBACK", _var("RESPONSE"))
        for n, m in enumerate(inst.get("mistakes") or [], 1):  # numeric: the known mistakes, for feedback
            branch = _sub(condition, "responseElseIf")
            test = _equal(branch, m["tolerance"])
            test.append(_var("RESPONSE"))
            _sub(test, "baseValue", {"baseType": "float"}, plain_decimal(m["value"]))
            _set(branch, "FEEDBACK", _identifier(f"MISTAKE_{n}"))
    if inst["explanation"]:
        _set(rp, "EXPLANATION", _identifier("EXPLANATION"))


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


def manifest_xml(instances: list[dict], lang: str) -> bytes:
    ET.register_namespace("", CP_NS)
    root = ET.Element(f"{{{CP_NS}}}manifest", {"identifier": f"MANIFEST_attn_grader_{lang}"})
    meta = ET.SubElement(root, f"{{{CP_NS}}}metadata")
    ET.SubElement(meta, f"{{{CP_NS}}}schema").text = "QTIv2.1 Package"
    ET.SubElement(meta, f"{{{CP_NS}}}schemaversion").text = "1.0.0"
    ET.SubElement(root, f"{{{CP_NS}}}organizations")
    resources = ET.SubElement(root, f"{{{CP_NS}}}resources")
    for inst in instances:
        href = f"items/{inst['id']}.xml"
        res = ET.SubElement(resources, f"{{{CP_NS}}}resource", {
            "identifier": "RES_" + inst["id"].replace("-", "_"), "type": "imsqti_item_xmlv2p1", "href": href})
        ET.SubElement(res, f"{{{CP_NS}}}file", {"href": href})
    ET.indent(root)
    data = b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="utf-8", xml_declaration=False)
    ET.register_namespace("", QTI_NS)
    return data


def qti_files(instances: list[dict], lang: str) -> dict[str, bytes]:
    files = {"imsmanifest.xml": manifest_xml(instances, lang)}
    for inst in instances:
        files[f"items/{inst['id']}.xml"] = item_xml(inst)
    return files


def qti_zip(instances: list[dict], lang: str) -> bytes:
    """The content package as one zip (what an LMS's QTI import takes), in memory."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in qti_files(instances, lang).items():
            zf.writestr(name, data)
    return buf.getvalue()


def write_qti(instances: list[dict], output: str, lang: str) -> str:
    """Write a zip when ``output`` ends in .zip, else a directory; returns the path."""
    if output.endswith(".zip"):
        with open(output, "wb") as f:
            f.write(qti_zip(instances, lang))
        return output
    files = qti_files(instances, lang)
    for name, data in files.items():
        path = os.path.join(output, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return output
