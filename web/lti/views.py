"""The LTI endpoints and the instructor's LTI page.

- ``/lti/login``: OIDC login initiation (third-party initiated login) from the LMS.
- ``/lti/launch``: the launch (a form POST from the LMS carrying the signed ``id_token``):
  a resource link opens its assignment signed in as the LMS user; a deep linking request
  shows instructors the assignments to place.
- ``/lti/deep-link/<launch_id>``: the instructor's choice, sent back to the LMS signed.
- ``/lti/jwks``: the tool's public keys.
- ``/instructor/lti``: the tool's URLs to register, the platforms, rosters and passback.

Login and launch come from the LMS, not from our own forms, so they carry no CSRF token;
they are protected by the OIDC state, the nonce and the platform's signature instead.
A launch into a frame of the LMS's page (content selection, embedded activities) goes on
in a frame session instead of cookies (``frame.py``).
"""
from __future__ import annotations

from urllib.parse import urlparse

import jwt
from flask import (Blueprint, abort, current_app, flash, jsonify, make_response, redirect,
                   render_template, request, session as browser_session, url_for)
from flask_babel import gettext
from flask_login import login_user
from pylti1p3.contrib.flask import FlaskMessageLaunch, FlaskRequest
from pylti1p3.deep_link_resource import DeepLinkResource
from pylti1p3.exception import LtiException, OIDCException
from pylti1p3.lineitem import LineItem

from ..extensions import csrf, writes_on_get
from ..pages.forms import ActionForm
from ..pages.helpers import db, instructor_required
from ..security import content_security_policy
from ..services.courses import default_course, find_assignment, points_possible
from . import frame, keys, oidc_state, passback, platforms, provision, refusals, registration, roster
from .forms import DeepLinkForm, DeploymentsForm, PlatformForm
from .models import LtiContext
from .toolconf import DatabaseLaunchData, DatabaseToolConf, http_session

bp = Blueprint("lti", __name__)


def _refuse(message: str, code: int = 400, detail: str = "", platform=None):
    """The refusal page; framable by the platform the request names, if it is registered,
    so that a refusal inside the LMS's dialog is read rather than blocked."""
    if platform is not None:
        frame.allow_framing_by(frame.platform_origins(platform))
    return render_template("lti/error.html", message=message, detail=detail), code


def _refuse_exc(exc: Exception, platform=None):
    message, detail = refusals.explain(exc)
    return _refuse(message, detail=detail, platform=platform)


def _named_platform(conf, iss: str | None, client_id: str | None):
    """The registered platform a refused request names (unverified: it only decides which
    registered origins may frame the refusal page), or None."""
    try:
        return conf.platform(iss, client_id) if iss else None
    except LookupError:
        return None


def _launch_storage():
    return DatabaseLaunchData(db())


@bp.route("/lti/login", methods=["GET", "POST"])
@writes_on_get  # the login's state and nonce, whichever method the LMS uses
@csrf.exempt
def login():
    conf = DatabaseToolConf(db())
    oidc = oidc_state.StateRecordingLogin(FlaskRequest(), conf, launch_data_storage=_launch_storage())
    oidc.db = db()
    try:
        # Always our own launch URL: the LMS checks it against the registered redirect URIs.
        response = oidc.redirect(url_for("lti.launch", _external=True))
    except (OIDCException, LtiException, LookupError) as exc:
        values = request.values
        return _refuse_exc(exc, _named_platform(conf, values.get("iss"), values.get("client_id")))
    db().commit()  # the state and nonce the launch will be checked against
    return response


def _claimed_issuer() -> tuple[str | None, str | None]:
    try:
        claims = jwt.decode(request.form.get("id_token", ""), options={"verify_signature": False})
    except jwt.PyJWTError:
        return None, None
    aud = claims.get("aud")
    return claims.get("iss"), (aud[0] if isinstance(aud, list) and aud else aud)


@bp.post("/lti/launch")
@csrf.exempt
def launch():
    session = db()
    conf = DatabaseToolConf(session)
    message = oidc_state.StateCheckingLaunch(FlaskRequest(), conf,
                                        launch_data_storage=_launch_storage(),
                                        requests_session=http_session())
    message.db = session
    try:
        body = message.get_launch_data()
        platform = conf.platform(message.get_iss(), message.get_client_id())
    except (LtiException, LookupError) as exc:
        session.rollback()  # a refused launch uses up neither its state nor its nonce
        return _refuse_exc(exc, _named_platform(conf, *_claimed_issuer()))
    # In a frame of the LMS's page the browser may keep no cookie of ours: the launch goes
    # on in a frame session (a launch without its state cookie is accepted only framed).
    framed = frame.in_a_frame()
    if not message.state_from_cookie and not oidc_state.posted_by(platform, body):
        session.rollback()
        return _refuse(gettext("This launch did not come from the LMS's page.") + " "
                       + str(refusals.AGAIN), platform=platform)
    try:
        user, course, context, role = provision.launch_user(session, platform, body)
        if message.is_deep_link_launch():
            if role != "instructor":
                raise provision.LaunchRejected(gettext("only course staff can add assignments"))
            target = ("lti.deep_link", {"launch_id": message.get_launch_id()})
        elif message.is_resource_launch():
            link = provision.ensure_link(session, platform, course, context, body)
            passback.queue_best_score(session, user.id, link.assignment_id)
            target = _assignment_endpoint(link.assignment)
        else:
            raise provision.LaunchRejected(gettext("this kind of LTI message is not supported"))
    except provision.LaunchRejected as exc:
        session.rollback()
        return _refuse(str(exc), platform=platform)
    deep_link = message.get_launch_id() if message.is_deep_link_launch() else None
    if framed:
        frame.start(session, user_id=user.id, launch_id=message.get_launch_id(),
                    origins=frame.platform_origins(platform, body), deep_link=deep_link)
    session.commit()
    response = redirect(url_for(target[0], **target[1]), code=303)
    if framed:
        frame.set_binding_cookie(response)
    else:
        login_user(user)
        if deep_link:  # only this browser may answer this content selection
            browser_session["lti_deep_link"] = deep_link
    return response


def _assignment_endpoint(assignment) -> tuple[str, dict]:
    if assignment.kind == "quiz":
        return "quiz.quiz", {"slug": assignment.slug}
    return "student.task", {"slug": assignment.slug}


def _restore(launch_id: str):
    try:
        return FlaskMessageLaunch.from_cache(launch_id, FlaskRequest(), DatabaseToolConf(db()),
                                             launch_data_storage=_launch_storage(),
                                             requests_session=http_session())
    except (LtiException, LookupError):
        return None


@bp.route("/lti/deep-link/<launch_id>", methods=["GET", "POST"])
@instructor_required
def deep_link(launch_id: str):
    message = _restore(launch_id) if browser_session.get("lti_deep_link") == launch_id else None
    if message is None or not message.is_deep_link_launch():
        return _refuse(gettext("This content selection has expired or was already answered. "
                               "Start it again from the LMS."), 404)
    platform = DatabaseToolConf(db()).platform(message.get_iss(), message.get_client_id())
    course = platform.course or default_course(db())
    settings = message.get_launch_data()[provision.DEEP_LINKING_CLAIM]
    form = DeepLinkForm()
    form.assignments.choices = [(a.slug, f"{a.title} ({a.kind})")
                                for a in (course.assignments if course else [])]
    chosen = form.validate_on_submit()
    if chosen and str(settings.get("accept_multiple", True)).lower() == "false" \
            and len(form.assignments.data) > 1:
        form.assignments.errors.append(gettext("This LMS takes one assignment at a time."))
        chosen = False
    if not chosen:
        return render_template("lti/deep_link.html", form=form, launch_id=launch_id)
    items = []
    for slug in form.assignments.data:
        assignment = find_assignment(db(), slug, course)
        items.append(DeepLinkResource().set_url(url_for("lti.launch", _external=True))
                     .set_title(assignment.title)
                     .set_custom_params({provision.ASSIGNMENT_PARAM: assignment.slug})
                     .set_lineitem(LineItem().set_label(assignment.title)
                                   .set_score_maximum(points_possible(assignment))
                                   .set_resource_id(assignment.slug)))
    token = message.get_deep_link().get_response_jwt(items)
    browser_session.pop("lti_deep_link", None)
    return_url = settings["deep_link_return_url"]
    response = make_response(render_template("lti/deep_link_return.html",
                                             return_url=return_url, token=token))
    # This one form posts to the LMS: widen form-action to its origin only.
    origin = "{0.scheme}://{0.netloc}".format(urlparse(return_url))
    response.headers["Content-Security-Policy"] = content_security_policy(form_action=(origin,))
    return response


@bp.get("/lti/register/<token>")
@writes_on_get  # the platform it registers
@csrf.exempt
def register(token: str):
    """Dynamic registration: the LMS opens this URL (pasted by its administrator), usually
    in a frame of its own page, with ``openid_configuration`` and ``registration_token``."""
    session = db()
    config_url = request.args.get("openid_configuration", "")
    # Framable by the LMS that opened it (its own page shows this one), also when refused:
    # a refusal it cannot show would leave its administrator a broken-frame icon. Its issuer's
    # origin is added once it is known.
    frame.allow_framing_by(frame.platform_origins_of([config_url]))
    try:
        registration.read_token(session, current_app.secret_key, token)
    except registration.RegistrationRefused as exc:
        return _refuse(gettext("This registration URL cannot be used: %(reason)s.", reason=exc))
    keys.signing_key(session)
    try:
        done = registration.register(
            session, secret=current_app.secret_key, token=token, openid_configuration=config_url,
            registration_token_value=request.args.get("registration_token"),
            base_url=request.host_url, allow_http=_allow_http())
    except registration.RegistrationRefused as exc:
        session.rollback()
        return _refuse(gettext("The LMS could not be registered: %(reason)s.", reason=exc))
    session.commit()
    frame.allow_framing_by(frame.platform_origins(done.platform))
    return render_template("lti/registered.html", platform=done.platform, product=done.product)


@bp.get("/lti/jwks")
def jwks():
    data = keys.jwks(db())
    db().commit()
    response = jsonify(data)
    response.headers["Cache-Control"] = "public, max-age=300"
    return response


# ---- the instructor's page -----------------------------------------------------------------

@bp.route("/instructor/lti", methods=["GET", "POST"], strict_slashes=False)
@instructor_required
def admin():
    session = db()
    form = PlatformForm(prefix="new")
    if form.validate_on_submit():
        try:
            platforms.add_platform(
                session, name=form.name.data, issuer=form.issuer.data,
                client_id=form.client_id.data, auth_login_url=form.auth_login_url.data,
                auth_token_url=form.auth_token_url.data, key_set_url=form.key_set_url.data,
                auth_audience=form.auth_audience.data, deployment_ids=form.deployment_ids.data,
                allow_http=_allow_http())
        except platforms.RegistrationError as exc:
            session.rollback()
            flash(gettext("Not registered: %(reason)s", reason=exc), "error")
        else:
            session.commit()
            flash(gettext("Platform registered."), "success")
            return redirect(url_for("lti.admin"))
    contexts = session.query(LtiContext).order_by(LtiContext.id).all()
    register_url = registration.registration_url(request.host_url, current_app.secret_key)
    return render_template("lti/admin.html", form=form, urls=platforms.tool_urls(),
                           register_url=register_url,
                           platforms=platforms.list_platforms(session), contexts=contexts,
                           outbox=passback.outbox(session), deployments_form=DeploymentsForm(),
                           action_form=ActionForm())


def _allow_http() -> bool:
    from flask import current_app
    return bool(current_app.config.get("LTI_ALLOW_HTTP"))


@bp.post("/instructor/lti/platforms/<int:platform_id>/deployments")
@instructor_required
def save_deployments(platform_id: int):
    platform = platforms.find_platform(db(), platform_id) or abort(404)
    form = DeploymentsForm()
    if form.validate_on_submit():
        platforms.set_deployments(db(), platform, form.deployment_ids.data)
        db().commit()
        flash(gettext("Deployment IDs saved."), "success")
    return redirect(url_for("lti.admin"))


@bp.post("/instructor/lti/platforms/<int:platform_id>/remove")
@instructor_required
def remove(platform_id: int):
    platform = platforms.find_platform(db(), platform_id) or abort(404)
    if ActionForm().validate_on_submit():
        platforms.remove_platform(db(), platform)
        db().commit()
        flash(gettext("Platform removed; its launches no longer work."), "success")
    return redirect(url_for("lti.admin"))


@bp.post("/instructor/lti/contexts/<int:context_id>/roster")
@instructor_required
def sync_roster(context_id: int):
    context = db().get(LtiContext, context_id) or abort(404)
    if ActionForm().validate_on_submit():
        try:
            result = roster.sync_roster(db(), context)
        except Exception as exc:  # the LMS refused or is down: say so, change nothing
            db().rollback()
            flash(gettext("Roster not synced: %(reason)s", reason=exc), "error")
        else:
            db().commit()
            flash(gettext("Roster synced: %(summary)s.", summary=result.describe()), "success")
    return redirect(url_for("lti.admin"))
