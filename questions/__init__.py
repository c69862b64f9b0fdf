"""The chapter's self-check question bank: data files plus loading, validation and grading.

Stable API for the web app:

* ``load_bank(path=None) -> Bank``: every ``questions/bank/*.yaml`` (or ``path``). Iterate it
  (sorted by id), ``bank.get(id)`` (KeyError if absent), ``id in bank``, ``bank.errors`` (files
  that failed to load, each ``"<file>: <field>: <problem>"``; valid files still load).
* ``variant_seed(student_key, question_id, secret=None) -> int``: reproducible per student
  and question, independent of the language. The web app passes its quiz secret (an HMAC
  key), so no one without it can compute a student's variant; ``None`` gives public seeds
  (exports, previews, tests).
* ``render(question, seed, lang="en") -> dict``: what the browser may see: ``id, kind, lang,
  title, prompt`` (Markdown, parameters filled in), ``points, difficulty, topics, params`` and,
  by kind, ``options`` / ``items`` / ``left`` + ``right`` (lists of ``{id, text}`` with opaque
  per-seed ids, shuffled per seed), ``unit`` (numeric), ``function`` + ``template`` (code),
  ``answer_shape`` ([rows, cols] of a matrix to fill in), ``variables`` (big-O).
  Never the answer, a correctness flag, option feedback or a rubric.
* ``grade_answer(question, seed, answer, lang="en", *, sandbox="auto") -> AnswerResult``
  with ``correct`` (True/False, None = waiting for an instructor), ``points``, ``max_points``,
  ``feedback`` (English, a ``grader.i18n.T``: ``to_dict`` stores its template as
  ``feedback_i18n``, which ``grader.i18n.render`` shows in any reader's language) and ``details`` (JSON-safe; no solution in it).
  Answer formats and partial credit: see :mod:`questions.answers`. A malformed answer raises
  ``AnswerFormatError`` (a ValueError) so that it does not count as an attempt. The feedback
  explains the answer (option feedback, the question's explanation), so where a student may
  still change an answer, show it only once the attempt is closed.
* ``score_rubric(question, awarded_ids) -> AnswerResult``: an instructor's verdict on a
  free-text answer. ``solution(question, seed, lang) -> dict``: the answer, for instructors.
"""
from .answers import AnswerFormatError, AnswerResult, grade_answer, score_rubric, solution
from .model import Bank, Question, load_bank
from .variants import render, variant_seed

__all__ = ["AnswerFormatError", "AnswerResult", "Bank", "Question", "grade_answer", "load_bank",
           "render", "score_rubric", "solution", "variant_seed"]
