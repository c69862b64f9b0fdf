"""Exports: Moodle XML, GIFT, QTI 2.1 and JSON, each read back by a real parser of the format
(lxml for XML, pygiftparser for GIFT), QTI items validated against the IMS QTI 2.1 schema, and
everything compared with the bank's own answer key."""
from __future__ import annotations

import json
import re
import zipfile
from functools import lru_cache
from pathlib import Path

import pytest
from lxml import etree
from pygiftparser import parser as giftparser

from questions import load_bank, solution
from questions.export import export, instances, markdown_html, plain_decimal
from questions.export.gift import escape
from questions.variants import variant_seed

QTI = "{http://www.imsglobal.org/xsd/imsqti_v2p1}"
CP = "{http://www.imsglobal.org/xsd/imscp_v1p1}"
QTI_XSD = Path(__file__).parent / "data" / "qti21" / "imsqti_v2p1p2.xsd"
PLAIN = re.compile(r"-?\d+(\.\d+)?")  # no exponent: gift-pegjs and pygiftparser need this


@pytest.fixture(scope="module")
def bank():
    return load_bank()


@lru_cache(maxsize=1)
def qti_schema() -> etree.XMLSchema:
    return etree.XMLSchema(etree.parse(str(QTI_XSD)))


def _expected_count(bank, variants=1):
    return sum(len(instances(q, "en", variants)) for q in bank)


def _rel_tolerance(question, value):
    tol = question.data.get("tolerance", {"rel": 1e-9})
    return max(tol.get("abs", 0), tol.get("rel", 0) * abs(value))


# -- Moodle XML --------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "ru", "zh"])
def test_moodle_xml_parses_and_matches_the_answer_key(bank, lang):
    text = export(bank, "moodle-xml", lang)
    root = etree.fromstring(text.encode("utf-8"))
    assert root.tag == "quiz"
    questions = [q for q in root if q.get("type") != "category"]
    assert len(questions) == len(bank)
    by_id = {q.findtext("idnumber"): q for q in questions}
    types = {"single": "multichoice", "multiple": "multichoice", "numeric": "numerical",
             "matching": "matching", "ordering": "ordering", "free_text": "essay", "code": "essay",
             "shape": "shortanswer", "big_o": "shortanswer", "expression": "shortanswer"}
    for question in bank:
        inst = instances(question, lang)[0]
        el = by_id[inst["id"]]
        if question.kind == "matrix":  # a whole matrix is Cloze (one blank per entry), an entry numerical
            assert el.get("type") == ("cloze" if inst["ask"] == "matrix" else "numerical")
        else:
            assert el.get("type") == types[question.kind]
        assert el.find("name/text").text == inst["title"]
        assert el.find("questiontext").get("format") == "html"
        assert el.find("questiontext/text").text.startswith(markdown_html(inst["prompt"]))
        if el.get("type") != "cloze":  # Moodle totals a Cloze question's mark from its blanks
            assert float(el.findtext("defaultgrade")) == question.points
        seed = variant_seed("export-1", question.id)
        if question.kind in ("single", "multiple"):
            fractions = [float(a.get("fraction")) for a in el.findall("answer")]
            right = [f for f in fractions if f > 0]
            assert sum(right) == pytest.approx(100, abs=0.01)
            assert len(right) == len(solution(question, seed)["options"])
            assert len(fractions) == len(render_options(question, seed))
            assert all(a.find("feedback/text").text for a in el.findall("answer"))
            assert el.findtext("single") == ("true" if question.kind == "single" else "false")
        elif question.kind == "numeric" or el.get("type") == "numerical":
            answers = el.findall("answer")
            key, mistakes = answers[0], answers[1:]
            assert key.get("fraction") == "100"
            assert float(key.findtext("text")) == pytest.approx(solution(question, seed)["value"])
            assert len(mistakes) == len(inst["mistakes"])
            for a, m in zip(mistakes, inst["mistakes"]):
                assert a.get("fraction") == "0" and a.find("feedback/text").text
                # the bank's own tolerance around the mistake, not the key's
                assert float(a.findtext("tolerance")) == pytest.approx(
                    _rel_tolerance(question, m["value"]) if question.kind == "numeric" else m["tolerance"])
            for a in answers:
                assert PLAIN.fullmatch(a.findtext("text")) and PLAIN.fullmatch(a.findtext("tolerance"))
        elif question.kind == "matching":
            subs = el.findall("subquestion")
            assert len(subs) == len(question.data["pairs"]) + len(question.data.get("distractors") or [])
        elif question.kind == "ordering":  # Moodle's ordering type, graded by relative order as here
            assert el.findtext("gradingtype") == "RELATIVE_ALL_PREVIOUS_AND_NEXT"
            assert el.findtext("selecttype") == "ALL"
            answers = el.findall("answer")
            assert [a.find("text").text for a in answers] == [markdown_html(i["text"]) for i in inst["items"]]
            assert [a.get("fraction") for a in answers] == [str(n) for n in range(1, len(answers) + 1)]
        elif question.kind == "matrix" and inst["ask"] == "matrix":
            blanks = re.findall(r"\{1:NUMERICAL:=([-0-9.]+):([0-9.]+)\}", el.find("questiontext/text").text)
            key = [x for row in solution(question, seed)["matrix"] for x in row]
            assert [float(v) for v, _ in blanks] == pytest.approx(key)
            assert {float(t) for _, t in blanks} == {inst["tolerance"]}
        elif question.kind in ("shape", "big_o", "expression"):
            answers = el.findall("answer")
            right = [a.findtext("text") for a in answers if a.get("fraction") == "100"]
            # literal patterns: an unescaped "*" is a wildcard in Moodle (test_questions_lms_grading)
            assert right == [t.replace("*", "\\*") for t in inst["spellings"]]
            assert inst["answer_text"].replace("*", "\\*") in right
            wrong = [a for a in answers if a.get("fraction") == "0"]
            assert len(wrong) == sum(len(m["spellings"]) for m in inst["mistakes"])
            assert all(a.find("feedback/text").text for a in wrong)
            assert not set(right) & {a.findtext("text") for a in wrong}
        else:
            assert el.find("graderinfo/text").text
            assert el.findtext("responseformat") == ("monospaced" if question.kind == "code" else "editor")
        if question.kind == "code":
            assert el.findtext("responsetemplate/text") == question.data["template"]


def render_options(question, seed):
    from questions.variants import shown_options
    return shown_options(question, seed)


def test_moodle_texts_are_cdata_so_a_space_after_inline_code_survives(bank):
    text = export(bank, "moodle-xml", "ru")
    # Moodle drops whitespace-only chunks of escaped text ("(L, S)</code> для" became "(L, S)для")
    assert "<questiontext format=\"html\">\n      <text><![CDATA[" in text
    assert "&lt;code&gt;" not in text
    spaced = re.findall(r"</code> [а-яА-Я]", text)
    assert spaced, "the bank has Russian text right after inline code"


def test_moodle_export_of_several_variants_names_them(bank):
    root = etree.fromstring(export(bank, "moodle-xml", "en", variants=3).encode("utf-8"))
    ids = [q.findtext("idnumber") for q in root if q.get("type") != "category"]
    assert len(ids) == len(set(ids)) == _expected_count(bank, 3) > len(bank)
    assert "head-dimension-v2" in ids and "head-dimension-v3" in ids
    assert "smaller-scale-factor-v2" in ids  # options drawn from a pool make variants too
    names = [q.findtext("name/text") for q in root if q.findtext("idnumber") == "head-dimension-v2"]
    assert names[0].endswith("(v2)")


def test_exported_option_order_is_the_students_not_the_files(bank):
    singles = [q for q in bank if q.kind == "single"]
    first = [instances(q, "en")[0]["options"][0]["correct"] for q in singles]
    assert 0 < sum(first) < len(singles) / 2


def test_plain_decimal_never_uses_an_exponent():
    assert plain_decimal(1.1253514941371313e-07) == "0.00000011253514941371313"
    assert plain_decimal(2.44e-07) == "0.000000244" and plain_decimal(64.0) == "64"
    assert plain_decimal(-0.0) == "0" and plain_decimal(1e20) == "100000000000000000000"


# -- GIFT ----------------------------------------------------------------------------------------

def _gift_unescape(text: str) -> str:
    return re.sub(r"\\([~=#{}:])", r"\1", text)


@pytest.mark.parametrize("lang", ["en", "ru", "zh"])
def test_gift_read_back_by_pygiftparser_matches_the_answer_key(bank, lang, tmp_path):
    text = export(bank, "gift", lang, variants=2)
    # one question per block: no blank line inside a question (Moodle would split it there)
    blocks = [b for b in text.strip().split("\n\n") if not b.startswith("$CATEGORY")]
    insts = [i for q in bank for i in instances(q, lang, 2)]
    assert len(blocks) == len(insts)
    path = tmp_path / "bank.gift"
    path.write_text(text, encoding="utf-8")
    with open(path, encoding="utf-8") as f:
        parsed = giftparser.parseFile(f)
    assert len(parsed) == len(insts)
    # GIFT has no ordering, matrix, shape or big-O type: ordering is matching to positions, a whole
    # matrix a hand-graded essay (the key in a comment), a matrix entry numeric, a shape or big-O a
    # short answer ("=" answers only; pygiftparser calls any list with a 0 % answer a SelectSet,
    # Moodle imports it as a short answer because no answer starts with "~")
    kinds = {"single": "SelectSet", "multiple": "MultipleChoicesSet", "numeric": "NumericAnswerSet",
             "matching": "MatchingSet", "ordering": "MatchingSet", "free_text": "Essay", "code": "Essay",
             "shape": "SelectSet", "big_o": "SelectSet", "expression": "SelectSet"}
    negative = 0
    for q, inst in zip(parsed, insts):
        assert _gift_unescape(q.title) == inst["title"]
        numeric = inst["kind"] == "numeric" or inst["kind"] == "matrix" and inst["ask"] == "entry"
        if inst["kind"] == "matrix":
            kinds["matrix"] = "NumericAnswerSet" if numeric else "Essay"
        if numeric and any(v < 0 for v in [inst["answer"]] + [m["value"] for m in inst["mistakes"]]):
            # pygiftparser's number pattern is unsigned ([\d]+(\.[\d]+)?), Moodle's is not:
            # for these check the answer lines by GIFT's documented syntax instead
            negative += 1
            assert not hasattr(q, "answers") or not q.valid
            block = blocks[insts.index(inst)]
            assert f"\t={plain_decimal(inst['answer'])}:{plain_decimal(inst['tolerance'])}" in block
            continue
        assert q.valid, inst["id"]
        assert type(q.answers).__name__ == kinds[inst["kind"]], inst["id"]
        assert q.markup == "html"
        assert _gift_unescape(q.text).startswith(markdown_html(inst["prompt"]).strip())
        if inst["explanation"]:
            assert _gift_unescape(q.generalFeedback) == markdown_html(inst["explanation"]).strip()
        answers = getattr(q.answers, "answers", [])
        block = blocks[insts.index(inst)]
        if numeric:
            expected = [(inst["answer"], inst["tolerance"], 100)] + \
                       [(m["value"], m["tolerance"], 0) for m in inst["mistakes"]]
            got = [(a.value, a.tolerance, a.fraction) for a in answers]
            assert got == [pytest.approx(e, rel=1e-9, abs=1e-15) for e in expected], inst["id"]
        elif inst["kind"] in ("single", "multiple"):
            assert len(answers) == len(inst["options"])
            for a, o in zip(answers, inst["options"]):
                assert _gift_unescape(a.answer) == markdown_html(o["text"]).strip()
                assert (a.fraction > 0) == o["correct"]
                assert _gift_unescape(a.feedback) == markdown_html(o["feedback"]).strip()
        elif inst["kind"] == "code":
            assert "def " + inst["function"] in _gift_unescape(q.text)  # the starter code is shown
        elif inst["kind"] in ("shape", "big_o", "expression"):
            assert "~" not in block.split("{", 1)[1]  # only "=" answers: Moodle's short answer
            right = [_gift_unescape(a.answer) for a in answers if a.fraction == 100]
            # pygiftparser keeps GIFT's "\\" (Moodle reads it as one backslash, escaping the wildcard)
            assert right == [t.replace("*", "\\\\*") for t in inst["spellings"]]
            assert all(a.feedback for a in answers if a.fraction == 0)
        elif inst["kind"] == "ordering":
            assert "GIFT has no ordering type" in block  # and says what it does instead
        elif inst["kind"] == "matrix":
            assert "GIFT has no question with several numeric blanks" in block
    assert negative < len(insts) / 10


def test_gift_escapes_control_characters_and_line_breaks():
    assert escape("a = b {x} ~y #z: w") == "a \\= b \\{x\\} \\~y \\#z\\: w"
    assert escape("line one\n\n    indented") == "line one\\n\\n    indented"


# -- QTI 2.1 --------------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "ru", "zh"])
def test_qti_items_validate_against_the_ims_schema(bank, lang, tmp_path):
    path = export(bank, "qti", lang, variants=2, output=str(tmp_path / "bank.zip"))
    schema = qti_schema()
    with zipfile.ZipFile(path) as zf:
        items = [n for n in zf.namelist() if n.startswith("items/")]
        assert len(items) == _expected_count(bank, 2)
        for name in items:
            doc = etree.fromstring(zf.read(name))
            assert schema.validate(doc), f"{name}: {schema.error_log.last_error}"


def test_the_schema_check_rejects_a_broken_item(bank, tmp_path):
    path = export(bank, "qti", "en", output=str(tmp_path / "qti"))
    item = etree.parse(str(Path(path) / "items" / "head-dimension-v1.xml")).getroot()
    body = item.find(f"{QTI}itemBody")
    item.remove(body)
    item.append(body)  # itemBody after responseProcessing: out of order
    assert not qti_schema().validate(item)


def test_qti_package_keeps_feedback_rubrics_and_partial_credit(bank, tmp_path):
    path = export(bank, "qti", "ru", output=str(tmp_path / "bank.zip"))
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        manifest = etree.fromstring(zf.read("imsmanifest.xml"))
        assert manifest.tag == f"{CP}manifest"
        resources = manifest.findall(f"{CP}resources/{CP}resource")
        assert len(resources) == len(bank)
        for res in resources:
            assert res.get("type") == "imsqti_item_xmlv2p1"
            assert res.get("href") in names
            assert res.find(f"{CP}file").get("href") == res.get("href")
        items = {res.get("href"): etree.fromstring(zf.read(res.get("href"))) for res in resources}
    interactions = {"single": "choiceInteraction", "multiple": "choiceInteraction",
                    "numeric": "textEntryInteraction", "ordering": "orderInteraction",
                    "matching": "matchInteraction", "free_text": "extendedTextInteraction",
                    "code": "extendedTextInteraction", "matrix": "textEntryInteraction",
                    "shape": "textEntryInteraction", "big_o": "textEntryInteraction",
                    "expression": "textEntryInteraction"}
    for question in bank:
        inst = instances(question, "ru")[0]
        item = items[f"items/{inst['id']}.xml"]
        decl = item.find(f"{QTI}responseDeclaration")
        body = item.find(f"{QTI}itemBody")
        inter = body.find(f".//{QTI}{interactions[question.kind]}")
        grid = question.kind == "matrix" and inst["ask"] == "matrix"  # one response per entry
        assert inter is not None and inter.get("responseIdentifier") == ("R_1_1" if grid else "RESPONSE")
        assert float(item.find(f"{QTI}outcomeDeclaration[@identifier='MAXSCORE']//{QTI}value").text) == question.points
        correct = [v.text for v in decl.findall(f"{QTI}correctResponse/{QTI}value")]
        feedback = {f.get("identifier"): "".join(f.itertext()) for f in item.findall(f"{QTI}modalFeedback")}
        if inst["explanation"]:
            assert feedback["EXPLANATION"].strip()[:20] in markdown_html(inst["explanation"])
        seed = variant_seed("export-1", question.id)
        if question.kind in ("single", "multiple"):
            assert sorted(correct) == sorted("C_" + o.replace("-", "_") for o in solution(question, seed)["options"])
            choices = {c.get("identifier") for c in inter.findall(f"{QTI}simpleChoice")}
            assert set(correct) <= choices and choices <= set(feedback)
        elif question.kind == "numeric" or question.kind == "matrix" and not grid:
            assert decl.get("baseType") == "float"
            assert float(correct[0]) == pytest.approx(solution(question, seed)["value"])
            branches = item.findall(f".//{QTI}responseCondition/*")
            assert len(branches) == 1 + len(inst["mistakes"])  # the key, then each known mistake
            for n, m in enumerate(inst["mistakes"], 1):
                equal = branches[n].find(f"{QTI}equal")
                assert float(equal.get("tolerance").split()[0]) == pytest.approx(_rel_tolerance(question, m["value"]))
                assert feedback[f"MISTAKE_{n}"].strip()
        elif question.kind == "ordering":  # a share per pair in order (see the scoring test below)
            assert decl.get("cardinality") == "ordered"
            assert correct == ["C_" + i.replace("-", "_") for i in solution(question, seed)["order"]]
            shares = [float(c.find(f".//{QTI}sum/{QTI}baseValue").text)
                      for c in item.findall(f"{QTI}responseProcessing/{QTI}responseCondition")
                      if c.find(f".//{QTI}sum") is not None]
            n = len(correct)
            assert len(shares) == n * (n - 1) // 2 and sum(shares) == pytest.approx(question.points)
            for k, m in enumerate(inst["misplacements"], 1):
                assert feedback[f"MISPLACED_{k}"].strip()
        elif grid:
            key = [x for row in solution(question, seed)["matrix"] for x in row]
            entries = [d for d in item.findall(f"{QTI}responseDeclaration")]
            assert [float(d.find(f"{QTI}correctResponse/{QTI}value").text) for d in entries] == pytest.approx(key)
            assert len(body.findall(f".//{QTI}textEntryInteraction")) == len(key)
            assert all(feedback[f"MISTAKE_{k}"].strip() for k in range(1, len(inst["mistakes"]) + 1))
        elif question.kind in ("shape", "big_o", "expression"):
            assert decl.get("baseType") == "string" and correct == [inst["answer_text"]]
            assert all(feedback[f"MISTAKE_{k}"].strip() for k in range(1, len(inst["mistakes"]) + 1))
        elif question.kind == "matching":
            assert decl.get("baseType") == "directedPair"
            assert len(correct) == len(question.data["pairs"])
        else:
            rubric = body.find(f"{QTI}rubricBlock")
            assert rubric.get("view") == "scorer" and "".join(rubric.itertext()).strip()
            if question.kind == "code":
                assert question.data["template"].strip() in "".join(body.find(f"{QTI}pre").itertext())
                assert "def " + question.data["function"] in "".join(rubric.itertext())


def test_qti_needs_an_output_path(bank):
    with pytest.raises(ValueError, match="--output"):
        export(bank, "qti", "en")


def _qti_item(bank, question_id):
    from questions.export.qti import item_xml
    question = bank.get(question_id)
    inst = instances(question, "en")[0]
    return question, inst, etree.fromstring(item_xml(inst)), variant_seed("export-1", question_id)


def _choices(order):
    return ["C_" + i.replace("-", "_") for i in order]


def test_qti_scores_orderings_and_the_new_kinds_as_the_service_does(bank):
    """The exported response processing, run by a small interpreter of it, gives the service's
    points and names the same mistake: relative order (the mask after the softmax capped below a
    harmless shift), a matrix entry by entry, any listed spelling of a shape or a big-O class."""
    from qti_support import score
    from questions import grade_answer

    q, inst, item, seed = _qti_item(bank, "sdpa-steps-order")
    ids = [i["id"] for i in inst["items"]]
    mask_late = ["project", "scores", "softmax", "mask", "values"]
    for order in (ids, ids[1:] + ids[:1], mask_late):
        out = score(item, {"RESPONSE": _choices(order)})
        assert out["SCORE"] == pytest.approx(grade_answer(q, seed, order).points)
    assert score(item, {"RESPONSE": _choices(mask_late)})["FEEDBACK"] == ["MISPLACED_1"]
    assert score(item, {"RESPONSE": _choices(ids[1:] + ids[:1])})["FEEDBACK"] == []

    q, inst, item, seed = _qti_item(bank, "hand-attention-output")
    entries = {f"R_{r}_{c}": x for r, row in enumerate(inst["matrix"], 1) for c, x in enumerate(row, 1)}
    assert score(item, entries)["SCORE"] == pytest.approx(q.points)
    off = {**entries, "R_1_1": entries["R_1_1"] + 0.5}
    assert score(item, off)["SCORE"] == pytest.approx(q.points * 3 / 4)
    wrong = inst["mistakes"][0]["matrix"]
    out = score(item, {f"R_{r}_{c}": x for r, row in enumerate(wrong, 1) for c, x in enumerate(row, 1)})
    assert out["FEEDBACK"] == "MISTAKE_1"
    assert out["SCORE"] == pytest.approx(grade_answer(q, seed, wrong).points)

    for question_id in ("split-heads-shape", "self-attention-cost-big-o", "variance-nonzero-mean-formula"):
        q, inst, item, seed = _qti_item(bank, question_id)
        for text in inst["spellings"]:
            assert score(item, {"RESPONSE": text})["SCORE"] == pytest.approx(q.points), text
            assert grade_answer(q, seed, text).correct is True, text
        mistake = inst["mistakes"][0]["spellings"][0]
        assert score(item, {"RESPONSE": mistake}) == {**score(item, {"RESPONSE": mistake}),
                                                      "SCORE": 0, "FEEDBACK": "MISTAKE_1"}
        assert q.data["mistakes"][0]["feedback"]["en"][:20] in grade_answer(q, seed, mistake).feedback
        if q.kind != "shape":  # names are case-sensitive in the service, so in the export too
            assert score(item, {"RESPONSE": inst["spellings"][0].upper()})["SCORE"] == 0


def test_an_older_moodle_gets_orderings_as_matching_to_positions(bank):
    from questions.model import Bank
    orderings = Bank({q.id: q for q in bank if q.kind == "ordering"}, [], bank.path)
    native = etree.fromstring(export(orderings, "moodle-xml", "en").encode("utf-8"))
    legacy = etree.fromstring(export(orderings, "moodle-xml", "en", legacy_ordering=True).encode("utf-8"))
    assert {q.get("type") for q in native if q.get("type") != "category"} == {"ordering"}
    assert {q.get("type") for q in legacy if q.get("type") != "category"} == {"matching"}


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


# -- the instructor's question bank page -----------------------------------------------------------

def test_the_question_bank_page_downloads_every_export_and_each_parses(tmp_path):
    """The page's export buttons give the CLI's files: the right content type, a file name,
    and content that parses (QTI: a zip whose manifest lists every item, items valid)."""
    import io

    from pages_support import make_env, sign_in

    env = make_env(tmp_path)
    client = env.app.test_client()
    sign_in(client, "prof@example.org")
    page = client.get("/instructor/questions").get_data(as_text=True)
    assert 'id="question-export"' in page
    assert all(f'name="format" value="{fmt}"' in page for fmt in ("qti", "moodle-xml", "gift", "json"))
    bank = load_bank()
    got = {}
    for fmt in ("qti", "moodle-xml", "gift", "json"):
        response = client.get(f"/instructor/questions/export?format={fmt}&lang=zh&variants=1")
        assert response.status_code == 200, fmt
        assert "attachment; filename=attn-grader-questions-zh" in response.headers["Content-Disposition"]
        got[fmt] = response
    assert got["qti"].mimetype == "application/zip"
    with zipfile.ZipFile(io.BytesIO(got["qti"].data)) as zf:
        manifest = etree.fromstring(zf.read("imsmanifest.xml"))
        hrefs = [r.get("href") for r in manifest.findall(f"{CP}resources/{CP}resource")]
        assert len(hrefs) == len(bank) and set(hrefs) <= set(zf.namelist())
        items = [etree.fromstring(zf.read(h)) for h in hrefs]  # every item parses; the schema check of
        schema = qti_schema()                                   # all of them is the test above
        assert all(schema.validate(item) for item in items[::20])
    assert got["moodle-xml"].mimetype == "application/xml"
    root = etree.fromstring(got["moodle-xml"].data)
    assert root.tag == "quiz" and len(root.xpath("question[@type!='category']")) == len(bank)
    assert got["gift"].mimetype == "text/plain" and got["gift"].mimetype_params.get("charset") == "utf-8"
    path = tmp_path / "bank.gift"
    path.write_bytes(got["gift"].data)
    with open(path, encoding="utf-8") as f:
        assert len(giftparser.parseFile(f)) == len(bank)
    assert got["json"].mimetype == "application/json"
    doc = json.loads(got["json"].data)
    assert doc["lang"] == "zh" and len(doc["questions"]) == len(bank)
    # nothing else is exported, and students cannot export the bank
    assert client.get("/instructor/questions/export?format=exe").status_code == 400
    assert client.get("/instructor/questions/export?format=gift&lang=fr").status_code == 400
    student = env.app.test_client()
    sign_in(student, "ada@example.org")
    assert student.get("/instructor/questions/export?format=gift").status_code in (302, 403, 404)
