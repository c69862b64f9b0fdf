"""Regrading an assignment with the current grader: preview the changes, then apply them.

Every submission of the assignment is graded again (in parallel threads; each grade runs
in its own sandbox process). Applying adds a new ``Result`` of kind "regrade" with the new
grader version; the earlier results stay in the database.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..models import Assignment, Submission
from .grading import effective_score, grading_seed, latest_override, record_result, report_to_dict


@dataclass
class RegradeChange:
    submission_id: int
    email: str
    old_score: float | None
    new_score: float
    max_score: float
    old_version: str | None
    new_version: str
    report: dict

    @property
    def changed(self) -> bool:
        return self.old_score is None or abs(self.new_score - self.old_score) > 1e-9


def plan_regrade(session: Session, assignment: Assignment, grade_fn, *, config: dict, sandbox: str = "auto",
                 jobs: int = 2, progress=None) -> list[RegradeChange]:
    """Grade every submission again without storing anything."""
    subs = session.scalars(select(Submission).where(Submission.assignment_id == assignment.id)
                           .order_by(Submission.id)).all()
    device = "cuda" if assignment.queue == "gpu" else "cpu"

    def grade(sub: Submission) -> RegradeChange:
        data = report_to_dict(grade_fn(sub.code, sub.task_id, sandbox=sandbox, device=device,
                                       server_seed=grading_seed(config, sub.task_id, sub.code)))
        override = overrides[sub.id]  # record_result keeps it: the plan shows what is stored
        change = RegradeChange(
            submission_id=sub.id, email=sub.user.email, old_score=sub.score,
            new_score=override.points if override is not None
            else effective_score(sub, float(data.get("score") or 0.0)),
            max_score=float(data.get("max_score") or 0.0), old_version=sub.grader_version,
            new_version=str(data.get("grader_version") or "unknown"), report=data)
        if progress:
            progress(change)
        return change

    overrides = {sub.id: latest_override(session, sub) for sub in subs}
    for sub in subs:  # load lazy attributes here, not in the worker threads
        _ = sub.user.email, sub.assignment.late_policy
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(grade, subs))


def apply_regrade(session: Session, changes: list[RegradeChange]) -> int:
    """Store the planned results (all of them: each records the grader version); commit."""
    for change in changes:
        submission = session.get(Submission, change.submission_id)
        record_result(session, submission, change.report, kind="regrade")
        if submission.job is not None and submission.job.status != "done":
            submission.job.status, submission.job.error = "done", None
    session.commit()
    return len(changes)
