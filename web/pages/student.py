"""The student's pages: home, a task (spec, starter, editor, submit), a result and its plots."""
from __future__ import annotations

from flask import (Blueprint, Response, abort, current_app, flash, jsonify, redirect, send_file,
                   render_template, request, url_for)
from flask_babel import force_locale, gettext
from flask_login import current_user, login_required

from grader import TORCH_VERSION

from ..extensions import state, submit_code
from ..services import courses, grading, progress, student_package, submissions, waiting
from . import charts
from .forms import ActionForm, SubmissionForm
from .helpers import (LANGUAGES, code_diff, db, highlight_python, interface_language, pygments_css,
                      render_markdown, side_by_side)
from .results import result_context

bp = Blueprint("student", __name__)


def _task_assignment(slug: str):
    assignment = courses.find_assignment(db(), slug)
    if assignment is None or assignment.kind != "task" or \
            (not assignment.visible and not current_user.is_instructor):
        abort(404)
    return assignment


def _task(assignment):
    from grader.tasks import TASKS

    task = TASKS.get(assignment.task_id)
    if task is None:
        abort(404)
    return task


def _own_submission(submission_id: int):
    """The submission if the viewer may see it; 404 otherwise (no hint that it exists)."""
    sub = submissions.get_submission(db(), current_user, submission_id)
    if sub is None:
        abort(404)
    return sub


@bp.get("/")
@login_required
def home():
    rows = progress.home_rows(db(), current_user)
    return render_template("student/home.html", rows=rows)


@bp.route("/tasks/<slug>", methods=["GET", "POST"])
@login_required
def task(slug: str):
    assignment = _task_assignment(slug)
    spec = _task(assignment)
    session = db()
    form = SubmissionForm()
    if form.validate_on_submit():
        upload = form.upload.data
        code = upload.read() if upload else form.code.data
        filename = (upload.filename if upload else "") or "submission.py"
        try:
            sub = submit_code(current_user, assignment, code, filename)
        except submissions.SubmissionRejected as exc:
            session.rollback()
            flash(gettext("Not submitted: %(reason)s", reason=exc.message), "error")
        else:
            return redirect(url_for("student.submission", submission_id=sub.id))
    history = progress.history(session, current_user.id, assignment.id)
    if not form.is_submitted():
        form.code.data = history[0].code if history else spec.template_in(interface_language())
    standing = progress.standing(session, current_user, assignment)
    spec_text, spec_lang = spec.spec_in(interface_language())
    return render_template("student/task.html", assignment=assignment, spec=spec,
                           spec_html=render_markdown(spec_text), spec_lang=spec_lang, form=form,
                           history=history, numbers=progress.attempt_numbers(history),
                           standing=standing,
                           max_bytes=current_app.config["MAX_SUBMISSION_BYTES"],
                           torch_version=TORCH_VERSION,  # the students' CPU install line
                           wheel=student_package.served_wheel(current_app.config["INSTANCE_PATH"]))


@bp.get("/downloads/<name>")
def download(name: str):
    """The student package's wheel, for `pip install <this address>` (no sign-in: pip has none)."""
    wheel = student_package.served_wheel(current_app.config["INSTANCE_PATH"])
    if wheel is None or name != wheel.name:
        abort(404)
    return send_file(wheel, mimetype="application/zip", download_name=wheel.name, max_age=300)


@bp.get("/tasks/<slug>/starter.py")
@login_required
def starter(slug: str):
    assignment = _task_assignment(slug)
    return Response(_task(assignment).template_in(interface_language()), mimetype="text/x-python",
                    headers={"Content-Disposition": f"attachment; filename={assignment.task_id}.py"})


@bp.get("/tasks/<slug>/starter.ipynb")
@login_required
def starter_notebook(slug: str):
    from grader.notebook import template_notebook

    assignment = _task_assignment(slug)
    _task(assignment)
    return Response(template_notebook(assignment.task_id, interface_language()), mimetype="application/x-ipynb+json",
                    headers={"Content-Disposition":
                             f"attachment; filename={assignment.task_id}.ipynb"})


@bp.get("/submissions/<int:submission_id>")
@login_required
def submission(submission_id: int):
    session = db()
    sub = _own_submission(submission_id)
    history = progress.history(session, sub.user_id, sub.assignment_id)
    numbers = progress.attempt_numbers(history)
    previous = progress.previous_submission(session, sub)
    diff = code_diff(previous.code, sub.code, f"attempt {numbers[previous.id]}",
                     f"attempt {numbers[sub.id]}") if previous else None
    return render_template("student/submission.html", sub=sub, **result_context(sub, current_user),
                           previous=previous, diff=diff,
                           history=history, numbers=numbers, code=highlight_python(sub.code),
                           override=grading.latest_override(session, sub),
                           regrade_form=ActionForm())


@bp.get("/submissions/<int:submission_id>/compare")
@login_required
def compare(submission_id: int):
    """Two attempts of one student side by side: this one (or ``?new=ID``) against ``?old=ID``,
    by default the attempt before it."""
    session = db()
    new = _own_submission(request.args.get("new", type=int) or submission_id)
    old_id = request.args.get("old", type=int)
    if old_id is not None:
        old = _own_submission(old_id)
    else:
        old = progress.previous_submission(session, new) or new
    if old.assignment_id != new.assignment_id or old.user_id != new.user_id:
        abort(404)
    history = progress.history(session, new.user_id, new.assignment_id)
    numbers = progress.attempt_numbers(history)
    table = side_by_side(old.code, new.code, f"attempt {numbers[old.id]}",
                         f"attempt {numbers[new.id]}")
    return render_template("student/compare.html", assignment=new.assignment, old=old, new=new,
                           numbers=numbers, history=history, table=table)


@bp.get("/submissions/<int:submission_id>/status.json")
@login_required
def submission_status(submission_id: int):
    """``?wait=S&seen=STATUS`` answers once the status is no longer STATUS (or after S s)."""
    sub = _own_submission(submission_id)
    try:
        timeout = waiting.wait_seconds(request.args.get("wait"))
    except ValueError as exc:
        abort(400, str(exc))
    if timeout and sub.status not in waiting.FINAL:
        sub = waiting.wait_for_change(db(), current_user, sub.id, state().waiters,
                                      timeout=timeout, seen=request.args.get("seen"))
    job = sub.job
    return jsonify(id=sub.id, status=sub.status, score=sub.score, max_score=sub.max_score,
                   finished=sub.status in ("done", "failed"),
                   job_status=job.status if job else None)


@bp.get("/submissions/<int:submission_id>/checks/<int:position>/<any(weights, variance):plot>.svg")
@login_required
def check_plot(submission_id: int, position: int, plot: str):
    sub = _own_submission(submission_id)
    view = submissions.submission_view(sub, current_user)  # honours the feedback setting
    if position >= len(view["checks"]):
        abort(404)
    details = view["checks"][position].get("details") or {}
    # drawn in the language the page names in the URL: the browser caches the picture by its
    # URL, so a page in another language asks for (and caches) its own
    lang = request.args.get("lang") if request.args.get("lang") in LANGUAGES else interface_language()
    with force_locale(lang):
        if plot == "weights" and isinstance(details.get("weights_submission"), list):
            svg = charts.weights_heatmaps(details["weights_submission"],
                                          details.get("weights_reference"))
        elif plot == "variance" and details.get("variance_by_dk"):
            svg = charts.variance_plot(details["variance_by_dk"])
        else:
            abort(404)
    return Response(svg, mimetype="image/svg+xml",
                    headers={"Cache-Control": "private, max-age=3600", "Content-Language": lang})


@bp.get("/pygments.css")
def pygments_stylesheet():
    return Response(pygments_css(), mimetype="text/css",
                    headers={"Cache-Control": "public, max-age=86400"})


@bp.get("/favicon.ico")
def favicon():
    # Browsers ask for /favicon.ico before reading the page's <link rel="icon">.
    return redirect(url_for("static", filename="favicon.svg"), code=301)
