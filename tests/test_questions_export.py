"""Exports: Moodle XML, GIFT, QTI 2.1 and JSON, each read back by a parser and checked
against the bank's own answer key."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
import zipfile

import pytest

from questions import load_bank, solution
from questions.export import export, instances
from questions.export.gift import escape
from questions.variants import variant_seed

QTI = "{http://www.imsglobal.org/xsd/imsqti_v2p1}"
CP = "{http://www.imsglobal.org/xsd/imscp_v1p1}"


@pytest.fixture(scope="module")
def bank():
    return load_bank()


def _expected_count(bank, variants=1):
    return sum(len(instances(q, "en", variants)) for q in bank)


# -- Moodle XML --------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "ru", "zh"])
def test_moodle_xml_parses_and_matches_the_answer_key(bank, lang):
    root = ET.fromstring(export(bank, "moodle-xml", lang).encode("utf-8"))
    assert root.tag == "quiz"
    questions = [q for q in root if q.get("type") != "category"]
    assert len(questions) == len(bank)
    by_id = {q.findtext("idnumber"): q for q in questions}
    types = {"single": "multichoice", "multiple": "multichoice", "numeric": "numerical",
             "matching": "matching", "ordering": "matching", "free_text": "essay", "code": "essay"}
    for question in bank:
        inst = instances(question, lang)[0]
        el = by_id[inst["id"]]
        assert el.get("type") == types[question.kind]
        assert el.find("name/text").text == inst["title"]
        assert el.find("questiontext").get("format") == "html"
        assert float(el.findtext("defaultgrade")) == question.points
        seed = variant_seed("export-1", question.id)
        if question.kind in ("single", "multiple"):
            fractions = [float(a.get("fraction")) for a in el.findall("answer")]
            right = [f for f in fractions if f > 0]
            assert sum(right) == pytest.approx(100, abs=0.01)
            assert len(right) == len(solution(question, seed)["options"])
            assert all(a.find("feedback/text").text for a in el.findall("answer"))
            assert el.findtext("single") == ("true" if question.kind == "single" else "false")
            assert el.find("correctfeedback/text").text and el.find("incorrectfeedback/text").text
        elif question.kind == "numeric":
            answers = el.findall("answer")
            best = next(a for a in answers if a.get("fraction") == "100")
            assert float(best.findtext("text")) == pytest.approx(solution(question, seed)["value"])
            assert float(best.findtext("tolerance")) >= 0
        elif question.kind == "matching":
            subs = el.findall("subquestion")
            assert len(subs) == len(question.data["pairs"]) + len(question.data.get("distractors") or [])
        elif question.kind == "ordering":
            positions = [s.findtext("answer/text") for s in el.findall("subquestion")]
            assert positions == [str(i) for i in range(1, len(question.data["items"]) + 1)]
        else:
            assert el.find("graderinfo/text").text
            assert el.findtext("responseformat") == ("monospaced" if question.kind == "code" else "editor")


def test_moodle_export_of_several_variants_names_them(bank):
    root = ET.fromstring(export(bank, "moodle-xml", "en", variants=3).encode("utf-8"))
    ids = [q.findtext("idnumber") for q in root if q.get("type") != "category"]
    assert len(ids) == len(set(ids)) == _expected_count(bank, 3) > len(bank)
    assert "head-dimension-v2" in ids and "head-dimension-v3" in ids
    names = [q.findtext("name/text") for q in root if q.findtext("idnumber") == "head-dimension-v2"]
    assert names[0].endswith("(v2)")


# -- GIFT ----------------------------------------------------------------------------------------

def _gift_blocks(text):
    """A minimal GIFT reader: question blocks (comments dropped), split on blank lines."""
    blocks = []
    for raw in text.strip().split("\n\n"):
        lines = [l for l in raw.split("\n") if not l.startswith("//")]
        body = "\n".join(lines).strip()
        if body and not body.startswith("$CATEGORY"):
            blocks.append(body)
    return blocks


def _unescaped_braces(text):
    return [m.start() for m in re.finditer(r"(?<!\\)[{}]", text)]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_gift_has_one_wellformed_block_per_question(bank, lang):
    blocks = _gift_blocks(export(bank, "gift", lang))
    assert len(blocks) == len(bank)
    for block, question in zip(blocks, bank):
        m = re.match(r"::(.+?)(?<!\\)::\[markdown\]", block)
        assert m, block[:80]
        braces = _unescaped_braces(block)
        assert len(braces) == 2 and block[braces[0]] == "{" and block[braces[1]] == "}", block
        answers = block[braces[0] + 1:braces[1]].removeprefix("#")  # "{#" opens a numeric answer
        lines = [l.strip() for l in answers.split("\n") if l.strip() and not l.strip().startswith("####")]
        if question.kind == "single":
            assert sum(l.startswith("=") for l in lines) == 1 and all(l[0] in "=~" for l in lines)
        elif question.kind == "multiple":
            weights = [float(re.match(r"~%(-?[\d.]+)%", l).group(1)) for l in lines]
            assert sum(w for w in weights if w > 0) == pytest.approx(100, abs=0.01)
        elif question.kind == "numeric":
            assert block[braces[0]:braces[0] + 2] == "{#"
            value = float(re.match(r"=([^:]+):", lines[0]).group(1))
            assert value == pytest.approx(solution(question, variant_seed("export-1", question.id))["value"])
        elif question.kind in ("matching", "ordering"):
            assert all(re.search(r" -> ", l) for l in lines) and len(lines) >= 3
        else:
            assert lines == []  # essay


def test_gift_escapes_control_characters():
    assert escape("a = b {x} ~y #z: w") == "a \\= b \\{x\\} \\~y \\#z\\: w"


# -- QTI 2.1 --------------------------------------------------------------------------------------

def test_qti_package_is_a_valid_content_package(bank, tmp_path):
    path = export(bank, "qti", "ru", output=str(tmp_path / "bank.zip"))
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        manifest = ET.fromstring(zf.read("imsmanifest.xml"))
        assert manifest.tag == f"{CP}manifest"
        resources = manifest.findall(f"{CP}resources/{CP}resource")
        assert len(resources) == len(bank)
        for res in resources:
            assert res.get("type") == "imsqti_item_xmlv2p1"
            assert res.get("href") in names
            assert res.find(f"{CP}file").get("href") == res.get("href")
        items = {res.get("href"): ET.fromstring(zf.read(res.get("href"))) for res in resources}
    interactions = {"single": "choiceInteraction", "multiple": "choiceInteraction",
                    "numeric": "textEntryInteraction", "ordering": "orderInteraction",
                    "matching": "matchInteraction", "free_text": "extendedTextInteraction",
                    "code": "extendedTextInteraction"}
    for question in bank:
        inst = instances(question, "ru")[0]
        item = items[f"items/{inst['id']}.xml"]
        assert item.tag == f"{QTI}assessmentItem"
        assert item.get("title") == inst["title"]
        decl = item.find(f"{QTI}responseDeclaration")
        assert decl.get("identifier") == "RESPONSE"
        body = item.find(f"{QTI}itemBody")
        inter = body.find(f".//{QTI}{interactions[question.kind]}")
        assert inter is not None and inter.get("responseIdentifier") == "RESPONSE"
        assert item.find(f"{QTI}outcomeDeclaration[@identifier='SCORE']") is not None
        correct = [v.text for v in decl.findall(f"{QTI}correctResponse/{QTI}value")]
        seed = variant_seed("export-1", question.id)
        if question.kind in ("single", "multiple"):
            assert sorted(correct) == sorted("C_" + o for o in solution(question, seed)["options"])
            choices = {c.get("identifier") for c in inter.findall(f"{QTI}simpleChoice")}
            assert set(correct) <= choices
            assert len(item.findall(f"{QTI}modalFeedback")) == len(choices)
        elif question.kind == "numeric":
            assert decl.get("baseType") == "float"
            assert float(correct[0]) == pytest.approx(solution(question, seed)["value"])
            equal = item.find(f".//{QTI}responseProcessing//{QTI}equal")
            assert equal.get("toleranceMode") == "absolute"
        elif question.kind == "ordering":
            assert decl.get("cardinality") == "ordered"
            assert correct == ["C_" + i.replace("-", "_") for i in solution(question, seed)["order"]]
        elif question.kind == "matching":
            assert decl.get("baseType") == "directedPair"
            assert len(correct) == len(question.data["pairs"])
            assert all(re.fullmatch(r"L_\w+ R_\w+", c) for c in correct)
        else:
            assert correct == [] and item.find(f"{QTI}responseProcessing") is None


def test_qti_needs_an_output_path(bank):
    with pytest.raises(ValueError, match="--output"):
        export(bank, "qti", "en")


# -- JSON ---------------------------------------------------------------------------------------

def test_json_export_round_trips_with_answers(bank):
    data = json.loads(export(bank, "json", "zh", variants=2))
    assert data["format"] == "attn-grader-questions" and data["lang"] == "zh"
    by_id = {q["id"]: q for q in data["questions"]}
    assert len(by_id) == _expected_count(bank, 2)
    q = bank.get("per-head-scale")
    exported = by_id["per-head-scale-v1"]
    env = exported["params"]
    assert exported["answer"] == pytest.approx((env["d_model"] / env["h"]) ** 0.5)
    assert "头" in exported["prompt"]
    assert by_id["derive-score-variance"]["rubric"][0]["points"] == 1
    assert q.kind == exported["kind"] == "numeric"


def test_unknown_format_is_refused(bank):
    with pytest.raises(ValueError, match="unknown format"):
        export(bank, "docx")
