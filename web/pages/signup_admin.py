"""Instructor page: who may sign up (open, e-mail domains, invitation, closed) and invitations."""
from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, url_for
from flask_babel import gettext
from flask_login import current_user

from ..services import signup
from .forms import ActionForm, InvitationForm, SignupSettingsForm
from .helpers import db, instructor_required

bp = Blueprint("signup_admin", __name__, url_prefix="/instructor/sign-up")


def _page(settings_form=None, invite_form=None, new_link=None):
    session = db()
    policy = signup.settings(session)
    settings_form = settings_form or SignupSettingsForm(mode=policy.mode, domains=policy.allowed_domains)
    return render_template("instructor/signup.html", policy=policy, settings_form=settings_form,
                           invite_form=invite_form or InvitationForm(), new_link=new_link,
                           invitations=signup.list_invitations(session), revoke_form=ActionForm())


@bp.get("/")
@instructor_required
def page():
    return _page()


@bp.post("/settings")
@instructor_required
def save_settings():
    form = SignupSettingsForm()
    if form.validate_on_submit():
        try:
            signup.update_settings(db(), current_user, form.mode.data, form.domains.data or "")
        except ValueError as exc:
            db().rollback()
            form.domains.errors.append(str(exc))
        else:
            db().commit()
            flash(gettext("Sign-up settings saved."), "success")
            return redirect(url_for("signup_admin.page"))
    return _page(settings_form=form)


@bp.post("/invitations")
@instructor_required
def create_invitation():
    form = InvitationForm()
    if not form.validate_on_submit():
        return _page(invite_form=form)
    _invitation, code = signup.create_invitation(
        db(), current_user, email=form.email.data or None, max_uses=form.max_uses.data,
        days=form.days.data, note=(form.note.data or "").strip())
    db().commit()
    # shown once: only the code's hash is stored
    return _page(new_link=url_for("auth.sign_up", invite=code, _external=True))


@bp.post("/invitations/<int:invitation_id>/revoke")
@instructor_required
def revoke_invitation(invitation_id: int):
    if ActionForm().validate_on_submit() and signup.revoke_invitation(db(), invitation_id):
        db().commit()
        flash(gettext("Invitation withdrawn."), "success")
    return redirect(url_for("signup_admin.page"))
