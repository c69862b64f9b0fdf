"""The ``expression`` kind: any equivalent formula is right, listed mistakes get their feedback,
and student text is read only through the whitelist (no eval of what they type)."""
from __future__ import annotations

import pytest

from questions import grade_answer, load_bank
from questions.answers import AnswerFormatError
from questions.symbolic import ExpressionError, parse, same, spellings, values

V = ["d_k", "mu"]


@pytest.fixture(scope="module")
def bank():
    return load_bank()


@pytest.mark.parametrize("text", ["d_k*(1 + 2*mu^2)", "d_k + 2 d_k mu²", "(1+2μ^2)·dk", "dk(1+2mu^2)",
                                  "2*mu**2*d_k + d_k", "d_k^(1/2)*sqrt(d_k)*(1 + 2*mu^2)", "d_k (1 + 2 mu^2)"])
def test_equivalent_forms_are_one_answer(bank, text):
    q = bank.get("variance-nonzero-mean-formula")
    assert grade_answer(q, 0, text).correct is True


@pytest.mark.parametrize("text, feedback", [("d_k*(1 + mu^2)", "spread inside one row"),
                                            ("d_k*(1+mu^2)^2", "second moment"), ("d_k", "zero-mean result")])
def test_listed_mistakes_get_their_feedback(bank, text, feedback):
    r = grade_answer(bank.get("variance-nonzero-mean-formula"), 0, text)
    assert r.correct is False and r.points == 0 and feedback in str(r.feedback)


def test_a_wrong_formula_without_feedback_is_just_wrong(bank):
    r = grade_answer(bank.get("variance-nonzero-mean-formula"), 0, "d_k*(1 + 2*mu)^2")
    assert r.correct is False and r.points == 0


@pytest.mark.parametrize("text", ['__import__("os").system("true")', "d_k.__class__", "().__class__", "x",
                                  "lambda: 1", "d_k; mu", "mu^mu", "2^99^99", "(d_k^12)^12",
                                  "exp(exp(exp(mu)))", "d_k" + "+d_k" * 100, ")(", "", "   ", "1e5",
                                  "d_k, mu", "[d_k]", "d_k**", "eval(mu)", "Symbol('x')", "D_K"])
def test_unreadable_or_unsafe_text_is_a_format_error(bank, text):
    with pytest.raises(ExpressionError):
        parse(text, V)
    with pytest.raises(AnswerFormatError):  # not counted as an attempt, never raised further
        grade_answer(bank.get("variance-nonzero-mean-formula"), 0, text)


def test_inputs_at_the_bounds_are_read_and_past_them_refused():
    """What keeps reading and comparing cheap is structural (no timing here): the largest numbers,
    powers and nesting allowed still evaluate to finite values; one step past is a format error."""
    for text in ("999999^12", "(d_k + mu + 1)^12", "exp(log(d_k))*sqrt(mu)", "(" * 40 + "mu" + ")" * 40):
        assert all(abs(v) < float("inf") for v in values(parse(text, V), V)), text
    for text in ("1234567", "(d_k + mu)^13", "((d_k^4)^4)", "exp(exp(exp(mu)))", "d_k" + " + d_k" * 60):
        with pytest.raises(ExpressionError):
            parse(text, V)


def test_a_division_by_zero_equals_nothing():
    a = values(parse("1/(d_k - d_k)", V), V)
    assert not same(a, a)


def test_every_export_spelling_grades_right(bank):
    for q in bank:
        if q.kind == "expression":
            for text in spellings(q.data["answer"], q.data["variables"]):
                assert grade_answer(q, 0, text).correct is True, (q.id, text)
