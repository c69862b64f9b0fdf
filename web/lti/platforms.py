"""Registering LMS platforms (used by the instructor page and ``attn-grader lti``)."""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

from flask import url_for
from flask_babel import gettext
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..models import Course
from .models import LtiPlatform


class RegistrationError(ValueError):
    """A registration that cannot work; the message says which field and why."""


def _check_url(field: str, value: str, allow_http: bool) -> str:
    value = (value or "").strip()
    parsed = urlparse(value)
    schemes = ("https", "http") if allow_http else ("https",)
    if parsed.scheme not in schemes or not parsed.netloc:
        raise RegistrationError(
            f"{field}: {value!r} is not an {'http(s)' if allow_http else 'https'} URL")
    return value


def parse_deployment_ids(text: str | list | None) -> list[str]:
    if isinstance(text, list):
        items = text
    else:
        items = (text or "").replace(",", " ").split()
    return sorted({str(i).strip() for i in items if str(i).strip()})


def add_platform(session: Session, *, name: str = "", issuer: str, client_id: str,
                 auth_login_url: str, auth_token_url: str, key_set_url: str,
                 auth_audience: str | None = None, deployment_ids=None,
                 course: Course | None = None, allow_http: bool = False) -> LtiPlatform:
    """Validate and store a registration. Plain ``http`` URLs only with ``allow_http``
    (loopback tests and a local Moodle); an LMS on the internet must use HTTPS."""
    issuer, client_id = (issuer or "").strip(), (client_id or "").strip()
    if not issuer:
        raise RegistrationError("issuer: required (the platform's 'iss', e.g. "
                                "https://canvas.instructure.com)")
    if not client_id:
        raise RegistrationError("client_id: required (the id the LMS gave this tool)")
    urls = {f: _check_url(f, v, allow_http) for f, v in
            (("auth_login_url", auth_login_url), ("auth_token_url", auth_token_url),
             ("key_set_url", key_set_url))}
    if session.scalar(select(LtiPlatform).where(LtiPlatform.issuer == issuer,
                                                LtiPlatform.client_id == client_id)):
        raise RegistrationError(f"issuer {issuer!r} with client id {client_id!r} is already "
                                "registered")
    platform = LtiPlatform(name=(name or "").strip() or urlparse(issuer).netloc or issuer,
                           issuer=issuer, client_id=client_id,
                           auth_audience=(auth_audience or "").strip() or None,
                           deployment_ids=parse_deployment_ids(deployment_ids),
                           course=course, **urls)
    session.add(platform)
    session.flush()
    return platform


def list_platforms(session: Session) -> list[LtiPlatform]:
    return list(session.scalars(select(LtiPlatform).order_by(LtiPlatform.id)))


def find_platform(session: Session, ref: str | int) -> LtiPlatform | None:
    """By id, or by name."""
    if str(ref).isdigit():
        return session.get(LtiPlatform, int(ref))
    return session.scalar(select(LtiPlatform).where(LtiPlatform.name == str(ref)))


def set_deployments(session: Session, platform: LtiPlatform, deployment_ids) -> None:
    platform.deployment_ids = parse_deployment_ids(deployment_ids)
    session.flush()


def remove_platform(session: Session, platform: LtiPlatform) -> None:
    session.delete(platform)
    session.flush()


@dataclass(frozen=True)
class ToolUrls:
    """What an LMS administrator types into the LMS's tool registration form."""
    login: str
    launch: str
    deep_link: str
    jwks: str

    def rows(self) -> list[tuple[str, str]]:
        return [(gettext("OIDC login / initiation URL"), self.login),
                (gettext("Target link / redirect URI (launch)"), self.launch),
                (gettext("Deep linking (content selection) URL"), self.deep_link),
                (gettext("Public keyset (JWKS) URL"), self.jwks)]


def tool_urls(base_url: str | None = None) -> ToolUrls:
    """The tool's URLs, from ``base_url`` (e.g. https://grader.example.edu) or the request."""
    if base_url:
        base = base_url.rstrip("/")
        return ToolUrls(login=f"{base}/lti/login", launch=f"{base}/lti/launch",
                        deep_link=f"{base}/lti/launch", jwks=f"{base}/lti/jwks")
    return ToolUrls(login=url_for("lti.login", _external=True),
                    launch=url_for("lti.launch", _external=True),
                    deep_link=url_for("lti.launch", _external=True),
                    jwks=url_for("lti.jwks", _external=True))
