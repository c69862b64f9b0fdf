"""Instructor pages: scores, per-assignment statistics, a submission, grading, settings, jobs."""
from __future__ import annotations

from flask import Blueprint, Response, abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext, ngettext
from flask_login import current_user
from sqlalchemy import select

from ..extensions import state
from ..models import QuizAnswer, Submission
from ..services import analytics, courses, extensions, gradebook, grading, mistakes, quizzes, review
from ..services.users import find_user
from ..services.submissions import SubmissionRejected
from . import charts
from ..services import family_points, hidden_checks
from ..services import regrade as regrade_service  # the view named regrade is the page
from .forms import (ActionForm, AssignmentSettingsForm, ExtensionForm, ManualGradeForm,
                    OverrideScoreForm, answer_form, options)
from .helpers import LANGUAGES, db, highlight_python, instructor_required, interface_language
from .results import result_context

bp = Blueprint("instructor", __name__, url_prefix="/instructor")


def _form_problems(form) -> str:
    return "; ".join(str(e) for errors in form.errors.values() for e in errors)


def _course():
    course = courses.default_course(db())
    if course is None:
        abort(404)
    return course


def _assignment(slug: str):
    assignment = courses.find_assignment(db(), slug)
    if assignment is None:
        abort(404)
    return assignment


def _bank():
    return quizzes.question_bank()


@bp.get("/")
@instructor_required
def overview():
    sort = request.args.get("sort", "name")
    descending = request.args.get("dir") == "desc"
    query = request.args.get("q", "")
    assignments, rows = analytics.score_matrix(db(), _course(), query, sort, descending)
    return render_template("instructor/overview.html", assignments=assignments, rows=rows,
                           sort=sort, descending=descending, query=query,
                           layouts=gradebook.LAYOUTS)


@bp.get("/scores.csv")
@instructor_required
def scores_csv():
    layout = request.args.get("layout", "plain")
    if layout not in gradebook.LAYOUTS:
        abort(404)
    text = gradebook.export_csv(db(), _course(), layout)
    name = "scores.csv" if layout == "plain" else f"scores-{layout}.csv"
    return Response(text, mimetype="text/csv",
                    headers={"Content-Disposition": f"attachment; filename={name}"})


@bp.get("/charts/<slug>/scores.svg")
@instructor_required
def score_chart(slug: str):
    assignment = _assignment(slug)
    scores, top = analytics.best_scores(db(), assignment)
    return Response(charts.score_histogram(scores, top, courses.shown_title(assignment)),
                    mimetype="image/svg+xml")


@bp.get("/charts/<slug>/failures.svg")
@instructor_required
def failure_chart(slug: str):
    assignment = _assignment(slug)
    rates = mistakes.check_failure_rates(db(), assignment)
    return Response(charts.failure_bars(rates), mimetype="image/svg+xml")


@bp.get("/assignments/<slug>")
@instructor_required
def assignment(slug: str):
    item = _assignment(slug)
    session = db()
    context = {"assignment": item, "action_form": ActionForm(), "extension_form": ExtensionForm(),
               "extensions": extensions.extensions_of(session, item)}
    if item.kind == "task":
        context["failures"] = mistakes.check_failure_rates(session, item)
        context["bugs"] = mistakes.common_bugs(session, item)
        context["submissions"] = analytics.submission_rows(session, item)
    else:
        context["questions"] = analytics.question_stats(session, item, _bank())
        context["pending"] = len(quizzes.pending_manual(session, item))
        context["attempts"] = analytics.attempt_rows(session, item)
    return render_template("instructor/assignment.html", **context)


@bp.post("/assignments/<slug>/extensions")
@instructor_required
def grant_extension(slug: str):
    item = _assignment(slug)
    form = ExtensionForm()
    if not form.validate_on_submit():
        flash(gettext("Extension not saved: %(problems)s", problems=_form_problems(form)), "error")
        return redirect(url_for("instructor.assignment", slug=slug) + "#extensions")
    session = db()
    student = find_user(session, form.email.data)
    try:
        if student is None:
            raise ValueError(gettext("no account %(email)s", email=form.email.data))
        extensions.grant(session, item, student, granted_by=current_user,
                         deadline=form.deadline.data, extra_attempts=form.extra_attempts.data or 0,
                         note=form.note.data or "")
    except ValueError as exc:
        session.rollback()
        flash(gettext("Extension not saved: %(reason)s.", reason=exc), "error")
    else:
        session.commit()
        flash(gettext("Extension for %(email)s saved.", email=student.email), "success")
    return redirect(url_for("instructor.assignment", slug=slug) + "#extensions")


@bp.get("/assignments/<slug>/quiz-questions.csv")
@instructor_required
def question_stats_csv(slug: str):
    item = _assignment(slug)
    if item.kind != "quiz":
        abort(404)
    text = analytics.question_stats_csv(analytics.question_stats(db(), item, _bank()))
    return Response(text, mimetype="text/csv",
                    headers={"Content-Disposition": f"attachment; filename={slug}-questions.csv"})


@bp.post("/assignments/<slug>/regrade")
@instructor_required
def regrade_assignment(slug: str):
    item = _assignment(slug)
    form = ActionForm()
    if form.validate_on_submit() and request.form.get("confirmed") != "yes":
        ids = list(db().scalars(select(Submission.id).where(Submission.assignment_id == item.id)))
        kept = grading.overridden_count(db(), ids)
        return render_template(
            "confirm.html", heading=gettext("Regrade every submission of %(title)s?", title=courses.shown_title(item)),
            form=form,
            lines=[ngettext("The %(num)d submission is graded again with the current grader, "
                            "through the job queue; the earlier result stays on record.",
                            "All %(num)d submissions are graded again with the current grader, "
                            "through the job queue; the earlier results stay on record.", len(ids)),
                   ngettext("%(num)d score you overrode by hand stays as you set it.",
                            "%(num)d scores you overrode by hand stay as you set them.", kept)],
            action=url_for("instructor.regrade_assignment", slug=slug),
            button=ngettext("Regrade %(num)d submission", "Regrade %(num)d submissions", len(ids)),
            back=url_for("instructor.assignment", slug=slug))
    if form.validate_on_submit():
        plan = regrade_service.queue_regrades(db(), regrade_service.assignment_submissions(db(), item),
                                              state().dispatcher)
        count = sum(1 for queued in plan if queued.skipped is None)
        flash(ngettext("%(num)d submission of %(title)s queued for grading with the current "
                       "grader; scores overridden by hand are kept.",
                       "%(num)d submissions of %(title)s queued for grading with the current "
                       "grader; scores overridden by hand are kept.", count, title=courses.shown_title(item)),
              "success")
    return redirect(url_for("instructor.assignment", slug=slug))


@bp.route("/assignments/<slug>/settings", methods=["GET", "POST"])
@instructor_required
def settings(slug: str):
    item = _assignment(slug)
    form = AssignmentSettingsForm(obj=item)
    bank = _bank()
    if item.kind == "quiz":
        # the quiz's questions first, in its order, then the rest of the bank
        chosen = [qid for qid in item.question_ids or [] if qid in bank]
        rest = [q.id for q in bank if q.id not in set(chosen)]
        form.question_ids.choices = options((qid, f"{qid} — {bank.get(qid).text('title', 'en')} "
                                                  f"({bank.get(qid).kind})") for qid in chosen + rest)
        if not form.is_submitted():
            form.question_ids.data = list(item.question_ids or [])
            if item.try_penalty is not None:  # 1/3 shown as 0.3333, not 0.3333333333333333
                form.try_penalty.data = round(item.try_penalty, 4)
    else:
        del form.question_ids, form.answer_policy, form.try_penalty
        if not form.is_submitted():
            form.family_points.data = family_points.format_points(item.family_points)
            form.hidden_families.data = " ".join(item.hidden_families or [])
    if item.kind == "quiz":
        del form.family_points, form.hidden_families
    valid = form.validate_on_submit()
    if valid and item.kind == "task":
        for name, parse in (("family_points", family_points.parse), ("hidden_families", hidden_checks.parse)):
            try:
                setattr(item, name, parse(form[name].data, item.task_id))
            except ValueError as exc:
                form[name].errors = list(form[name].errors) + [str(exc)]
                valid = False
    order_errors: dict[str, str] = {}
    if valid and item.kind == "quiz":
        positions = {key.removeprefix("position-"): value for key, value in request.form.items()
                     if key.startswith("position-")}
        order, order_errors = review.quiz_order(list(item.question_ids or []), form.question_ids.data or [],
                                                positions)
        if order_errors:
            form.question_ids.errors = list(form.question_ids.errors) + [
                gettext("Position of %(id)s: “%(typed)s” is not a whole number from 1.", id=qid, typed=typed)
                for qid, typed in order_errors.items()]
            valid = False
        else:
            form.question_ids.data = order
    if valid:
        data = {name: field.data for name, field in form._fields.items()
                if name not in ("family_points", "hidden_families")}
        review.apply_settings(item, data)
        db().commit()
        flash(gettext("Settings of %(title)s saved.", title=courses.shown_title(item)), "success")
        return redirect(url_for("instructor.settings", slug=slug))
    missing = [qid for qid in (item.question_ids or []) if qid not in bank]
    own = family_points.format_points(family_points.task_families(item.task_id)) if item.kind == "task" else ""
    families = " ".join(hidden_checks.task_families(item.task_id)) if item.kind == "task" else ""
    positions = {qid: index + 1 for index, qid in enumerate(item.question_ids or [])}
    if form.is_submitted() and item.kind == "quiz":  # a refused save shows what was typed
        positions.update({key.removeprefix("position-"): value for key, value in request.form.items()
                          if key.startswith("position-")})
    return render_template("instructor/settings.html", assignment=item, form=form, missing=missing,
                           positions=positions, order_errors=order_errors,
                           own_points=own, families=families)


@bp.route("/submissions/<int:submission_id>", methods=["GET"])
@instructor_required
def submission(submission_id: int):
    sub = db().get(Submission, submission_id)
    if sub is None:
        abort(404)
    form = OverrideScoreForm()
    return render_template("instructor/submission.html", sub=sub, **result_context(sub, current_user),
                           code_html=highlight_python(sub.code), regrade_form=ActionForm(),
                           override_form=form, override=grading.latest_override(db(), sub))


@bp.post("/submissions/<int:submission_id>/regrade")
@instructor_required
def regrade(submission_id: int):
    sub = db().get(Submission, submission_id)
    if sub is None:
        abort(404)
    if ActionForm().validate_on_submit():
        reason = regrade_service.queue_regrades(db(), [sub], state().dispatcher)[0].skipped
        if reason:
            flash(gettext("Not regraded: %(reason)s.", reason=reason), "error")
        else:
            flash(gettext("Submission #%(number)s is queued for grading again.", number=sub.id), "success")
    return redirect(url_for("instructor.submission", submission_id=sub.id))


@bp.post("/submissions/<int:submission_id>/override")
@instructor_required
def override(submission_id: int):
    sub = db().get(Submission, submission_id)
    if sub is None:
        abort(404)
    form = OverrideScoreForm()
    if form.validate_on_submit():
        try:
            quizzes.grade_submission_manually(db(), current_user, sub, float(form.points.data),
                                              form.comment.data or "")
            db().commit()
            flash(gettext("Score overridden."), "success")
        except SubmissionRejected as exc:
            db().rollback()
            flash(gettext("Not saved: %(reason)s.", reason=exc.message), "error")
    else:
        flash(gettext("Not saved: %(reason)s", reason=_form_problems(form)), "error")
    return redirect(url_for("instructor.submission", submission_id=sub.id))


@bp.get("/grading")
@instructor_required
def grading_queue():
    session = db()
    bank = _bank()
    items = []
    for quiz in [a for a in _course().assignments if a.kind == "quiz"]:
        for answer in quizzes.pending_manual(session, quiz):
            items.append(_grading_item(answer, bank))
    numbers = quizzes.students_attempt_numbers(session, {item["student"].id for item in items})
    for item in items:
        item["attempt_number"] = numbers.get(item["answer"].attempt_id)
    return render_template("instructor/grading.html", items=items)


def _grading_item(answer: QuizAnswer, bank) -> dict:
    from questions.answers import solution
    from questions.variants import render

    question = bank.get(answer.question_id)
    form = ManualGradeForm(prefix=f"a{answer.id}")
    lang = interface_language()  # the instructor's language; the answer's is named on the page
    sol = solution(question, answer.seed, lang)
    form.rubric.choices = options((r["id"], gettext("%(text)s (%(points)s pt)", text=r["text"],
                                                    points=format(r["points"], "g")))
                                  for r in sol.get("rubric", []))
    return {"answer": answer, "question": render(question, answer.seed, lang),
            "solution": sol, "form": form, "student": answer.attempt.user,
            "assignment": answer.attempt.assignment}


@bp.post("/grading/<int:answer_id>")
@instructor_required
def grade_answer(answer_id: int):
    from questions.answers import AnswerFormatError, score_rubric

    session = db()
    answer = session.get(QuizAnswer, answer_id)
    if answer is None:
        abort(404)
    item = _grading_item(answer, _bank())
    form = ManualGradeForm(prefix=f"a{answer.id}")
    form.rubric.choices = item["form"].rubric.choices
    if not form.validate_on_submit():
        flash(gettext("Not saved: %(reason)s", reason=_form_problems(form)), "error")
        return redirect(url_for("instructor.grading_queue"))
    question = _bank().get(answer.question_id)
    comment = (form.comment.data or "").strip()
    try:
        if question.kind == "free_text":
            verdict = score_rubric(question, form.rubric.data or [])
            points, details = verdict.points, verdict.details
        elif form.points.data is None:
            raise quizzes.QuizError(gettext("give the points (0 to %(max)s)", max=format(answer.max_points, "g")))
        else:
            points, details = float(form.points.data), {"status": "graded"}
        quizzes.grade_answer_manually(session, current_user, answer, points, comment)
        answer.details = {**(answer.details or {}), **details}
        session.commit()
    except (AnswerFormatError, quizzes.QuizError) as exc:
        session.rollback()
        flash(gettext("Not saved: %(reason)s", reason=exc), "error")
    else:
        flash(gettext("Saved %(points)s / %(max)s for %(email)s.", points=format(points, "g"),
                      max=format(answer.max_points, "g"), email=answer.attempt.user.email), "success")
    return redirect(url_for("instructor.grading_queue"))


@bp.get("/jobs")
@instructor_required
def jobs():
    return render_template("instructor/jobs.html", stats=analytics.job_stats(db()))


@bp.route("/questions", methods=["GET", "POST"])
@instructor_required
def question_bank():
    form = ActionForm()
    problems = None
    bank = _bank()
    if form.validate_on_submit():
        bank, problems = review.reload_bank(run_code=bool(request.form.get("run_code")))
        found = ngettext("%(num)d problem found.", "%(num)d problems found.", len(problems)) if problems \
            else gettext("No problems found.")
        flash(ngettext("Question bank reloaded: %(num)d question.", "Question bank reloaded: %(num)d questions.",
                       len(bank)) + " " + found, "success" if not problems else "error")
    quizzes_using = {a.slug: set(a.question_ids or []) for a in _course().assignments
                     if a.kind == "quiz"}
    return render_template("instructor/questions.html", bank=bank, problems=problems,
                           form=form, quizzes_using=quizzes_using)


@bp.get("/questions/export")
@instructor_required
def question_export():
    """The bank as a file for an LMS, in the formats ``attn-grader questions export`` writes."""
    from questions.export import DOWNLOADS, export_download

    fmt, lang = request.args.get("format", "qti"), request.args.get("lang", "en")  # QTI: what most LMSs import
    variants = request.args.get("variants", default=1, type=int)
    if fmt not in DOWNLOADS or lang not in LANGUAGES or not 1 <= (variants or 0) <= 50:
        abort(400)
    content, content_type, filename = export_download(_bank(), fmt, lang, variants)
    return Response(content, mimetype=content_type,
                    headers={"Content-Disposition": f"attachment; filename={filename}"})


@bp.get("/questions/<question_id>")
@instructor_required
def question_preview(question_id: str):
    """One question as a student sees it (PrairieLearn's preview): any language, any variant,
    with the answer and the worked solution of that variant below."""
    from questions.answers import solution
    from questions.review import review
    from questions.variants import render

    from .helpers import LANGUAGES

    bank = _bank()
    try:
        question = bank.get(question_id)
    except KeyError:
        abort(404)
    if question is None:
        abort(404)
    lang = request.args.get("lang") if request.args.get("lang") in LANGUAGES else "en"
    seed = request.args.get("seed", default=1, type=int)
    shown = render(question, seed, lang)
    # the key laid out as a student reads it once final (quiz/_review.html), every option's feedback
    return render_template(
        "instructor/question_preview.html", question=question, shown=shown, lang=lang,
        seed=seed, form=answer_form(shown), answer=solution(question, seed, lang),
        review=review(question, seed, lang=lang, every_feedback=True))
