"""What the README and the instructors' guide say about the bank matches the bank, and the demo
course's quiz draws every kind of question."""
from __future__ import annotations

import re
from pathlib import Path

from questions import load_bank
from questions.schema import KINDS

ROOT = Path(__file__).resolve().parent.parent
COUNTS = {  # file -> the sentence that states the bank's size
    "README.md": r"Question bank\]\([^)]*\): (\d+) questions in three languages",
    "docs/instructors/question-bank.md": r"one YAML file per question \((\d+) at\s+present\)",
}


def test_the_stated_question_counts_are_the_banks():
    size = len(load_bank())
    for name, pattern in COUNTS.items():
        text = (ROOT / name).read_text(encoding="utf-8")
        found = [int(n) for n in re.findall(pattern, text)]
        assert found == [size], f"{name} states {found} questions; the bank has {size}: update the sentence"


def test_every_kind_is_documented():
    text = (ROOT / "docs/instructors/question-bank.md").read_text(encoding="utf-8")
    assert all(f"`{kind}`" in text for kind in KINDS), [k for k in KINDS if f"`{k}`" not in text]


def test_the_demo_quiz_draws_every_kind_of_question():
    from web.services.courses import CHAPTER_QUIZ, chapter_question_ids
    bank = load_bank()
    assert chapter_question_ids() == list(CHAPTER_QUIZ)  # every listed question exists
    assert {bank.get(qid).kind for qid in CHAPTER_QUIZ} == set(KINDS)
