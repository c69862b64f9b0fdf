"""Quiz pages: the student's own variant in their language, answered one question at a time."""
from __future__ import annotations

from flask import (Blueprint, abort, current_app, flash, jsonify, redirect, render_template,
                   request, session, url_for)
from flask_babel import gettext, ngettext
from flask_login import current_user, login_required
from werkzeug.datastructures import MultiDict

from ..config import quiz_secret
from ..extensions import state
from ..models import QuizAttempt
from ..services import courses, progress, quiz_policy, quizzes
from .auth import _safe_next
from .forms import ActionForm, LanguageForm, answer_form, answer_from_form
from .helpers import LANGUAGES, db, interface_language

bp = Blueprint("quiz", __name__)


def _quiz(slug: str):
    assignment = courses.find_assignment(db(), slug)
    if assignment is None or assignment.kind != "quiz" or \
            (not assignment.visible and not current_user.is_instructor):
        abort(404)
    return assignment


def _attempt_items(attempt: QuizAttempt, lang: str, with_forms: bool) -> list[dict]:
    """Each question as rendered for the attempt, with its stored answer and grades."""
    items = []
    refused = session.pop(REFUSED_KEY, None) if with_forms else None
    for number, (shown, row) in enumerate(zip(quizzes.rendered_questions(attempt, lang),
                                              attempt.answers), start=1):
        question = shown["question"]
        manual = row.manual_grades[-1] if row.manual_grades else None
        closed = row.state == "final" or attempt.status != "open"
        mine = refused if refused and refused["question"] == row.question_id else None
        form = None
        if with_forms and not closed:
            form = answer_form(question, row.answer,
                               formdata=MultiDict(list(mine["form"].items())) if mine and mine["form"] else None)
        items.append({**shown, "number": number, "row": row, "manual": manual,
                      "rubric": _rubric_met(question, row, lang) if manual else [],
                      "answered": row.answered_at is not None, "form": form,
                      "refused": mine["message"] if mine and form else None})
    return items


REFUSED_KEY = "quiz_refused"
MAX_KEPT_CHARS = 2000  # the session is a cookie: a long text is not kept (a draft keeps it in the tab)


def _keep_refused(question_id: str, message: str) -> None:
    """A refused answer comes back after the redirect beside its own box, with what was typed
    still in it (the page is long: a message at its top is out of view)."""
    typed = {key: value for key, value in request.form.items(multi=True)
             if key.startswith(f"q-{question_id}-") and not key.endswith(("csrf_token", "submit"))}
    if sum(len(v) for v in typed.values()) > MAX_KEPT_CHARS:
        typed = {}
    session[REFUSED_KEY] = {"question": question_id, "message": message, "form": typed}


def _rubric_met(question: dict, row, lang: str) -> list[dict]:
    """A free-text grade's rubric, each item marked met or not (Moodle's review shows it)."""
    awarded = (row.details or {}).get("awarded")
    if question.get("kind") != "free_text" or awarded is None:
        return []
    from questions.answers import solution

    rubric = solution(quizzes.question_bank().get(row.question_id), row.seed, lang).get("rubric", [])
    return [{**item, "met": item["id"] in awarded} for item in rubric]


@bp.route("/quiz/<slug>")
@login_required
def quiz(slug: str):
    assignment = _quiz(slug)
    session_db = db()
    lang = interface_language()
    attempt = quizzes.open_attempt(session_db, current_user, assignment)
    past = session_db.query(QuizAttempt).filter_by(
        user_id=current_user.id, assignment_id=assignment.id, status="submitted") \
        .order_by(QuizAttempt.id.desc()).all()
    items = _attempt_items(attempt, lang, with_forms=True) if attempt else []
    return render_template("quiz/quiz.html", assignment=assignment, attempt=attempt, items=items,
                           past=past, numbers=quizzes.attempt_numbers(session_db, current_user.id,
                                                                      assignment.id), lang=lang, standing=progress.standing(session_db, current_user, assignment),
                           outline=quizzes.outline(assignment),
                           policy_penalty=quiz_policy.penalty(assignment),
                           tries_allowed=quiz_policy.tries_allowed(assignment),
                           action_form=ActionForm(), lang_form=LanguageForm(lang=lang))


@bp.post("/quiz/<slug>/start")
@login_required
def start(slug: str):
    assignment = _quiz(slug)
    if ActionForm().validate_on_submit():
        try:
            quizzes.start_attempt(db(), current_user, assignment, lang=interface_language(),
                                  secret=quiz_secret(current_app.config))
            db().commit()
        except quizzes.QuizError as exc:
            db().rollback()
            flash(gettext("Cannot start the quiz: %(reason)s", reason=exc), "error")
    return redirect(url_for("quiz.quiz", slug=slug))


@bp.post("/quiz/<slug>/questions/<question_id>")
@login_required
def answer(slug: str, question_id: str):
    assignment = _quiz(slug)
    session_db = db()
    attempt = quizzes.open_attempt(session_db, current_user, assignment, lock=True)
    if attempt is None:
        flash(gettext("This quiz has no open attempt; start one first."), "error")
        return redirect(url_for("quiz.quiz", slug=slug))
    lang = interface_language()
    shown = next((q["question"] for q in quizzes.rendered_questions(attempt, lang)
                  if q["question_id"] == question_id), None)
    if shown is None:
        abort(404)
    form = answer_form(shown)
    if not form.validate_on_submit():
        problems = "; ".join(str(e) for errors in form.errors.values() for e in errors)
        _keep_refused(question_id, gettext("Answer not saved: %(problems)s", problems=problems))
    else:
        config = current_app.config
        try:  # a code answer is queued for the grading workers, never run in this process
            quizzes.answer_question(session_db, attempt, question_id, answer_from_form(shown, form),
                                    lang=lang, dispatcher=state().dispatcher,
                                    max_job_attempts=config["MAX_ATTEMPTS"],
                                    max_code_bytes=config["MAX_SUBMISSION_BYTES"])
            session_db.commit()
        except quizzes.AnswerRefused as exc:
            session_db.rollback()
            _keep_refused(question_id, gettext("Answer not accepted: %(reason)s", reason=exc))
        except quizzes.QuizError as exc:
            session_db.rollback()
            flash(gettext("Answer not accepted: %(reason)s", reason=exc), "error")
    return redirect(url_for("quiz.quiz", slug=slug) + f"#q-{question_id}")


@bp.get("/quiz/attempts/<int:attempt_id>/questions/<question_id>/status.json")
@login_required
def answer_status(attempt_id: int, question_id: str):
    """A code answer's state for the page's poller: pending, then the feedback to show."""
    row = quizzes.get_attempt(db(), attempt_id)
    if row is None or (row.user_id != current_user.id and not current_user.is_instructor):
        abort(404)
    items = [i for i in _attempt_items(row, interface_language(), with_forms=False)
             if i["question_id"] == question_id]
    if not items:
        abort(404)
    item = items[0]
    html = render_template("quiz/_feedback.html", item=item, attempt=row)
    return jsonify(state=item["row"].state, pending=item["row"].state == "pending",
                   open=item["row"].state == "open" and row.status == "open", html=html)


@bp.post("/quiz/<slug>/submit")
@login_required
def submit(slug: str):
    assignment = _quiz(slug)
    attempt = quizzes.open_attempt(db(), current_user, assignment)
    form = ActionForm()
    if attempt is None or not form.validate_on_submit():
        return redirect(url_for("quiz.quiz", slug=slug))
    missing = quizzes.unanswered(attempt)
    if missing and request.form.get("confirmed") != "yes":  # asked first (the page's script asks too)
        total = len(attempt.answers)
        return render_template(
            "confirm.html", form=form,
            heading=ngettext("Submit the quiz with %(num)d question unanswered?",
                             "Submit the quiz with %(num)d questions unanswered?", len(missing)),
            lines=[gettext("Unanswered: question %(numbers)s, of %(total)s. They score 0 once the "
                           "quiz is submitted, and no answer can be added after that.",
                           numbers=", ".join(map(str, missing)), total=total),
                   gettext("An answer typed but not sent with its own button does not count.")],
            action=url_for("quiz.submit", slug=slug), button=gettext("Submit anyway"),
            button_class="primary", back=url_for("quiz.quiz", slug=slug) + f"#q-{attempt.answers[missing[0] - 1].question_id}")
    quizzes.submit_attempt(db(), attempt)
    db().commit()
    flash(gettext("Quiz submitted. Free-text answers wait for your instructor's review.")
          if attempt.needs_manual else gettext("Quiz submitted."), "success")
    return redirect(url_for("quiz.attempt", attempt_id=attempt.id))


@bp.get("/quiz/attempts/<int:attempt_id>")
@login_required
def attempt(attempt_id: int):
    row = quizzes.get_attempt(db(), attempt_id)
    if row is None or (row.user_id != current_user.id and not current_user.is_instructor):
        abort(404)
    lang = interface_language()
    number = quizzes.attempt_numbers(db(), row.user_id, row.assignment_id)[row.id]
    return render_template("quiz/attempt.html", attempt=row, assignment=row.assignment, number=number,
                           items=_attempt_items(row, lang, with_forms=False), lang=lang,
                           lang_form=LanguageForm(lang=lang))


@bp.get("/language/<lang>")
def visitor_language(lang: str):
    """A visitor's choice (the header's links), kept in the session until they sign in (which
    sets the account's); an account's language changes only by the form (a POST) below."""
    if not current_user.is_authenticated and lang in LANGUAGES:
        session["lang"] = lang
    return redirect(_safe_next(request.args.get("next")) or url_for("auth.sign_in"))


@bp.post("/language")
@login_required
def set_language():
    """The account's one language switch (account page, quiz pages): the interface's language,
    the account's saved language and its open quiz attempt's (so the questions and their
    feedback follow)."""
    form = LanguageForm()
    if form.validate_on_submit() and form.lang.data in LANGUAGES:
        current_user.locale = form.lang.data
        for attempt in db().query(QuizAttempt).filter_by(user_id=current_user.id, status="open"):
            attempt.lang = form.lang.data
        db().commit()
    return redirect(_safe_next(request.form.get("next")) or url_for("student.home"))
