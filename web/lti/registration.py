"""LTI Advantage Dynamic Registration (IMS, 1.0): the LMS administrator pastes one URL.

An operator makes a registration URL (the LTI page, or ``attn-grader lti registration-url``):
``/lti/register/<token>``, the token signed with the app's secret, valid for a week and for
one registration, optionally naming the course its launches go to. The LMS opens it with
``openid_configuration`` (the platform's configuration URL) and ``registration_token``; the
tool then

1. reads the platform's OpenID configuration (its issuer must be on the same domain as the
   configuration URL, so a configuration cannot speak for another LMS),
2. posts its own configuration to the platform's ``registration_endpoint`` with the
   registration token as bearer (login, launch and deep-linking URLs, JWKS, the AGS and
   NRPS scopes, the claims it wants),
3. stores the platform from the two (issuer, client id, deployment id, endpoints), and
4. answers a page that tells the LMS's window to close (``org.imsglobal.lti.close``).

A link without a valid token is refused: otherwise anyone could register their own "LMS"
and launch into the grader as course staff.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlparse

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from sqlalchemy import select

from ..models import Course
from .platforms import RegistrationError, add_platform, tool_urls
from .toolconf import DatabaseLaunchData, http_session

TOOL_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-tool-configuration"
PLATFORM_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-platform-configuration"
SCOPES = ("https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
          "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly",
          "https://purl.imsglobal.org/spec/lti-ags/scope/score",
          "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly")
CLAIMS = ("iss", "sub", "name", "given_name", "family_name", "email")
LINK_LIFETIME = 7 * 86400
_SALT = "attn-grader.lti-registration"


class RegistrationRefused(ValueError):
    """Dynamic registration cannot go on; the message says why, for the LMS administrator."""


def _serializer(secret: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret, salt=_SALT)


def registration_token(secret: str, course_slug: str | None = None) -> str:
    import secrets
    return _serializer(secret).dumps({"n": secrets.token_urlsafe(12), "course": course_slug})


def registration_url(base_url: str, secret: str, course_slug: str | None = None) -> str:
    return f"{base_url.rstrip('/')}/lti/register/{registration_token(secret, course_slug)}"


def _used_key(nonce: str) -> str:
    return f"attn-registration-used-{nonce}"


def read_token(session, secret: str, token: str) -> dict:
    try:
        data = _serializer(secret).loads(token, max_age=LINK_LIFETIME)
    except SignatureExpired:
        raise RegistrationRefused("this registration URL has expired; make a new one on the "
                                  "grader's LTI page") from None
    except BadSignature:
        raise RegistrationRefused("this is not a registration URL of this grader") from None
    if DatabaseLaunchData(session).get_value(_used_key(data["n"])) is not None:
        raise RegistrationRefused("this registration URL was already used; make a new one on "
                                  "the grader's LTI page")
    return data


def _same_domain(config_url: str, issuer: str) -> bool:
    a, b = urlparse(config_url).hostname or "", urlparse(issuer).hostname or ""
    try:
        ipaddress.ip_address(a)
        return a == b
    except ValueError:
        # the same host, or the same registrable domain (Canvas: school.instructure.com's
        # configuration names https://canvas.instructure.com)
        return a == b or ("." in a and a.split(".")[-2:] == b.split(".")[-2:])


def tool_configuration(base_url: str, name: str = "attn-grader") -> dict:
    """What the tool tells the platform about itself (the registration request's body)."""
    urls = tool_urls(base_url)
    host = urlparse(urls.launch).netloc
    return {
        "application_type": "web",
        "response_types": ["id_token"],
        "grant_types": ["implicit", "client_credentials"],
        "initiate_login_uri": urls.login,
        "redirect_uris": [urls.launch],
        "client_name": name,
        "jwks_uri": urls.jwks,
        "token_endpoint_auth_method": "private_key_jwt",
        "scope": " ".join(SCOPES),
        TOOL_CONFIGURATION: {
            "domain": host,
            "target_link_uri": urls.launch,
            "claims": list(CLAIMS),
            "description": "Automated grading of attention (PyTorch) assignments and quizzes",
            "messages": [{"type": "LtiDeepLinkingRequest", "target_link_uri": urls.deep_link,
                          "label": name}],
        },
    }


@dataclass
class Registered:
    platform: object
    product: str


def register(session, *, secret: str, token: str, openid_configuration: str,
             registration_token_value: str | None, base_url: str,
             allow_http: bool = False) -> Registered:
    """The whole exchange; the platform is added to ``session`` (the caller commits)."""
    link = read_token(session, secret, token)
    schemes = ("https", "http") if allow_http else ("https",)
    if urlparse(openid_configuration or "").scheme not in schemes:
        raise RegistrationRefused(f"openid_configuration: {openid_configuration!r} is not an "
                                  f"{'http(s)' if allow_http else 'https'} URL")
    http = http_session()
    try:
        answer = http.get(openid_configuration, headers=_bearer(registration_token_value))
        answer.raise_for_status()
        config = answer.json()
    except Exception as exc:  # noqa: BLE001 - the LMS's answer, whatever it was, is refused
        raise RegistrationRefused(f"could not read the LMS's configuration: {exc}") from None
    issuer = str(config.get("issuer") or "")
    if not issuer or not _same_domain(openid_configuration, issuer):
        raise RegistrationRefused(f"the LMS's configuration names issuer {issuer!r}, not on "
                                  "the domain of its configuration URL")
    missing = [k for k in ("authorization_endpoint", "token_endpoint", "jwks_uri",
                           "registration_endpoint") if not config.get(k)]
    if missing:
        raise RegistrationRefused("the LMS's configuration lacks " + ", ".join(missing))
    try:
        answer = http.post(config["registration_endpoint"], json=tool_configuration(base_url),
                           headers=_bearer(registration_token_value))
        answer.raise_for_status()
        client = answer.json()
    except Exception as exc:  # noqa: BLE001
        detail = getattr(getattr(exc, "response", None), "text", "")[:300]
        raise RegistrationRefused(f"the LMS refused the registration: {exc} {detail}".strip()) \
            from None
    client_id = str(client.get("client_id") or "")
    deployment = (client.get(TOOL_CONFIGURATION) or {}).get("deployment_id")
    product = ((config.get(PLATFORM_CONFIGURATION) or {}).get("product_family_code")
               or "LMS")
    course = None
    if link.get("course"):
        course = session.scalar(select(Course).where(Course.slug == link["course"]))
    try:
        platform = add_platform(
            session, name=f"{product} ({urlparse(issuer).netloc})", issuer=issuer,
            client_id=client_id, auth_login_url=config["authorization_endpoint"],
            auth_token_url=config["token_endpoint"], key_set_url=config["jwks_uri"],
            auth_audience=config.get("authorization_server"),
            deployment_ids=[str(deployment)] if deployment else None, course=course,
            allow_http=allow_http)
    except RegistrationError as exc:
        raise RegistrationRefused(str(exc)) from None
    DatabaseLaunchData(session).set_value(_used_key(link["n"]), True, exp=LINK_LIFETIME)
    return Registered(platform=platform, product=product)


def _bearer(token: str | None) -> dict:
    return {"Authorization": f"Bearer {token}"} if token else {}
