"""The OIDC state of a launch, checked also where the browser keeps no cookie of ours.

``/lti/login`` records each OIDC state on the server with the nonce sent along with it and
whether the login was loaded into a frame (``remember_state``); the launch takes that record
once (``take_state``) and the id_token must carry that very nonce.

Without the state cookie nothing ties a launch to the browser that started it, so a launch
captured by one person and posted from another's browser would sign that browser in (login
CSRF). The cookie-less path is therefore taken only where a cookie cannot come along: both
the login and the launch were loaded into a frame (Fetch Metadata's ``Sec-Fetch-Dest``, which
a page cannot set on a navigation it causes), and the launch was posted by the platform's
page (``Origin``). Such a launch only ever opens a frame session (``frame.py``), bound to the
browser and framable by the platform alone.
"""
from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from flask import request
from pylti1p3.contrib.flask import FlaskMessageLaunch, FlaskOIDCLogin
from pylti1p3.exception import LtiException

from .frame import in_a_frame, platform_origins
from .toolconf import DatabaseLaunchData

STATE_LIFETIME = 10 * 60  # an OIDC login becomes a launch within seconds; Moodle's token: 60 s
# pylti1p3's words, which ``refusals`` turns into a sentence for the reader
NOT_FRAMED = "State cookie missing outside a frame"


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
    """pylti1p3's launch with a state check that also works without the state cookie (see
    the module's docstring). ``state_from_cookie`` says which check passed."""
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
                raise LtiException(NOT_FRAMED)
            self._expected_nonce = record["nonce"]
        return self

    def validate_nonce(self):
        super().validate_nonce()
        if self._expected_nonce is not None \
                and self._get_jwt_body().get("nonce") != self._expected_nonce:
            raise LtiException("Invalid Nonce")
        return self


def posted_by(platform, body: dict) -> bool:
    """Whether a launch POST came from the platform's page: a browser names the page's
    origin in ``Origin`` ("null" where a referrer policy hides it, or no header at all from
    older browsers; those prove nothing either way)."""
    origin = request.headers.get("Origin")
    return origin in (None, "", "null") or origin in platform_origins(platform, body)
