"""LTI pages inside the LMS's own page (an iframe), without third-party cookies.

An LMS shows a tool in an iframe for content selection (Moodle's "Select content" dialog)
and, in many courses, for every launch ("Embed" in Moodle, Canvas's default). The tool is
then a third party: browsers neither send nor store its cookies there (``SameSite=Lax``
cookies never go to a cross-site frame, and third-party cookies are being switched off).
So a framed launch cannot rely on the OIDC state cookie, nor on the session cookie.

What replaces them:

- **State without a cookie.** ``/lti/login`` records each OIDC state on the server with the
  nonce sent along with it (``remember_state``); the launch takes that record once
  (``take_state``) and the id_token must carry that very nonce. A launch whose state cookie
  is missing is accepted only this way, and it only ever opens a *frame session* (below),
  never signs the browser in with a cookie.
- **The launch's authority carried in the page.** A validated framed launch starts a
  server-side session row; its id, signed with the app's secret (itsdangerous), rides in
  every URL the framed pages link to as ``lti_frame=…`` (``url_defaults``). That token is
  bound to that launch: its user, its platform and the origins allowed to frame it. It
  expires with the session lifetime. The content selection it may answer is single-use: the
  deep-link response removes it from the session.
- **Framing by the platform only.** Responses of a frame session, and the launch's own
  answers, say ``frame-ancestors`` with the registered platform's origins (its issuer, its
  login URL, and the return URLs the signed launch names); every other page keeps
  ``frame-ancestors 'none'``.
"""
from __future__ import annotations

import secrets
from urllib.parse import parse_qs, urlparse

from flask import current_app, g, request
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface
from itsdangerous import BadSignature, URLSafeTimedSerializer
from pylti1p3.contrib.flask import FlaskMessageLaunch, FlaskOIDCLogin
from pylti1p3.exception import LtiException

from .provision import DEEP_LINKING_CLAIM
from .toolconf import DatabaseLaunchData

PARAM = "lti_frame"
STATE_LIFETIME = 10 * 60  # an OIDC login becomes a launch within seconds; Moodle's token: 60 s
FRAME_DESTINATIONS = ("iframe", "frame", "embed", "object")
_SALT = "attn-grader.lti-frame-session"
# Endpoints whose URLs go to the LMS or are fetched by it: never with a frame token.
_UNFRAMED_ENDPOINTS = ("static", "lti.login", "lti.launch", "lti.jwks", "lti.register")
PRESENTATION_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/launch_presentation"


# ---- OIDC state without a cookie ------------------------------------------------------------

def _state_key(state: str) -> str:
    return f"attn-state-{state}"[:255]


def remember_state(session, state: str, nonce: str, framed: bool) -> None:
    DatabaseLaunchData(session).set_value(_state_key(state), {"nonce": nonce, "framed": framed},
                                          exp=STATE_LIFETIME)


def take_state(session, state: str) -> dict | None:
    """The login's record of ``state`` (its nonce), used up: a state works once."""
    storage = DatabaseLaunchData(session)
    record = storage.get_value(_state_key(state))
    storage.check_value(_state_key(state))  # deletes it
    return record


class StateRecordingLogin(FlaskOIDCLogin):
    """pylti1p3's OIDC login, also recording its state and nonce on the server."""
    db = None

    def _prepare_redirect_url(self, launch_url: str) -> str:
        url = super()._prepare_redirect_url(launch_url)
        query = parse_qs(urlparse(url).query)
        remember_state(self.db, query["state"][0], query["nonce"][0], framed=in_a_frame())
        return url


class StateCheckingLaunch(FlaskMessageLaunch):
    """pylti1p3's launch with a state check that also works without the state cookie: the
    state must be one our login recorded (used once), and the id_token must carry the nonce
    recorded with it. ``state_from_cookie`` says which check passed.

    Without the cookie nothing ties the launch to the browser that started it, so a launch
    captured by one person and posted from another's browser would sign that browser in
    (login CSRF). The cookie-less path is therefore taken only where a cookie cannot come
    along: both the login and the launch were loaded into a frame (Fetch Metadata's
    ``Sec-Fetch-Dest``, which a page cannot set on a navigation it causes). Such a launch
    only ever opens a frame session, whose token is bound to the browser (below)."""
    db = None
    state_from_cookie = False
    _expected_nonce = None

    def validate_state(self):
        state = self._get_request_param("state")
        if not state:
            raise LtiException("Missing state param")
        record = take_state(self.db, state)
        self.state_from_cookie = self._cookie_service.get_cookie(state) == state
        if not self.state_from_cookie:
            if record is None:
                raise LtiException("State not found")
            if not (record.get("framed") and in_a_frame()):
                raise LtiException("State cookie missing outside a frame")
            self._expected_nonce = record["nonce"]
        return self

    def validate_nonce(self):
        super().validate_nonce()
        if self._expected_nonce is not None \
                and self._get_jwt_body().get("nonce") != self._expected_nonce:
            raise LtiException("Invalid Nonce")
        return self


def in_a_frame() -> bool:
    """Whether this navigation loads into a frame (Fetch Metadata; every current browser)."""
    return request.headers.get("Sec-Fetch-Dest", "").lower() in FRAME_DESTINATIONS


def posted_by(platform, body: dict) -> bool:
    """Whether a launch POST came from the platform's page: a browser names the page's
    origin in ``Origin`` ("null" where a referrer policy hides it, or no header at all from
    older browsers; those prove nothing either way)."""
    origin = request.headers.get("Origin")
    return origin in (None, "", "null") or origin in platform_origins(platform, body)


# ---- which origins may frame -----------------------------------------------------------------

def _origin(url) -> str | None:
    parsed = urlparse(str(url or ""))
    if parsed.scheme in ("http", "https") and parsed.netloc:
        return f"{parsed.scheme}://{parsed.netloc}"
    return None


def platform_origins(platform, body: dict | None = None) -> list[str]:
    """The registered platform's origins (issuer, login URL) and, from the signed launch,
    the LMS pages it returns to (Canvas's issuer is not the school's own domain)."""
    urls = [platform.issuer, platform.auth_login_url]
    if body:
        urls.append((body.get(DEEP_LINKING_CLAIM) or {}).get("deep_link_return_url"))
        urls.append((body.get(PRESENTATION_CLAIM) or {}).get("return_url"))
    return platform_origins_of(urls)


def platform_origins_of(urls) -> list[str]:
    return sorted({o for o in map(_origin, urls) if o})


def allow_framing_by(origins: list[str]) -> None:
    """This response may be framed by ``origins`` (``web.security`` writes the header)."""
    if origins:
        g.frame_ancestors = list(origins)


# ---- the frame session -----------------------------------------------------------------------

def _serializer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.secret_key, salt=_SALT)


def _lifetime() -> int:
    return int(current_app.permanent_session_lifetime.total_seconds())


def _row_key(frame_id: str) -> str:
    return f"attn-frame-{frame_id}"


def start(session, *, user_id: int, launch_id: str, origins: list[str],
          deep_link: str | None = None) -> str:
    """A frame session for a validated launch; returns its signed token."""
    frame_id = secrets.token_urlsafe(24)
    # ``_fresh`` False as Flask-Login's session protection would mark it (no ``_id`` kept)
    data = {"_user_id": str(user_id), "_fresh": False, "lti_launch": launch_id,
            "lti_origins": origins}
    if deep_link:
        data["lti_deep_link"] = deep_link
    DatabaseLaunchData(session).set_value(_row_key(frame_id), data, exp=_lifetime())
    token = _serializer().dumps(frame_id)
    g.frame_token = token
    allow_framing_by(origins)
    return token


class FrameSession(SecureCookieSession):
    frame_id: str = ""


class FrameSessionInterface(SecureCookieSessionInterface):
    """Flask's cookie session, unless the request carries a frame token: then the session
    is the server-side row the token names (and no cookie is read or set)."""

    def open_session(self, app, req):
        # Only the query string: every framed link and form action carries the token there
        # (``url_defaults``), and reading a body here could fail before any error handler.
        token = req.args.get(PARAM)
        if not token:
            return super().open_session(app, req)
        session = FrameSession()
        session.frame_id = ""
        try:
            frame_id = _serializer().loads(token, max_age=_lifetime())
        except BadSignature:
            return session  # an empty session: signed out, and no frame authority
        from ..extensions import db_session
        data = DatabaseLaunchData(db_session()).get_value(_row_key(frame_id))
        if data is None:
            return session
        session.update(data)
        session.frame_id, session.modified = frame_id, False
        g.frame_token = token
        allow_framing_by(data.get("lti_origins") or [])
        return session

    def save_session(self, app, session, response):
        if not isinstance(session, FrameSession):
            return super().save_session(app, session, response)
        if not (session.frame_id and session.modified):
            return None
        from ..extensions import db_session
        db = db_session()
        db.rollback()  # what the view left uncommitted, teardown would have dropped too
        DatabaseLaunchData(db).set_value(_row_key(session.frame_id), _plain(dict(session)),
                                         exp=_lifetime())
        db.commit()
        return None


def _plain(value):
    """The session as JSON can hold it: a flashed message may be a lazily translated string
    (Flask-Login's "Please sign in"), which the cookie session's serialiser turns into text
    and JSON cannot; it is stored as the text it reads now."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _add_token(endpoint: str, values: dict) -> None:
    token = g.get("frame_token")
    if token and endpoint not in _UNFRAMED_ENDPOINTS:
        values.setdefault(PARAM, token)


def init_app(app) -> None:
    app.session_interface = FrameSessionInterface()
    app.url_defaults(_add_token)
