"""Instructor pages: similarity review of an assignment's latest submissions.

Opening the page only reads the stored report; the "Compare" button starts a new one in the
background (``web.services.similarity``), and the page refreshes itself while it computes.
"""
from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext
from flask_login import current_user

from ..extensions import state
from ..models import SimilarityReport
from ..services import courses, similarity
from .forms import ActionForm
from .helpers import db, instructor_required

bp = Blueprint("similarity", __name__, url_prefix="/instructor/assignments/<slug>/similarity")


def _task(slug: str):
    assignment = courses.find_assignment(db(), slug)
    if assignment is None or assignment.kind != "task":
        abort(404)
    return assignment


@bp.get("/")
@instructor_required
def report(slug: str):
    assignment = _task(slug)
    session = db()
    latest = similarity.latest_report(session, assignment)
    rows = similarity.pair_rows(session, latest) if latest and latest.status == "done" else []
    return render_template("instructor/similarity.html", assignment=assignment, report=latest, rows=rows,
                           form=ActionForm(), default_threshold=similarity.DEFAULT_THRESHOLD,
                           students=len(similarity.latest_submissions(session, assignment)))


@bp.post("/")
@instructor_required
def start(slug: str):
    assignment = _task(slug)
    if ActionForm().validate_on_submit():
        try:
            threshold = float(request.form.get("threshold") or similarity.DEFAULT_THRESHOLD)
        except ValueError:
            threshold = -1.0  # refused below with the range
        try:
            similarity.start_report(db(), state().engine, assignment, current_user, threshold)
        except similarity.ReviewRefused as exc:
            db().rollback()
            flash(gettext("Not started: %(reason)s", reason=exc), "error")
    return redirect(url_for("similarity.report", slug=slug))


@bp.get("/<int:report_id>/pairs/<int:index>")
@instructor_required
def pair(slug: str, report_id: int, index: int):
    assignment = _task(slug)
    report = db().get(SimilarityReport, report_id)
    if report is None or report.assignment_id != assignment.id:
        abort(404)
    detail = similarity.pair_detail(db(), report, index)
    if detail is None:
        abort(404)
    return render_template("instructor/similarity_pair.html", assignment=assignment, report=report,
                           pair=detail)
