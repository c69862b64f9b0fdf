"""pylti1p3's view of our database: registrations from ``lti_platforms``, the tool's key
from ``lti_keys``, and launch state (OIDC state, nonces, launches) in ``lti_launch_data``.

Launch state lives in the database rather than in Flask's session cookie: the launch is a
cross-site POST from the LMS, which a ``SameSite=Lax`` cookie does not accompany, and any
web process (or host) may receive it. Rows expire; each write prunes the expired ones.
"""
from __future__ import annotations

from datetime import timedelta

import requests
from pylti1p3.deployment import Deployment
from pylti1p3.launch_data_storage.base import LaunchDataStorage
from pylti1p3.registration import Registration
from pylti1p3.tool_config.abstract import ToolConfAbstract
from sqlalchemy import delete, select

from ..models import utcnow
from .keys import signing_key
from .models import LtiLaunchData, LtiPlatform

SERVICE_TIMEOUT = (5.0, 20.0)  # connect, read: an LMS that hangs must not hold a sender


class TimeoutSession(requests.Session):
    """``requests`` waits forever by default; every call to an LMS gets a timeout."""

    def request(self, *args, **kwargs):
        kwargs.setdefault("timeout", SERVICE_TIMEOUT)
        return super().request(*args, **kwargs)


def http_session() -> requests.Session:
    session = TimeoutSession()
    session.headers["User-Agent"] = "attn-grader-lti"
    return session


def registration_for(platform: LtiPlatform, key) -> Registration:
    reg = (Registration().set_issuer(platform.issuer).set_client_id(platform.client_id)
           .set_auth_login_url(platform.auth_login_url)
           .set_auth_token_url(platform.auth_token_url)
           .set_key_set_url(platform.key_set_url)
           .set_tool_private_key(key.private_pem).set_tool_public_key(key.public_pem))
    if platform.auth_audience:
        reg.set_auth_audience(platform.auth_audience)
    return reg


class DatabaseToolConf(ToolConfAbstract):
    """Registrations keyed by (issuer, client id); an issuer may have several client ids."""

    def __init__(self, session):
        super().__init__()
        self.session = session
        self.issuers_relation_types = {}  # per instance: the class attribute is shared

    def platform(self, iss: str, client_id: str | None = None) -> LtiPlatform:
        query = select(LtiPlatform).where(LtiPlatform.issuer == iss)
        if client_id:
            query = query.where(LtiPlatform.client_id == client_id)
        rows = self.session.scalars(query.order_by(LtiPlatform.id)).all()
        if not rows:
            raise LookupError(f"no LTI platform is registered for issuer {iss!r}"
                              + (f" and client id {client_id!r}" if client_id else ""))
        if len(rows) > 1:
            raise LookupError(f"issuer {iss!r} has several registrations; the platform must "
                              "send its client_id")
        return rows[0]

    def check_iss_has_one_client(self, iss):
        return False

    def check_iss_has_many_clients(self, iss):
        return True

    def find_registration_by_issuer(self, iss, *args, **kwargs):
        return registration_for(self.platform(iss), signing_key(self.session))

    def find_registration_by_params(self, iss, client_id, *args, **kwargs):
        return registration_for(self.platform(iss, client_id), signing_key(self.session))

    def find_deployment(self, iss, deployment_id):
        return self._deployment(self.platform(iss), deployment_id)

    def find_deployment_by_params(self, iss, deployment_id, client_id, *args, **kwargs):
        return self._deployment(self.platform(iss, client_id), deployment_id)

    @staticmethod
    def _deployment(platform: LtiPlatform, deployment_id: str):
        # An empty list accepts any deployment of this registration (Moodle and Canvas show
        # the id only after the tool is deployed, so it may be filled in later).
        if platform.deployment_ids and deployment_id not in platform.deployment_ids:
            return None
        return Deployment().set_deployment_id(deployment_id)


class DatabaseLaunchData(LaunchDataStorage):
    """Key-value rows with an expiry, in the request's own session (and transaction): on
    SQLite a second writing session in the same request would wait for the first."""
    DEFAULT_LIFETIME = 86400

    def __init__(self, session):
        super().__init__()
        self.session = session

    def get_session_cookie_name(self):
        return None  # no per-browser cookie: state and nonce are random and single-purpose

    def can_set_keys_expiration(self) -> bool:
        return True

    def get_value(self, key):
        row = self.session.get(LtiLaunchData, self._prepare_key(key))
        if row is None or row.expires_at < utcnow():
            return None
        return row.value

    def set_value(self, key, value, exp=None):
        key = self._prepare_key(key)
        now = utcnow()
        self.session.execute(delete(LtiLaunchData).where(LtiLaunchData.expires_at < now))
        row = self.session.get(LtiLaunchData, key) or LtiLaunchData(key=key)
        row.value = value
        row.expires_at = now + timedelta(seconds=exp or self.DEFAULT_LIFETIME)
        self.session.add(row)
        self.session.flush()

    def check_value(self, key):
        """Whether ``key`` is set, using it up: pylti1p3 checks only nonces this way, and a
        nonce must work once, so a captured launch cannot be posted again."""
        present = self.get_value(key) is not None
        self.session.execute(delete(LtiLaunchData).where(
            LtiLaunchData.key == self._prepare_key(key)))
        return present
