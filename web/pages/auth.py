"""Sign up (as the instructor allows), sign in (rate-limited), sign out, password reset by e-mail."""
from __future__ import annotations

from urllib.parse import urlsplit

from flask import (Blueprint, abort, current_app, flash, redirect, render_template, request, session,
                   url_for)
from flask_babel import gettext, ngettext
from flask_login import current_user, login_required, login_user, logout_user

from ..auth import authenticate, issue_token, revoke_tokens
from ..extensions import limiter
from ..models import utcnow
from ..services import password_reset, signup
from ..services.users import add_user
from .forms import (ActionForm, ForgotPasswordForm, LanguageForm, ResetPasswordForm, SignInForm,
                    SignUpForm, TokenForm)
from .helpers import LANGUAGES, db, interface_language

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
            flash(gettext("Wrong email or password."), "error")
        else:
            db().commit()  # a rehashed password is saved
            login_user(user, remember=form.remember.data)
            return redirect(_safe_next(request.args.get("next")) or _home())
    return render_template("auth/sign_in.html", form=form)


@bp.route("/sign-up", methods=["GET", "POST"])
@limiter.limit(SIGN_IN_LIMIT, methods=["POST"])
def sign_up():
    if current_user.is_authenticated:
        return redirect(_home())
    form = SignUpForm()
    if not form.is_submitted():
        form.invite.data = request.args.get("invite", "")
        form.lang.data = interface_language()
    policy = signup.settings(db())
    if form.validate_on_submit():
        try:
            signup.admit(db(), form.email.data, form.invite.data or None)
            user = add_user(db(), form.email.data, "student", form.password.data,
                            name=form.name.data.strip())
            user.locale = interface_language()  # the language the visitor signed up in
        except signup.SignupRefused as exc:
            db().rollback()
            flash(gettext("Not signed up: %(reason)s", reason=exc), "error")
        except ValueError as exc:
            db().rollback()
            form.email.errors.append(str(exc))
        else:
            user.locale = form.lang.data if form.lang.data in LANGUAGES else interface_language()
            db().commit()
            login_user(user)
            flash(gettext("Welcome, %(name)s! Your assignments are below.", name=user.name), "success")
            return redirect(url_for("student.home"))
    return render_template("auth/sign_up.html", form=form, policy=policy,
                           domains=policy.allowed_domains.split())


@bp.route("/forgot-password", methods=["GET", "POST"])
@limiter.limit(SIGN_IN_LIMIT, methods=["POST"])
def forgot_password():
    config = current_app.config
    form = ForgotPasswordForm()
    if form.validate_on_submit():
        password_reset.request_reset(
            db(), form.email.data, config,
            lambda token: url_for("auth.reset_password", token=token, _external=True))
        # The same words whether or not the address has an account: no one learns who has one.
        flash(gettext("If that address has an account here, a reset link is on its way to it. The "
                      "link works once, within %(minutes)s minutes.",
                      minutes=config["PASSWORD_RESET_SECONDS"] // 60), "info")
        return redirect(url_for("auth.sign_in"))
    return render_template("auth/forgot_password.html", form=form,
                           mail=password_reset.mail_configured(config))


@bp.route("/reset-password/<token>", methods=["GET", "POST"])
@limiter.limit(SIGN_IN_LIMIT, methods=["POST"])
def reset_password(token: str):
    config = current_app.config
    form = ResetPasswordForm()
    try:
        user = password_reset.user_for_token(db(), token, config["SECRET_KEY"],
                                             config["PASSWORD_RESET_SECONDS"])
    except password_reset.ResetLinkInvalid as exc:
        flash(str(exc).capitalize() + ".", "error")
        return redirect(url_for("auth.forgot_password"))
    if form.validate_on_submit():
        try:
            password_reset.reset_password(db(), token, form.password.data, config["SECRET_KEY"],
                                          config["PASSWORD_RESET_SECONDS"])
        except ValueError as exc:  # the password policy's problems
            db().rollback()
            form.password.errors.append(str(exc))
        else:
            db().commit()
            if current_user.is_authenticated:
                logout_user()
            flash(gettext("Your password is changed; sign in with it."), "success")
            return redirect(url_for("auth.sign_in"))
    return render_template("auth/reset_password.html", form=form, email=user.email)


@bp.post("/sign-out")
def sign_out():
    form = ActionForm()
    if form.validate_on_submit():
        logout_user()
        session.pop("lang", None)
        flash(gettext("You are signed out."), "info")
    return redirect(url_for("auth.sign_in"))


@bp.route("/account", methods=["GET", "POST"])
@login_required
def account():
    """The account: its language and API tokens for `attn-grader submit` (shown once)."""
    form, new_token = TokenForm(), None
    if form.validate_on_submit():
        new_token = issue_token(db(), current_user, label=form.label.data.strip())
        db().commit()
    tokens = sorted(current_user.tokens, key=lambda t: t.id, reverse=True)
    return render_template("auth/account.html", form=form, new_token=new_token, tokens=tokens,
                           revoke_form=ActionForm(), lang_form=LanguageForm(lang=interface_language()))


@bp.post("/account/tokens/<int:token_id>/revoke")
@login_required
def revoke_one_token(token_id: int):
    """Revoke one of the user's own tokens (a lost laptop), leaving the others working."""
    token = next((t for t in current_user.tokens if t.id == token_id), None)
    if token is None:
        abort(404)
    if ActionForm().validate_on_submit() and token.revoked_at is None:
        token.revoked_at = utcnow()
        db().commit()
        flash(gettext("Token %(prefix)s… (%(label)s) revoked.", prefix=token.prefix,
                      label=token.label or gettext("no label")), "success")
    return redirect(url_for("auth.account"))


@bp.post("/account/revoke-tokens")
@login_required
def revoke_all_tokens():
    form = ActionForm()
    if form.validate_on_submit() and request.form.get("confirmed") != "yes":
        live = sum(1 for t in current_user.tokens if t.revoked_at is None)
        return render_template(
            "confirm.html", heading=gettext("Revoke every API token?"), form=form,
            lines=[ngettext("Your %(num)d active token stops working at once: `attn-grader submit` "
                            "with it is refused until you create a new one.",
                            "Your %(num)d active tokens stop working at once: `attn-grader submit` "
                            "with any of them is refused until you create a new one.", live)],
            action=url_for("auth.revoke_all_tokens"),
            button=ngettext("Revoke %(num)d token", "Revoke %(num)d tokens", live),
            button_class="danger", back=url_for("auth.account"))
    if form.validate_on_submit():
        count = revoke_tokens(db(), current_user)
        db().commit()
        flash(ngettext("%(num)d API token revoked.", "%(num)d API tokens revoked.", count), "success")
    return redirect(url_for("auth.account"))
