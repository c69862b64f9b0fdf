"""What a frame session may do (``frame.py``): less than a signed-in browser.

A frame session lives in the LMS's page, on the strength of one launch. It never reaches the
pages that make lasting credentials or manage the grader's trust: API tokens (the account
page), invitations and sign-up settings, and the LTI page (registration URLs, platforms,
deployments). Those answer a page that says to open the grader in its own window and sign
in there. An instructor's other actions (overrides, regrades, settings, roster changes) are
confirmed once more on a page of the tool, and a session that no cookie binds to its
browser reaches no staff page but the content selection it was launched for.
"""
from __future__ import annotations

import hmac
import secrets

from flask import render_template, request, session, url_for

from .frame import PARAM, FrameSession

# endpoints that mint or manage lasting credentials
OUTSIDE_ONLY_ENDPOINTS = frozenset({
    "auth.account", "auth.revoke_one_token", "auth.revoke_all_tokens",
    "lti.admin", "lti.save_deployments", "lti.remove"})
OUTSIDE_ONLY_BLUEPRINTS = frozenset({"signup_admin"})
STAFF_BLUEPRINTS = frozenset({"instructor", "roster", "similarity", "lti"})
# the content selection a deep-linking launch opens: the frame session exists for it
FRAMED_STAFF_ENDPOINTS = frozenset({"lti.deep_link"})
CONFIRM_FIELD = "lti_confirm"
_CONFIRM_KEY = "lti_confirm"


def check():
    """A ``before_request`` hook: None to go on, or the page that answers instead."""
    if not isinstance(session, FrameSession) or not session.frame_id:
        return None
    endpoint, blueprint = request.endpoint or "", request.blueprint or ""
    if endpoint in OUTSIDE_ONLY_ENDPOINTS or blueprint in OUTSIDE_ONLY_BLUEPRINTS:
        return _outside()
    if blueprint not in STAFF_BLUEPRINTS or endpoint in FRAMED_STAFF_ENDPOINTS:
        return None
    if not session.bound:
        return _outside()
    if request.method == "POST":
        return _confirmed_or_ask()
    return None


def _outside():
    return render_template("lti/outside.html",
                           sign_in_url=url_for("auth.sign_in", **{PARAM: None})), 403


def _confirmed_or_ask():
    """The instructor's action, once confirmed on a page of the tool: a one-time value kept
    in the frame session comes back with the same form."""
    if request.files:  # a file cannot be carried through the confirmation page
        return _outside()
    sent, expected = request.form.get(CONFIRM_FIELD, ""), session.pop(_CONFIRM_KEY, None)
    if expected and hmac.compare_digest(sent, expected):
        return None
    session[_CONFIRM_KEY] = secrets.token_urlsafe(18)
    fields = [(name, value) for name, value in request.form.items(multi=True)
              if name != CONFIRM_FIELD]
    query = {k: v for k, v in request.args.items() if k != PARAM}
    action = url_for(request.endpoint, **(request.view_args or {}), **query)
    return render_template("lti/confirm.html", action=action, fields=fields,
                           confirm_field=CONFIRM_FIELD, confirm=session[_CONFIRM_KEY])
