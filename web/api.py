"""The JSON API, ``/api/v1``, authenticated with ``Authorization: Bearer <token>``.

Thin views: each parses the request, calls a service function and shapes the answer.
Errors are JSON ``{"error": "..."}`` with a status that says what went wrong.
"""
from __future__ import annotations

from functools import wraps

from flask import Blueprint, Response, current_app, g, jsonify, request, url_for
from flask_babel import gettext
from werkzeug.exceptions import HTTPException

from .auth import hash_token, user_for_token
from .extensions import db_session, limiter, state, submit_code
from .i18n import grader_text
from .public_ids import submission_id_for
from .services import courses, scores, submissions, waiting

bp = Blueprint("api", __name__, url_prefix="/api/v1")


def _rate_key() -> str:
    header = request.headers.get("Authorization", "")
    return "token:" + hash_token(header[7:].strip()) if header.startswith("Bearer ") \
        else "ip:" + (request.remote_addr or "?")


limiter.limit(lambda: current_app.config["API_RATE_LIMIT"], key_func=_rate_key)(bp)


def error(message: str, status: int, **headers):
    response = jsonify(error=message)
    response.status_code = status
    for name, value in headers.items():
        response.headers[name.replace("_", "-")] = str(value)
    return response


def token_required(view):
    @wraps(view)
    def wrapped(*args, **kwargs):
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            return error("missing API token: send 'Authorization: Bearer <token>' "
                         "(create one on the account page, /account)", 401,
                         WWW_Authenticate="Bearer")
        user = user_for_token(db_session(), header[7:].strip())
        if user is None:
            return error("invalid or revoked API token", 401, WWW_Authenticate="Bearer")
        g.api_user = user
        return view(*args, **kwargs)
    return wrapped


@bp.errorhandler(HTTPException)
def _http_error(exc: HTTPException):
    message = exc.description or exc.name
    if exc.code == 413:
        limit = current_app.config["MAX_SUBMISSION_BYTES"]
        message = f"request too large: submissions are limited to {limit} bytes"
    rate = getattr(getattr(exc, "limit", None), "limit", None)  # Flask-Limiter's "3 per 1 minute"
    if exc.code == 429 and rate is not None:
        from grader.client import wait_phrase
        message = gettext("rate limited: at most %(count)s requests per %(window)s with this token",
                          count=rate.amount, window=grader_text(wait_phrase(rate.get_expiry())))
    response = error(message, exc.code or 500)
    if exc.code == 429 and exc.response is not None:  # Flask-Limiter's Retry-After etc.
        for name in ("Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining"):
            if name in exc.response.headers:
                response.headers[name] = exc.response.headers[name]
    return response


# Flask tries handlers for the status code (the app's HTML error pages) before handlers for
# the exception class, so the API claims its common codes explicitly to stay JSON.
for _code in (400, 403, 404, 405, 413, 429):
    bp.register_error_handler(_code, _http_error)


def _read_submission() -> tuple[str | None, bytes | str | None, str]:
    """(task, code, filename) from a JSON body or a multipart form with a file."""
    if request.is_json:
        body = request.get_json(silent=True)
        if not isinstance(body, dict):
            return None, None, ""
        return body.get("task") or body.get("assignment"), body.get("code"), \
            str(body.get("filename") or "submission.py")
    upload = request.files.get("file")
    code = upload.read() if upload is not None else request.form.get("code")
    task = request.form.get("task") or request.form.get("assignment")
    return task, code, (upload.filename if upload is not None else "") or "submission.py"


@bp.post("/submissions")
@token_required
def create_submission():
    task, code, filename = _read_submission()
    if not task:
        return error("missing 'task': send JSON {\"task\": ..., \"code\": ...} or a multipart "
                     "form with 'task' and 'file'", 400)
    if code is None:
        return error("missing 'code' (JSON) or 'file' (multipart)", 400)
    if not isinstance(code, (str, bytes)):
        return error("'code' must be a string", 400)
    session = db_session()
    assignment = courses.find_assignment(session, str(task))
    if assignment is None or (not assignment.visible and not g.api_user.is_instructor):
        known = ", ".join(a.slug for a in courses.task_assignments(session))
        return error(f"unknown task {task!r}; known tasks: {known}", 404)
    try:
        sub = submit_code(g.api_user, assignment, code, filename)
    except submissions.SubmissionRejected as exc:
        headers = {"Retry_After": exc.retry_after} if exc.retry_after else {}
        return error(exc.message, exc.status, **headers)
    # Links by public id: a restored database may give this integer id to someone else.
    url = url_for("api.show_submission", submission_id=sub.public_id, _external=True)
    # The page a person reads the result on (absent when the service runs without pages).
    page = url_for("links.submission_page", submission_id=sub.public_id, _external=True) \
        if "student" in current_app.blueprints else None
    response = jsonify(id=sub.id, public_id=sub.public_id, status=sub.status, url=url,
                       **({"page_url": page} if page else {}))
    response.status_code = 202
    response.headers["Location"] = url
    return response


@bp.get("/submissions/<submission_id>")
@token_required
def show_submission(submission_id: str):
    """``submission_id``: the public id, or the integer id. ``?wait=S`` holds the answer up
    to S seconds (at most 60) until the submission is graded."""
    try:
        timeout = waiting.wait_seconds(request.args.get("wait"))
    except ValueError as exc:
        return error(str(exc), 400)
    found = submission_id_for(db_session(), submission_id)
    sub = None if found is None else waiting.wait_for_change(
        db_session(), g.api_user, found, state().waiters, timeout=timeout)
    if sub is None:
        return error(f"no submission {submission_id}", 404)
    return jsonify(submissions.submission_view(sub, g.api_user))


@bp.get("/submissions")
@token_required
def list_own_submissions():
    session = db_session()
    assignment = None
    if request.args.get("task"):
        assignment = courses.find_assignment(session, request.args["task"])
        if assignment is None:
            return error(f"unknown task {request.args['task']!r}", 404)
    rows = submissions.list_submissions(session, g.api_user, assignment,
                                        limit=min(request.args.get("limit", 50, type=int), 500))
    return jsonify(submissions=[
        {"id": s.id, "public_id": s.public_id, "task": s.task_id, "status": s.status,
         "score": s.score, "max_score": s.max_score, "submitted_at": submissions.iso(s.created_at),
         "url": url_for("api.show_submission", submission_id=s.public_id, _external=True)}
        for s in rows])


@bp.get("/tasks")
@token_required
def list_tasks():
    session = db_session()
    used = submissions.attempts_by_assignment(session, g.api_user)
    return jsonify(tasks=[
        {"task": a.task_id, "assignment": a.slug, "title": a.title,
         "deadline": submissions.iso(a.deadline), "late_policy": a.late_policy,
         "max_attempts": a.max_attempts, "attempts_used": used.get(a.id, 0)}
        for a in courses.task_assignments(session, include_hidden=g.api_user.is_instructor)])


@bp.get("/scores")
@bp.get("/scores.csv", defaults={"fmt": "csv"})
@token_required
def score_table(fmt: str | None = None):
    if not g.api_user.is_instructor:
        return error("only instructors may see the score table", 403)
    session = db_session()
    course = courses.default_course(session)
    rows = scores.scores_table(session, course) if course is not None else []
    if (fmt or request.args.get("format")) == "csv":
        return Response(scores.scores_csv(rows), mimetype="text/csv",
                        headers={"Content-Disposition": "attachment; filename=scores.csv"})
    return jsonify(scores=rows)
