"""The HTML pages: sign-in, the student's assignments and results, quizzes, the instructor's views.

``register(app)`` (called by ``create_app``) adds the blueprints, the template helpers and
HTML error pages. Views are thin: they read a form, call a function from ``web.services``
and render a template. Every template autoescapes; code is shown through Pygments, which
escapes it too.
"""
from __future__ import annotations

from flask import Flask, current_app, render_template, request
from flask_login import current_user
from flask_babel import gettext, lazy_gettext
from flask_wtf.csrf import CSRFError

from ..i18n import grader_skip_reason, grader_text
from . import helpers
from ..services import courses


def register(app: Flask) -> None:
    from ..extensions import login_manager
    from . import auth, instructor, quiz, roster, signup_admin, similarity, student

    login_manager.login_view = "auth.sign_in"
    login_manager.login_message = lazy_gettext("Please sign in to see that page.")
    login_manager.login_message_category = "info"

    for blueprint in (auth.bp, student.bp, quiz.bp, instructor.bp, roster.bp, signup_admin.bp,
                      similarity.bp):
        app.register_blueprint(blueprint)

    app.jinja_env.filters.update(
        when=helpers.format_when, score=helpers.format_score, points=helpers.format_points, percent=helpers.format_percent,
        seconds=helpers.format_seconds, markdown=helpers.render_markdown,
        inline_markdown=helpers.render_inline, python=helpers.highlight_python,
        cjk_spacing=helpers.tidy_cjk_spacing, shown_title=courses.shown_title,
        relative_path=helpers.relative_path,
        # the grader's feedback in the reader's language (its own catalogue: grader/translations)
        feedback=grader_text, skip_reason=grader_skip_reason)
    app.context_processor(helpers.template_globals)

    for code in (403, 404, 413, 429):
        app.register_error_handler(code, _error_page)
    app.register_error_handler(CSRFError, _csrf_error)


def _wants_page() -> bool:
    return not request.path.startswith("/api/")


def _error_page(exc):
    if not _wants_page():
        return exc
    messages = {
        403: gettext("You do not have access to this page."),
        404: gettext("There is nothing here."),
        413: gettext("That file is too large."),
        429: gettext("Too many requests; wait a moment and try again."),
    }
    code = getattr(exc, "code", 500) or 500
    detail = _rate_limit_detail(exc) if code == 429 else ""
    if code == 413:
        limit = current_app.config["MAX_SUBMISSION_BYTES"]
        detail = gettext("Submissions are limited to %(limit)s bytes (%(kib)s KiB) of code; "
                         "your browser's Back button returns to the editor.",
                         limit=limit, kib=limit // 1024)
    return render_template("error.html", code=code, message=messages.get(code, gettext("Error")),
                           detail=detail, user=current_user), code


def _rate_limit_detail(exc) -> str:
    """Flask-Limiter's limit ("10 per 1 minute", its ``description``) as a sentence of the page."""
    from grader.client import wait_phrase

    limit = getattr(getattr(exc, "limit", None), "limit", None)  # RateLimitExceeded's limits item
    if limit is None:
        return ""
    return gettext("At most %(count)s attempts per %(window)s from your address.",
                   count=limit.amount, window=grader_text(wait_phrase(limit.get_expiry())))


def _csrf_error(exc: CSRFError):
    return render_template("error.html", code=400,
                           message=gettext("The form expired or was not sent from this site; "
                                           "go back, reload the page and try again."),
                           detail=exc.description, user=current_user), 400
