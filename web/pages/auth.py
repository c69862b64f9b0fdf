"""Sign up, sign in (rate-limited), sign out."""
from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, flash, redirect, render_template, request, session, url_for
from flask_login import current_user, login_required, login_user, logout_user

from ..auth import authenticate, issue_token, revoke_tokens
from ..extensions import limiter
from ..services.users import add_user
from .forms import ActionForm, LanguageForm, SignInForm, SignUpForm, TokenForm
from .helpers import db, quiz_language

bp = Blueprint("auth", __name__)

SIGN_IN_LIMIT = "10 per minute"


def _home():
    return url_for("instructor.overview" if current_user.is_instructor else "student.home")


def _safe_next(target: str | None) -> str | None:
    """Only same-site paths: an open redirect would let a link send people elsewhere."""
    if not target:
        return None
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return None
    return target


@bp.route("/sign-in", methods=["GET", "POST"])
@limiter.limit(SIGN_IN_LIMIT, methods=["POST"])
def sign_in():
    if current_user.is_authenticated:
        return redirect(_home())
    form = SignInForm()
    if form.validate_on_submit():
        user = authenticate(db(), form.email.data, form.password.data)
        if user is None:
            flash("Wrong email or password.", "error")
        else:
            db().commit()  # a rehashed password is saved
            login_user(user, remember=form.remember.data)
            session["lang"] = user.locale
            return redirect(_safe_next(request.args.get("next")) or _home())
    return render_template("auth/sign_in.html", form=form)


@bp.route("/sign-up", methods=["GET", "POST"])
@limiter.limit(SIGN_IN_LIMIT, methods=["POST"])
def sign_up():
    if current_user.is_authenticated:
        return redirect(_home())
    form = SignUpForm()
    if form.validate_on_submit():
        try:
            user = add_user(db(), form.email.data, "student", form.password.data,
                            name=form.name.data.strip())
        except ValueError as exc:
            form.email.errors.append(str(exc))
        else:
            db().commit()
            login_user(user)
            flash(f"Welcome, {user.name}! Your assignments are below.", "success")
            return redirect(url_for("student.home"))
    return render_template("auth/sign_up.html", form=form)


@bp.post("/sign-out")
def sign_out():
    form = ActionForm()
    if form.validate_on_submit():
        logout_user()
        session.pop("lang", None)
        flash("You are signed out.", "info")
    return redirect(url_for("auth.sign_in"))


@bp.route("/account", methods=["GET", "POST"])
@login_required
def account():
    """The account: quiz language and API tokens for `attn-grader submit` (shown once)."""
    form, new_token = TokenForm(), None
    if form.validate_on_submit():
        new_token = issue_token(db(), current_user, label=form.label.data.strip())
        db().commit()
    tokens = sorted(current_user.tokens, key=lambda t: t.id, reverse=True)
    return render_template("auth/account.html", form=form, new_token=new_token, tokens=tokens,
                           revoke_form=ActionForm(), lang_form=LanguageForm(lang=quiz_language()))


@bp.post("/account/revoke-tokens")
@login_required
def revoke_all_tokens():
    if ActionForm().validate_on_submit():
        count = revoke_tokens(db(), current_user)
        db().commit()
        flash(f"{count} API token(s) revoked.", "success")
    return redirect(url_for("auth.account"))
