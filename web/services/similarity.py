"""Similarity review: which students' latest submissions to a task are near-identical.

Fingerprints come from ``copydetect`` (winnowing, as in MOSS): the code is tokenised with
Pygments, every name becomes V/F/O and every string S, comments and whitespace go, so renamed
variables and reformatting change nothing; k-grams of the token stream are hashed and winnowed.
The task's template is the boilerplate: its fingerprints are removed from every file, so code
that every student was handed is never evidence.

A report is computed in a background thread of the web process and stored
(``SimilarityReport``); the pages only read it. A report still "computing" after
``STALE_SECONDS`` is taken for dead (its process was restarted) and may be started again.
"""
from __future__ import annotations

import difflib
import io
import logging
import threading
from datetime import timedelta
from itertools import combinations

import numpy as np
from copydetect import CodeFingerprint, compare_files
from copydetect.defaults import GUARANTEE_THRESHOLD, NOISE_THRESHOLD
from copydetect.utils import highlight_overlap
from markupsafe import Markup
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..db import session_factory, writing
from ..models import Assignment, SimilarityReport, Submission, User, utcnow

log = logging.getLogger(__name__)
DEFAULT_THRESHOLD = 0.5   # a pair is listed when either file shares at least this much
WINDOW = GUARANTEE_THRESHOLD - NOISE_THRESHOLD + 1  # copydetect's own window for its thresholds
STALE_SECONDS = 600
MAX_PAIRS = 200


class ReviewRefused(Exception):
    """Why a report cannot be started (a quiz, one already computing, a bad threshold)."""


def latest_submissions(session: Session, assignment: Assignment) -> list[Submission]:
    """Each student's newest submission to ``assignment`` (instructors' own tries left out)."""
    newest = (select(func.max(Submission.id)).join(User, User.id == Submission.user_id)
              .where(Submission.assignment_id == assignment.id, User.role == "student")
              .group_by(Submission.user_id))
    return list(session.scalars(select(Submission).where(Submission.id.in_(newest))
                                .order_by(Submission.id)))


def _fingerprint(code: str, boilerplate) -> CodeFingerprint:
    return CodeFingerprint("submission.py", NOISE_THRESHOLD, WINDOW, boilerplate=boilerplate,
                           language="python", fp=io.StringIO(code))


def blank_template_lines(code: str, template_text: str) -> str:
    """``code`` with the lines it shares, in order, with the template turned into spaces.

    copydetect's boilerplate removes the template's k-grams, but k-grams that straddle the end of
    the template and the start of a student's own code survive, and with every name turned into
    V they match between any two students. Blanking the template's lines first (same length, so
    copydetect's character offsets still point into the submitted code) leaves only the
    students' own tokens to fingerprint.
    """
    if not template_text:
        return code
    lines = code.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, [line.strip() for line in template_text.splitlines()],
                                      [line.strip() for line in lines], autojunk=False)
    for block in matcher.get_matching_blocks():
        for i in range(block.b, block.b + block.size):
            if lines[i].strip():
                body = lines[i].rstrip("\r\n")
                lines[i] = " " * len(body) + lines[i][len(body):]
    return "".join(lines)


def template_text(task_id: str | None, lang: str | None = None) -> str:
    from grader.tasks import TASK_IDS, template

    return template(task_id, lang) if task_id in TASK_IDS else ""


def template_texts(task_id: str | None) -> list[str]:
    """The task's starter in every language: the editor opens with the reader's, so two students
    who kept its Russian docstring share it as they would share the English one."""
    from grader.i18n import LANGUAGES

    return list(dict.fromkeys(text for lang in LANGUAGES if (text := template_text(task_id, lang))))


def template_fingerprints(task_id: str | None):
    """The task templates' k-gram hashes (every one, not winnowed, of each language's starter), as
    copydetect's boilerplate."""
    texts = template_texts(task_id)
    if not texts:
        return []
    return np.unique(np.concatenate([np.array(list(CodeFingerprint(
        "template.py", NOISE_THRESHOLD, 1, language="python", fp=io.StringIO(text)).hashes)) for text in texts]))


def similar_pairs(codes: dict[int, str], boilerplate, threshold: float, template: str | list[str] = "") -> list[dict]:
    """Pairs of ``codes`` (id -> source) sharing at least ``threshold`` of either file, most
    similar first: {"a", "b", "similarity_a", "similarity_b", "tokens", "slices_a", "slices_b"}.
    ``boilerplate`` (fingerprints) and ``template`` (its text, or each language's, whose lines are
    blanked) are left out."""
    templates = [template] if isinstance(template, str) else list(template)

    def blanked(code: str) -> str:
        for text in templates:  # a blanked line is spaces: the next language's lines never match it
            code = blank_template_lines(code, text)
        return code

    prints = {key: _fingerprint(blanked(code), boilerplate) for key, code in codes.items()}
    pairs = []
    for a, b in combinations(sorted(prints), 2):
        tokens, (sim_a, sim_b), (slices_a, slices_b) = compare_files(prints[a], prints[b])
        if max(sim_a, sim_b) < threshold:
            continue
        pairs.append({"a": a, "b": b, "similarity_a": round(float(sim_a), 4),
                      "similarity_b": round(float(sim_b), 4), "tokens": int(tokens),
                      "slices_a": np.asarray(slices_a, dtype=int).tolist(),
                      "slices_b": np.asarray(slices_b, dtype=int).tolist()})
    pairs.sort(key=lambda p: (-max(p["similarity_a"], p["similarity_b"]), -p["tokens"], p["a"], p["b"]))
    return pairs[:MAX_PAIRS]


def latest_report(session: Session, assignment: Assignment) -> SimilarityReport | None:
    return session.scalar(select(SimilarityReport).where(SimilarityReport.assignment_id == assignment.id)
                          .order_by(SimilarityReport.id.desc()).limit(1))


def _is_stale(report: SimilarityReport, now) -> bool:
    return report.status == "computing" and now - report.created_at > timedelta(seconds=STALE_SECONDS)


def start_report(session: Session, engine, assignment: Assignment, requested_by: User,
                 threshold: float = DEFAULT_THRESHOLD, background: bool = True) -> SimilarityReport:
    """Store a 'computing' report and compute it in a background thread (``background=False``:
    here and now, for the command line). Raises ``ReviewRefused``."""
    if assignment.kind != "task":
        raise ReviewRefused(f"{assignment.slug} is a quiz: similarity review compares code")
    if not 0.05 <= threshold <= 1.0:
        raise ReviewRefused("the threshold is a share of the code between 0.05 and 1")
    now = utcnow()
    current = latest_report(session, assignment)
    if current is not None and current.status == "computing":
        if not _is_stale(current, now):
            raise ReviewRefused("a similarity report for this assignment is already being computed")
        current.status, current.error, current.finished_at = "failed", "interrupted (the server restarted)", now
    report = SimilarityReport(assignment_id=assignment.id, status="computing", threshold=threshold,
                              requested_by_id=requested_by.id, created_at=now)
    session.add(report)
    session.commit()
    if background:
        threading.Thread(target=compute_report, args=(engine, report.id), daemon=True,
                         name=f"similarity-{report.id}").start()
    else:
        compute_report(engine, report.id)
        session.refresh(report)
    return report


def compute_report(engine, report_id: int) -> None:
    """Compare the latest submissions and store the result in report ``report_id``."""
    with session_factory(engine)() as session:
        report = session.get(SimilarityReport, report_id)
        if report is None:  # its assignment was deleted meanwhile
            return
        assignment = report.assignment
        submissions = latest_submissions(session, assignment)
        codes = {s.id: s.code for s in submissions}
        task_id = assignment.task_id
        threshold = report.threshold
    try:
        pairs = similar_pairs(codes, template_fingerprints(task_id), threshold, template_texts(task_id))
        error = None
    except Exception as exc:  # a report that says it failed beats one computing forever
        log.exception("similarity report %s failed", report_id)
        pairs, error = None, f"{type(exc).__name__}: {exc}"[:500]
    with session_factory(writing(engine))() as session:
        report = session.get(SimilarityReport, report_id)
        if report is None:
            return
        report.status = "failed" if error else "done"
        report.pairs, report.error = pairs, error
        report.submission_count, report.finished_at = len(codes), utcnow()
        session.commit()


def pair_rows(session: Session, report: SimilarityReport) -> list[dict]:
    """The report's pairs with both students, for the list page."""
    pairs = report.pairs or []
    ids = {p[k] for p in pairs for k in ("a", "b")}
    subs = {s.id: s for s in session.scalars(select(Submission).where(Submission.id.in_(ids)))} if ids else {}
    return [{"index": i, "a": subs.get(p["a"]), "b": subs.get(p["b"]), "similarity_a": p["similarity_a"],
             "similarity_b": p["similarity_b"], "tokens": p["tokens"]}
            for i, p in enumerate(pairs) if p["a"] in subs and p["b"] in subs]


def _highlighted(code: str, slices: list) -> Markup:
    """``code`` as escaped HTML with the shared regions in <mark> (copydetect's highlighter)."""
    array = np.array(slices, dtype=int).reshape(2, -1) if slices else np.zeros((2, 0), dtype=int)
    if array.shape[1] == 0:
        return Markup.escape(code)
    html, _share = highlight_overlap(code, array, '<mark class="shared">', "</mark>", escape_html=True)
    return Markup(html)


def pair_detail(session: Session, report: SimilarityReport, index: int) -> dict | None:
    """Both files of pair ``index``, side by side, with the shared regions marked."""
    pairs = report.pairs or []
    if not 0 <= index < len(pairs):
        return None
    pair = pairs[index]
    a, b = session.get(Submission, pair["a"]), session.get(Submission, pair["b"])
    if a is None or b is None:
        return None
    return {"a": a, "b": b, "similarity_a": pair["similarity_a"], "similarity_b": pair["similarity_b"],
            "tokens": pair["tokens"], "html_a": _highlighted(a.code, pair["slices_a"]),
            "html_b": _highlighted(b.code, pair["slices_b"])}
