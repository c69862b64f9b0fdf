"""The service's tables (SQLAlchemy 2.x declarative models).

Conventions: timestamps are naive UTC (``utcnow()``), so SQLite and PostgreSQL compare them
alike; JSON columns hold what the grader and the question bank return. Every change here
needs an Alembic revision: ``attn-grader db revision -m "what changed"``.

Who grades what:
- ``Submission`` is the code as submitted; it never changes after insert except for the
  denormalised ``status``/``score`` columns that mirror its latest ``Result``.
- ``GradingJob`` is the dispatch record (the truth about a job, whatever delivers it).
- ``Result`` + ``StoredCheck`` are one grading run; a regrade adds a new ``Result`` and
  keeps the old one, each with its ``grader_version``.
"""
from __future__ import annotations

import enum
import secrets
from datetime import datetime, timezone

from sqlalchemy import (JSON, BigInteger, Boolean, CheckConstraint, DateTime, Float, ForeignKey, Index, Integer,
                        MetaData, String, Text, UniqueConstraint, text)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

ROLES = ("student", "instructor")
LATE_POLICIES = ("reject", "accept", "penalty")  # penalty: score * (1 - late_penalty)
FEEDBACK_LEVELS = ("full", "score", "after_deadline")  # what a student sees of the checks
class JobStatus(enum.StrEnum):
    """A grading job's status: the only values ``grading_jobs.status`` and the submission's
    mirror of it, ``submissions.status``, take (CHECK constraints hold the database to them).
    Members are strings, so they compare and store as the plain words."""
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


JOB_STATUSES = tuple(status.value for status in JobStatus)
# grading_jobs' (migration 0011) and submissions' (0012, the job's mirrored) statuses
JOB_STATUS_CHECK = "status IN ('queued', 'running', 'done', 'failed')"
HOST_LOST = "grading host lost"  # the error of a job failed because its workers kept vanishing
QUEUES = ("cpu", "gpu")
# The jobs a worker may claim are among these: queued, or running with a lease that may have
# expired. ``ix_grading_jobs_pending`` holds only them, so a claim's look-up does not grow with
# the finished history. SQLite uses a partial index only for a query that repeats its WHERE
# term verbatim, so the claim uses this very clause (migrations/versions/0008 spells it out).
PENDING_JOBS = text("status IN ('queued', 'running')")
# How a quiz question may be answered (Assignment.answer_policy): one try whose feedback comes
# after it and which is final, or several tries each wrong one costing ``try_penalty`` of the
# points (Moodle's "interactive with multiple tries", PrairieLearn's points per try).
ANSWER_POLICIES = ("single_try", "penalised_tries")
QUIZ_ANSWER_STATES = ("open", "pending", "final")  # QuizAnswer.state
QUIZ_TRY_STATUSES = ("pending", "graded", "failed")
PREFER_GPU = "prefer-gpu"  # Assignment.device: a GPU if one is free soon, else a CPU


def new_public_id() -> str:
    """A submission's public id: 64 random bits in hex (``web.public_ids`` says why)."""
    return secrets.token_hex(8)


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    # Named constraints so that batch migrations on SQLite can alter them.
    metadata = MetaData(naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    })


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(254), unique=True)  # stored lower-case
    name: Mapped[str] = mapped_column(String(200), default="")
    role: Mapped[str] = mapped_column(String(20), default="student")
    password_hash: Mapped[str | None] = mapped_column(String(200))  # argon2id; None = no login
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    locale: Mapped[str] = mapped_column(String(10), default="en")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    tokens: Mapped[list[ApiToken]] = relationship(back_populates="user")

    @property
    def is_instructor(self) -> bool:
        return self.role == "instructor"

    # Flask-Login protocol, so the pages can log a User in directly.
    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def is_anonymous(self) -> bool:
        return False

    def get_id(self) -> str:
        return str(self.id)

    def __repr__(self) -> str:
        return f"<User {self.email} {self.role}>"


class ApiToken(Base):
    """An API token; only its SHA-256 is stored, the plaintext is shown once."""
    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))  # first characters, to tell tokens apart
    label: Mapped[str] = mapped_column(String(100), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime)

    user: Mapped[User] = relationship(back_populates="tokens")


class Course(Base):
    __tablename__ = "courses"
    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    assignments: Mapped[list[Assignment]] = relationship(
        back_populates="course", order_by="Assignment.position")
    enrollments: Mapped[list[Enrollment]] = relationship(back_populates="course")


class Enrollment(Base):
    __tablename__ = "enrollments"
    __table_args__ = (UniqueConstraint("course_id", "user_id", name="uq_enrollments_course_user"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(20), default="student")
    # the course section(s) the LMS puts the student in, as it names them (LTI launches)
    section: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    course: Mapped[Course] = relationship(back_populates="enrollments")
    user: Mapped[User] = relationship()


class Assignment(Base):
    """A graded task (``task_id`` from ``grader.tasks.TASKS``) or a quiz (``question_ids``)."""
    __tablename__ = "assignments"
    __table_args__ = (UniqueConstraint("course_id", "slug", name="uq_assignments_course_slug"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"))
    slug: Mapped[str] = mapped_column(String(64))
    title: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(10), default="task")
    task_id: Mapped[str | None] = mapped_column(String(64))
    question_ids: Mapped[list | None] = mapped_column(JSON)
    # cpu; cuda or gpu (requires a GPU); prefer-gpu (the gpu queue first, the cpu queue
    # when no GPU worker took it in time, see the reconciler)
    device: Mapped[str] = mapped_column(String(10), default="cpu")
    position: Mapped[int] = mapped_column(Integer, default=0)
    visible: Mapped[bool] = mapped_column(Boolean, default=True)
    opens_at: Mapped[datetime | None] = mapped_column(DateTime)
    deadline: Mapped[datetime | None] = mapped_column(DateTime)
    late_policy: Mapped[str] = mapped_column(String(10), default="reject")
    late_penalty: Mapped[float] = mapped_column(Float, default=0.0)  # fraction taken off
    max_attempts: Mapped[int | None] = mapped_column(Integer)  # None = unlimited
    rate_limit_count: Mapped[int | None] = mapped_column(Integer)  # submissions per window
    rate_limit_seconds: Mapped[int | None] = mapped_column(Integer)
    feedback: Mapped[str] = mapped_column(String(20), default="full")
    answer_policy: Mapped[str] = mapped_column(String(20), default="single_try",
                                               server_default="single_try")
    try_penalty: Mapped[float] = mapped_column(Float, default=1 / 3, server_default="0.3333333333")
    # {family: points} set by the instructor (web/services/family_points.py); None: the task's own
    family_points: Mapped[dict | None] = mapped_column(JSON)
    # [family] whose checks' messages and details students see only after their deadline
    # (web/services/hidden_checks.py); their points count at once. None: every check shown.
    hidden_families: Mapped[list | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    course: Mapped[Course] = relationship(back_populates="assignments")

    @property
    def queue(self) -> str:
        return "gpu" if self.device.startswith("cuda") or self.device in ("gpu", PREFER_GPU) \
            else "cpu"


class Submission(Base):
    __tablename__ = "submissions"
    __table_args__ = (Index("ix_submissions_assignment_user", "assignment_id", "user_id"),
                      # the job's status, mirrored (migration 0012)
                      CheckConstraint(JOB_STATUS_CHECK, name="status"))
    id: Mapped[int] = mapped_column(primary_key=True)
    # What links and receipts name: never handed out twice, even after a restore (the id is).
    public_id: Mapped[str] = mapped_column(String(16), unique=True, index=True,
                                           default=new_public_id)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    task_id: Mapped[str] = mapped_column(String(64))
    code: Mapped[str] = mapped_column(Text)
    code_sha256: Mapped[str] = mapped_column(String(64))
    filename: Mapped[str] = mapped_column(String(200), default="submission.py")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, index=True)
    late: Mapped[bool] = mapped_column(Boolean, default=False)
    # Mirrors of the latest Result, so lists and score tables need no join.
    status: Mapped[str] = mapped_column(String(10), default=JobStatus.QUEUED)  # JobStatus
    score: Mapped[float | None] = mapped_column(Float)
    max_score: Mapped[float | None] = mapped_column(Float)
    grader_version: Mapped[str | None] = mapped_column(String(40))
    error: Mapped[str | None] = mapped_column(Text)

    assignment: Mapped[Assignment] = relationship()
    user: Mapped[User] = relationship()
    job: Mapped[GradingJob | None] = relationship(back_populates="submission", uselist=False)
    results: Mapped[list[Result]] = relationship(back_populates="submission", order_by="Result.id")

    @property
    def result(self) -> Result | None:
        """The current result: the newest run (a regrade supersedes the first grade)."""
        return self.results[-1] if self.results else None


class GradingJob(Base):
    """Dispatch state of one submission or one quiz code answer (exactly one of the two);
    workers claim it with a conditional update."""
    __tablename__ = "grading_jobs"
    __table_args__ = (Index("ix_grading_jobs_claim", "status", "queue", "id"),
                      CheckConstraint(JOB_STATUS_CHECK, name="status"),
                      # the claim's pick, in claim order (web.dispatch.claim.claim_next)
                      Index("ix_grading_jobs_pending", "queue", "queued_at", "id",
                            postgresql_where=PENDING_JOBS, sqlite_where=PENDING_JOBS))
    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int | None] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), unique=True)
    quiz_try_id: Mapped[int | None] = mapped_column(
        ForeignKey("quiz_tries.id", ondelete="CASCADE"), unique=True)
    queue: Mapped[str] = mapped_column(String(10), default="cpu")
    status: Mapped[str] = mapped_column(String(10), default=JobStatus.QUEUED)  # JobStatus
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # also the fencing token
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime)
    worker: Mapped[str | None] = mapped_column(String(200))
    error: Mapped[str | None] = mapped_column(Text)
    queued_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    notified_at: Mapped[datetime | None] = mapped_column(DateTime)
    started_at: Mapped[datetime | None] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)

    submission: Mapped[Submission | None] = relationship(back_populates="job")
    quiz_try: Mapped[QuizTry | None] = relationship(back_populates="job")


class Result(Base):
    """One grading run of a submission: the grader's report, kept whole."""
    __tablename__ = "results"
    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    job_attempt: Mapped[int | None] = mapped_column(Integer)  # None for an admin regrade
    kind: Mapped[str] = mapped_column(String(10), default="grade")  # grade | regrade
    score: Mapped[float] = mapped_column(Float)
    max_score: Mapped[float] = mapped_column(Float)
    passed: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text)
    grader_version: Mapped[str] = mapped_column(String(40))
    sandbox: Mapped[str | None] = mapped_column(String(40))
    worker: Mapped[str | None] = mapped_column(String(200))
    report: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    submission: Mapped[Submission] = relationship(back_populates="results")
    checks: Mapped[list[StoredCheck]] = relationship(
        back_populates="result", order_by="StoredCheck.position", cascade="all, delete-orphan")


class StoredCheck(Base):
    """One check's verdict within a ``Result`` (the grader's ``CheckResult``, as stored)."""
    __tablename__ = "check_results"
    id: Mapped[int] = mapped_column(primary_key=True)
    result_id: Mapped[int] = mapped_column(ForeignKey("results.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    check_id: Mapped[str] = mapped_column(String(100))
    passed: Mapped[bool] = mapped_column(Boolean)
    points: Mapped[float] = mapped_column(Float)
    max_points: Mapped[float] = mapped_column(Float)
    message: Mapped[str] = mapped_column(Text, default="")
    details: Mapped[dict | None] = mapped_column(JSON)

    result: Mapped[Result] = relationship(back_populates="checks")


class QuizAttempt(Base):
    """A student's attempt at a quiz assignment; its answers are graded one by one."""
    __tablename__ = "quiz_attempts"
    __table_args__ = (Index("ix_quiz_attempts_assignment_user", "assignment_id", "user_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    lang: Mapped[str] = mapped_column(String(10), default="en")
    started_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    submitted_at: Mapped[datetime | None] = mapped_column(DateTime)
    status: Mapped[str] = mapped_column(String(12), default="open")  # open | submitted
    score: Mapped[float | None] = mapped_column(Float)
    max_score: Mapped[float | None] = mapped_column(Float)
    needs_manual: Mapped[bool] = mapped_column(Boolean, default=False)

    assignment: Mapped[Assignment] = relationship()
    user: Mapped[User] = relationship()
    answers: Mapped[list[QuizAnswer]] = relationship(
        back_populates="attempt", order_by="QuizAnswer.position", cascade="all, delete-orphan")


class QuizAnswer(Base):
    __tablename__ = "quiz_answers"
    __table_args__ = (UniqueConstraint("attempt_id", "question_id",
                                       name="uq_quiz_answers_attempt_question"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    attempt_id: Mapped[int] = mapped_column(ForeignKey("quiz_attempts.id", ondelete="CASCADE"))
    question_id: Mapped[str] = mapped_column(String(100))
    position: Mapped[int] = mapped_column(Integer, default=0)
    seed: Mapped[int] = mapped_column(BigInteger)  # variant the student saw (63-bit)
    answer: Mapped[object | None] = mapped_column(JSON)
    correct: Mapped[bool | None] = mapped_column(Boolean)  # None = needs a manual grade
    points: Mapped[float] = mapped_column(Float, default=0.0)
    max_points: Mapped[float] = mapped_column(Float, default=0.0)
    feedback: Mapped[str] = mapped_column(Text, default="")
    details: Mapped[dict | None] = mapped_column(JSON)
    answered_at: Mapped[datetime | None] = mapped_column(DateTime)
    # the language the answer was written in (the attempt's language may change after it)
    lang: Mapped[str | None] = mapped_column(String(10))
    # open: may be answered (again); pending: a try is with the grading workers; final: no
    # more tries (the feedback, with the worked solution, may be shown)
    state: Mapped[str] = mapped_column(String(10), default="open", server_default="open")

    attempt: Mapped[QuizAttempt] = relationship(back_populates="answers")
    manual_grades: Mapped[list[ManualGrade]] = relationship(
        back_populates="quiz_answer", order_by="ManualGrade.id")
    tries: Mapped[list[QuizTry]] = relationship(
        back_populates="quiz_answer", order_by="QuizTry.number", cascade="all, delete-orphan")


class QuizTry(Base):
    """One answer sent for a question, kept for good: the first is what statistics read.

    ``fraction`` is the share of the question the answer itself earns; ``points`` is that
    after the attempt policy's penalty for earlier wrong tries. A code answer is ``pending``
    until a grading worker stores its verdict (``failed``, with ``error``, if it could not).
    """
    __tablename__ = "quiz_tries"
    __table_args__ = (UniqueConstraint("quiz_answer_id", "number",
                                       name="uq_quiz_tries_answer_number"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    quiz_answer_id: Mapped[int] = mapped_column(
        ForeignKey("quiz_answers.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)  # 1, 2, ... in the order sent
    answer: Mapped[object | None] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(10), default="graded")
    correct: Mapped[bool | None] = mapped_column(Boolean)
    fraction: Mapped[float | None] = mapped_column(Float)
    points: Mapped[float] = mapped_column(Float, default=0.0)
    max_points: Mapped[float] = mapped_column(Float, default=0.0)
    feedback: Mapped[str] = mapped_column(Text, default="")
    details: Mapped[dict | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    graded_at: Mapped[datetime | None] = mapped_column(DateTime)

    quiz_answer: Mapped[QuizAnswer] = relationship(back_populates="tries")
    job: Mapped[GradingJob | None] = relationship(back_populates="quiz_try", uselist=False)


class ManualGrade(Base):
    """An instructor's grade that overrides the automatic one (quiz answer or submission)."""
    __tablename__ = "manual_grades"
    id: Mapped[int] = mapped_column(primary_key=True)
    grader_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    quiz_answer_id: Mapped[int | None] = mapped_column(
        ForeignKey("quiz_answers.id", ondelete="CASCADE"), index=True)
    submission_id: Mapped[int | None] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    points: Mapped[float] = mapped_column(Float)
    max_points: Mapped[float | None] = mapped_column(Float)
    comment: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    grader: Mapped[User] = relationship()
    quiz_answer: Mapped[QuizAnswer | None] = relationship(back_populates="manual_grades")
    submission: Mapped[Submission | None] = relationship()


class Extension(Base):
    """One student's own deadline and extra attempts for an assignment (Gradescope's
    "extensions"): the assignment's settings stay as they are for everyone else."""
    __tablename__ = "extensions"
    __table_args__ = (UniqueConstraint("assignment_id", "user_id", name="uq_extensions_assignment_user"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    deadline: Mapped[datetime | None] = mapped_column(DateTime)  # None: the assignment's
    extra_attempts: Mapped[int] = mapped_column(Integer, default=0)
    note: Mapped[str] = mapped_column(String(200), default="")
    granted_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)

    assignment: Mapped[Assignment] = relationship()
    user: Mapped[User] = relationship(foreign_keys=[user_id])


SIGNUP_MODES = ("open", "domain", "invite", "closed")
SIMILARITY_STATUSES = ("computing", "done", "failed")


class SignupSettings(Base):
    """Who may create an account on the sign-up page: one row (id 1), changed by instructors.

    open: anyone; domain: addresses in ``allowed_domains`` (an invitation also admits);
    invite: only with an invitation; closed: nobody (accounts come from ``attn-grader users``).
    """
    __tablename__ = "signup_settings"
    id: Mapped[int] = mapped_column(primary_key=True)
    mode: Mapped[str] = mapped_column(String(10), default="open")
    allowed_domains: Mapped[str] = mapped_column(Text, default="")  # space-separated, lower-case
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))


class Invitation(Base):
    """An invite code for sign-up; only its SHA-256 is stored, the link is shown once."""
    __tablename__ = "invitations"
    id: Mapped[int] = mapped_column(primary_key=True)
    code_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    email: Mapped[str | None] = mapped_column(String(254))  # None: anyone holding the link
    max_uses: Mapped[int] = mapped_column(Integer, default=1)
    uses: Mapped[int] = mapped_column(Integer, default=0)
    note: Mapped[str] = mapped_column(String(200), default="")
    expires_at: Mapped[datetime | None] = mapped_column(DateTime)
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime)


class SchemaRevision(Base):
    """The migration chain as the release that last migrated this database knew it, so that
    older code can tell whether it may run on a newer schema (``web.schema``)."""
    __tablename__ = "schema_revisions"
    revision: Mapped[str] = mapped_column(String(64), primary_key=True)
    down_revision: Mapped[str | None] = mapped_column(String(64))
    compatible_with_previous: Mapped[bool] = mapped_column(Boolean, default=False)


class DataRequest(Base):
    """A data-protection request carried out (``web.services.data_requests``): who asked the
    service for what about whom, and how many records it covered. Kept after an erasure."""
    __tablename__ = "data_requests"
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(10))  # export | erasure
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"),
                                                index=True)
    subject: Mapped[str] = mapped_column(String(254))  # the e-mail then; "user <id>" once erased
    operator: Mapped[str] = mapped_column(String(200), default="")
    reference: Mapped[str] = mapped_column(String(200), default="")  # the request's ticket
    counts: Mapped[dict] = mapped_column(JSON)  # records per table (and access lines)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class SimilarityReport(Base):
    """One similarity run over an assignment's latest submissions, computed in the background.

    ``pairs`` holds, per suspicious pair, both submission ids, both similarities and the shared
    character ranges of each file (copydetect's slices), so the side-by-side page needs no
    recomputation.
    """
    __tablename__ = "similarity_reports"
    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(
        ForeignKey("assignments.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(String(12), default="computing")
    threshold: Mapped[float] = mapped_column(Float, default=0.5)
    submission_count: Mapped[int] = mapped_column(Integer, default=0)
    pairs: Mapped[list | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    requested_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)

    assignment: Mapped[Assignment] = relationship()
