"""LTI pages inside the LMS's own page (an iframe): a session bound to the browser.

An LMS shows a tool in an iframe for content selection (Moodle's "Select content" dialog)
and, in many courses, for every launch ("Embed" in Moodle, Canvas's default). The tool is
then a third party: browsers neither send nor store its ordinary cookies there (``SameSite=Lax``
cookies never go to a cross-site frame, and third-party cookies are being switched off).
So a framed launch cannot rely on the OIDC state cookie (``oidc_state.py``), nor on the
session cookie. What replaces them:

- **A frame session.** A validated framed launch starts a server-side session row; its id,
  signed with the app's secret (itsdangerous, with the time of signing), rides in every URL
  the framed pages link to as ``lti_frame=…`` (``url_defaults``). Each response signs it
  afresh, so the links of a page carry a new token (back and reload use the older ones).
  The session ends after ``IDLE_SECONDS`` unused, and with the app's session lifetime.
- **Bound to the launching browser.** The token alone is no pass: the launch also sets a
  partitioned cookie (CHIPS: ``Partitioned; Secure; SameSite=None``) holding a secret whose
  hash the session keeps. Browsers that keep such cookies in a third-party frame (Chromium,
  Edge; Firefox partitions every third-party cookie) store it in the LMS site's partition
  only, so it goes along neither to another browser nor to the same URL opened top-level.
  The session's first request after the launch says which kind of browser this is: with
  the cookie, the session is *bound* and every later request must bring the cookie. Without
  it (Safari, or plain HTTP on a non-local host), the session stays *unbound*: its tokens
  are accepted only in a frame (``Sec-Fetch-Dest``) or from the frame's own scripts
  (same-origin fetches, for polling), for ``UNBOUND_LINK_SECONDS`` after they were signed,
  and it reaches no staff page but the content selection it was launched for
  (``frame_scope.py``).
- **Framing by the platform only.** Responses of a frame session, and the launch's own
  answers, say ``frame-ancestors`` with the registered platform's origins (its issuer, its
  login URL, and the return URLs the signed launch names); every other page keeps
  ``frame-ancestors 'none'``.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from urllib.parse import urlparse

from flask import current_app, g, request
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface
from itsdangerous import BadSignature, URLSafeTimedSerializer

from .provision import DEEP_LINKING_CLAIM
from .toolconf import DatabaseLaunchData

PARAM = "lti_frame"
FRAME_DESTINATIONS = ("iframe", "frame", "embed", "object")
IDLE_SECONDS = 2 * 3600          # a frame session unused this long is over
UNBOUND_LINK_SECONDS = 15 * 60   # a link's token, where no cookie binds the session
_RENEW_AFTER = 5 * 60            # renew the idle deadline at most this often (a write)
COOKIE_PREFIX = "attn_frame_"
_SALT = "attn-grader.lti-frame-session"
# Endpoints whose URLs go to the LMS or are fetched by it: never with a frame token.
_UNFRAMED_ENDPOINTS = ("static", "lti.login", "lti.launch", "lti.jwks", "lti.register")
PRESENTATION_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/launch_presentation"


def in_a_frame() -> bool:
    """Whether this navigation loads into a frame (Fetch Metadata; every current browser)."""
    return request.headers.get("Sec-Fetch-Dest", "").lower() in FRAME_DESTINATIONS


def _from_the_frames_own_page() -> bool:
    """A same-origin fetch or subresource of one of our pages (the result page's polling)."""
    return request.headers.get("Sec-Fetch-Site", "").lower() == "same-origin" \
        and request.headers.get("Sec-Fetch-Dest", "").lower() not in ("", "document")


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


def sign(frame_id: str) -> str:
    """A token for the frame session's links; a random part makes each one new, also
    within the second that its signature's timestamp resolves."""
    return _serializer().dumps([frame_id, secrets.token_urlsafe(6)])


def _lifetime() -> int:
    return int(current_app.permanent_session_lifetime.total_seconds())


def _row_key(frame_id: str) -> str:
    return f"attn-frame-{frame_id}"


def cookie_name(frame_id: str) -> str:
    """One cookie per frame session: two activities open in one LMS page keep theirs apart."""
    return COOKIE_PREFIX + hashlib.sha256(frame_id.encode()).hexdigest()[:16]


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def start(session, *, user_id: int, launch_id: str, origins: list[str],
          deep_link: str | None = None) -> str:
    """A frame session for a validated launch; returns its signed token. The binding
    cookie goes on the launch's response (``set_binding_cookie``)."""
    frame_id, secret, now = secrets.token_urlsafe(24), secrets.token_urlsafe(32), time.time()
    # ``_fresh`` False as Flask-Login's session protection would mark it (no ``_id`` kept)
    data = {"_user_id": str(user_id), "_fresh": False, "lti_launch": launch_id,
            "lti_origins": origins, "lti_bind": _digest(secret), "lti_bound": None,
            "lti_started": now, "lti_seen": now}
    if deep_link:
        data["lti_deep_link"] = deep_link
    DatabaseLaunchData(session).set_value(_row_key(frame_id), data, exp=IDLE_SECONDS)
    token = sign(frame_id)
    g.frame_token, g.frame_binding = token, (cookie_name(frame_id), secret)
    allow_framing_by(origins)
    return token


def set_binding_cookie(response) -> None:
    """The partitioned cookie that binds the frame session started by this request."""
    name, secret = g.frame_binding
    response.set_cookie(name, secret, max_age=_lifetime(), path="/", secure=True,
                        httponly=True, samesite="None", partitioned=True)


class FrameSession(SecureCookieSession):
    frame_id: str = ""

    @property
    def bound(self) -> bool:
        return bool(self.get("lti_bound"))


class FrameSessionInterface(SecureCookieSessionInterface):
    """Flask's cookie session, unless the request carries a frame token: then the session
    is the server-side row the token names, if this browser may use it (module docstring);
    otherwise an empty session (signed out, no frame authority)."""

    def open_session(self, app, req):
        # Only the query string: every framed link and form action carries the token there
        # (``url_defaults``), and reading a body here could fail before any error handler.
        token = req.args.get(PARAM)
        if not token:
            return super().open_session(app, req)
        session = FrameSession()
        session.frame_id = ""
        try:
            (frame_id, _), signed_at = _serializer().loads(token, max_age=IDLE_SECONDS,
                                                           return_timestamp=True)
        except (BadSignature, TypeError, ValueError):
            return session
        from ..extensions import db_session
        data = DatabaseLaunchData(db_session()).get_value(_row_key(frame_id))
        now = time.time()
        if data is None or now - data.get("lti_started", 0) > _lifetime():
            return session
        changed = _admit(data, req.cookies.get(cookie_name(frame_id)), now - signed_at.timestamp())
        if changed is None:
            return session
        if now - data.get("lti_seen", 0) > _RENEW_AFTER:
            data["lti_seen"], changed = now, True
        session.update(data)
        session.frame_id, session.modified = frame_id, changed
        g.frame_token = sign(frame_id)  # the links of this page: a fresh token
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
        left = _lifetime() - (time.time() - session.get("lti_started", 0))
        DatabaseLaunchData(db).set_value(_row_key(session.frame_id), _plain(dict(session)),
                                         exp=max(1, int(min(IDLE_SECONDS, left))))
        db.commit()
        return None


def _admit(data: dict, cookie: str | None, token_age: float) -> bool | None:
    """Whether this request may use the frame session ``data`` (None: it may not; True: it
    may, and the session's binding was decided now; False: it may)."""
    if cookie is not None and hmac.compare_digest(_digest(cookie), data.get("lti_bind", "")):
        if data.get("lti_bound") is True:
            return False
        data["lti_bound"] = True  # this browser keeps the cookie: from now on it must bring it
        return True
    if data.get("lti_bound") is True:
        return None  # another browser (or this URL outside the LMS's page)
    if not (in_a_frame() or _from_the_frames_own_page()) or token_age > UNBOUND_LINK_SECONDS:
        return None
    if data.get("lti_bound") is None:
        data["lti_bound"] = False  # the first request after the launch came without the cookie
        return True
    return False


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
    from . import frame_scope

    app.session_interface = FrameSessionInterface()
    app.url_defaults(_add_token)
    app.before_request(frame_scope.check)
