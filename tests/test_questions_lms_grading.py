"""The Moodle XML and GIFT exports grade like the service: Moodle's matching rules (emulated in
``lms_support``) run on what the exports write, for every auto-graded kind, every question, two
variants and every language. A wrong answer must not get full credit there, a right one must."""
from __future__ import annotations

import itertools
import re

import pytest
from lxml import etree

import lms_support as lms
from questions import grade_answer, load_bank
from questions.answers import AnswerFormatError
from questions.export import export, instances
from questions.variants import variant_seed

VARIANTS = 2
# wrong growths a wildcard would let through where a spelling has a "*" (review 3, W1)
INSERTS = ["^2 ", "^3 ", " log ", "^2 h ", "^3 ", " + h ", " + n ", "^2", "9", " n "]


@pytest.fixture(scope="module")
def bank():
    return load_bank()


def _service(question, seed, answer, lang):
    """(correct, fraction) in the service; a format error is (None, 0): no credit, no attempt."""
    try:
        r = grade_answer(question, seed, answer, lang)
    except AnswerFormatError:
        return None, 0.0
    return r.correct, r.points / r.max_points


def _seed(question, inst):
    return inst["seed"]


def _probes(spellings: list[str]) -> list[str]:
    """Responses a wildcard or a case-blind compare might wrongly accept: each ``*`` replaced by
    another growth, and the spelling in other cases."""
    out = []
    for text in spellings:
        for i in [m.start() for m in re.finditer(r"\*", text)]:
            out += [text[:i] + ins + text[i + 1:] for ins in INSERTS]
        out += [text.upper(), text.replace("(", "( ").replace(")", " )")]
    return list(dict.fromkeys(out))


def _check_shortanswer(question, seed, inst, answers, ignorecase):
    lang = inst["lang"]
    for text in inst["spellings"]:  # every listed spelling of the key: full credit in both
        assert lms.shortanswer(answers, text, ignorecase) == 1, (inst["id"], text)
        assert _service(question, seed, text, lang)[0] is True, (inst["id"], text)
    for m in inst["mistakes"]:
        for text in m["spellings"]:
            assert lms.shortanswer(answers, text, ignorecase) == 0, (inst["id"], text)
            assert _service(question, seed, text, lang)[0] is False
    all_texts = inst["spellings"] + [t for m in inst["mistakes"] for t in m["spellings"]]
    extra = ["O(d^2 n^2)", "O(d^3 n^2)", "O(d log n^2)", "O(b^2 h n^2)", "O(b h^3 n^2)", "O(b n^2 + h n^2)"]
    for text in _probes(all_texts) + extra:
        credit = lms.shortanswer(answers, text, ignorecase)
        if credit > 0:  # the LMS gives credit only where the service agrees the answer is right
            correct, _ = _service(question, seed, text, lang)
            assert correct is True or (correct is None and text.upper() == text and ignorecase), \
                (inst["id"], text, credit)


def _check_choice(question, seed, inst, fractions):
    lang = inst["lang"]
    ids = [o["id"] for o in inst["options"]]
    picks = [[i] for i in range(len(ids))] if inst["kind"] == "single" else \
        [list(c) for r in range(len(ids) + 1) for c in itertools.combinations(range(len(ids)), r)]
    for pick in picks:
        answer = ids[pick[0]] if inst["kind"] == "single" else [ids[i] for i in pick]
        correct, fraction = _service(question, seed, answer, lang)
        assert lms.multichoice(fractions, pick) == pytest.approx(fraction, abs=1e-4), (inst["id"], pick)


def _check_numerical(question, seed, inst, answers):
    lang = inst["lang"]
    key, tol = inst["answer"], inst["tolerance"]
    step = max(tol, 1e-9 * max(1, abs(key)))
    probes = [key, key + 0.9 * tol, key - 0.9 * tol, key + 2.5 * step, key - 2.5 * step, key * 1.1 + 0.01,
              key * 2, -key] + [m["value"] for m in inst["mistakes"]]
    for value in probes:
        correct, fraction = _service(question, seed, repr(value), lang)
        assert lms.numerical(answers, value) == pytest.approx(fraction), (inst["id"], value)


def _check_matrix(question, seed, inst, blanks):
    key = inst["matrix"]
    flat = [x for row in key for x in row]
    assert len(blanks) == len(flat)
    for change in [None] + list(range(len(flat))):
        got = [x + (0.5 + 3 * inst["tolerance"] if n == change else 0) for n, x in enumerate(flat)]
        lms_share = sum(lms.numerical([(100, v, t)], g) for (v, t), g in zip(blanks, got)) / len(flat)
        cols = len(key[0])
        rows = [got[i:i + cols] for i in range(0, len(got), cols)]
        _, fraction = _service(question, seed, rows, inst["lang"])
        assert lms_share == pytest.approx(fraction), (inst["id"], change)


def _check_order(question, seed, inst, grade):
    """``grade(order)`` is the LMS's fraction for an order of item ids: the key gets all of it,
    and no order the service calls wrong gets all of it."""
    ids = [i["id"] for i in inst["items"]]
    assert grade(ids) == pytest.approx(1)
    for order in itertools.islice(itertools.permutations(ids), 1, 400):
        correct, _ = _service(question, seed, list(order), inst["lang"])
        assert correct or grade(list(order)) < 1, (inst["id"], order)


@pytest.mark.parametrize("lang", ["en", "ru", "zh"])
def test_moodle_xml_grades_every_kind_like_the_service(bank, lang):
    root = etree.fromstring(export(bank, "moodle-xml", lang, variants=VARIANTS).encode("utf-8"))
    by_id = {q.findtext("idnumber"): q for q in root if q.get("type") != "category"}
    seen = set()
    for question in bank:
        for inst in instances(question, lang, VARIANTS):
            el, seed = by_id[inst["id"]], _seed(question, inst)
            qtype = el.get("type")
            seen.add(qtype)
            if qtype == "shortanswer":
                _check_shortanswer(question, seed, inst, lms.moodle_answers(el), el.findtext("usecase") != "1")
            elif qtype == "multichoice":
                _check_choice(question, seed, inst, [f for f, _ in lms.moodle_answers(el)])
            elif qtype == "numerical":
                _check_numerical(question, seed, inst, lms.moodle_numerical_answers(el))
            elif qtype == "cloze":
                blanks = re.findall(r"\{1:NUMERICAL:=([-0-9.]+):([0-9.]+)\}", el.find("questiontext/text").text)
                _check_matrix(question, seed, inst, [(float(v), float(t)) for v, t in blanks])
            elif qtype == "ordering":
                texts = [a.findtext("text") for a in el.findall("answer")]  # in the key's order
                _check_order(question, seed, inst, lambda order: lms.relative_order(
                    texts, [texts[[i["id"] for i in inst["items"]].index(o)] for o in order]))
            elif qtype == "matching":
                n = len(inst["pairs"])
                for shift in range(n):  # each left matched to the right of another pair
                    answer = {p["id"]: inst["pairs"][(k + shift) % n]["id"] for k, p in enumerate(inst["pairs"])}
                    _, fraction = _service(question, seed, answer, lang)
                    assert fraction == pytest.approx((n if shift == 0 else 0) / n)
            else:
                assert qtype == "essay" and inst["kind"] in ("code", "free_text")
    assert {"shortanswer", "multichoice", "numerical", "cloze", "ordering", "matching"} <= seen


@pytest.mark.parametrize("lang", ["en", "ru", "zh"])
def test_gift_grades_every_kind_like_the_service(bank, lang):
    text = export(bank, "gift", lang, variants=VARIANTS)
    blocks = [b for b in text.strip().split("\n\n") if not b.startswith("$CATEGORY")]
    insts = [(q, i) for q in bank for i in instances(q, lang, VARIANTS)]
    assert len(blocks) == len(insts)
    for (question, inst), block in zip(insts, blocks):
        seed, kind = _seed(question, inst), inst["kind"]
        numeric, answers = lms.gift_answers(block)
        if kind in ("shape", "big_o", "expression"):
            assert all(mark == "=" for mark, *_ in answers)  # Moodle reads it as a short answer
            _check_shortanswer(question, seed, inst, [(100 if w is None else w, a) for _, w, a, _ in answers],
                               ignorecase=True)  # GIFT cannot set the case flag: Moodle ignores case
        elif kind in ("single", "multiple"):
            fractions = [w if w is not None else (100 if mark == "=" else 0) for mark, w, _, _ in answers]
            _check_choice(question, seed, inst, fractions)
        elif kind == "numeric" or kind == "matrix" and inst["ask"] == "entry":
            assert numeric == "#"
            parsed = []
            for _, w, a, _ in answers:
                value, tolerance = a.split(":")
                parsed.append((100 if w is None else w, float(value), float(tolerance)))
            _check_numerical(question, seed, inst, parsed)
        elif kind == "ordering":  # matching to positions: credit by absolute position
            position = {a.split(" -> ")[0]: int(a.split(" -> ")[1]) for _, _, a, _ in answers}
            texts = [lms.gift_post(lms.gift_pre(t)) for t in position]
            ids = [i["id"] for i in inst["items"]]
            _check_order(question, seed, inst, lambda order: sum(
                position[list(position)[ids.index(o)]] == n for n, o in enumerate(order, 1)) / len(order))
            assert len(texts) == len(ids)
        elif kind == "matching":
            assert len(answers) == len(inst["pairs"])
        else:  # essays (code, free text, a whole matrix): graded by hand in Moodle, never automatically
            assert not answers or kind == "matrix", inst["id"]


def test_the_wildcard_emulation_is_moodles():
    """The rule itself, on the review's cases: an unescaped ``*`` matches anything, ``\\*`` only a star."""
    assert lms.wildcard_match("O(d^3 n^2)", "O(d*n^2)", True)
    assert not lms.wildcard_match("O(d^3 n^2)", "O(d\\*n^2)", True)
    assert lms.wildcard_match("O(d*n^2)", "O(d\\*n^2)", True)
    assert lms.wildcard_match("  o(D*N^2) ", "O(d\\*n^2)", True)
    assert not lms.wildcard_match("o(D*N^2)", "O(d\\*n^2)", False)
    assert lms.wildcard_match("b n^2 + h n^2", "b**n^2", True)  # "**" is one wildcard
    assert lms.gift_post(lms.gift_pre("O(d\\\\*n^2)")) == "O(d\\*n^2)"
    assert lms.gift_post(lms.gift_pre("a \\= b \\{c\\} \\~ \\# \\: \\n")) == "a = b {c} ~ # : \n"
