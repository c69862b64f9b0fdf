"""Who and what an LTI message is about: accounts, enrollments, contexts and placed links.

A platform user (``sub``, unique per issuer) always maps to the same account, whichever
registration or deployment of that LMS launches them. Accounts made here have no
password (they sign in through the LMS) and are never matched to an existing account by
e-mail: an LMS may send any address, and that must not open someone else's account.
"""
from __future__ import annotations

import hashlib

from flask_babel import gettext
from pylti1p3.roles import DesignerRole, TeacherRole, TeachingAssistantRole
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..models import Assignment, Course, Enrollment, User
from ..services.courses import default_course, enroll, find_assignment
from ..services.users import find_user
from .identity import CUSTOM_CLAIM, PLACEHOLDER_DOMAIN, record_link, record_person, record_section
from .models import LtiContext, LtiPlatform, LtiResourceLink, LtiUser

ROLES_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/roles"
CONTEXT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/context"
LINK_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/resource_link"
DEPLOYMENT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/deployment_id"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
DEEP_LINKING_CLAIM = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"
# The custom parameter a deep-linked item carries: which of our assignments it opens.
ASSIGNMENT_PARAM = "attn_grader_assignment"


class LaunchRejected(ValueError):
    """A valid launch this tool cannot serve; the message is shown to the user."""


def role_from_claims(roles: list[str]) -> str:
    """Course staff (instructor, TA, content developer) are instructors here."""
    body = {ROLES_CLAIM: list(roles or [])}
    staff = (TeacherRole(body).check() or TeachingAssistantRole(body).check()
             or DesignerRole(body).check())
    return "instructor" if staff else "student"


def _placeholder_email(platform: LtiPlatform, sub: str) -> str:
    digest = hashlib.sha256(f"{platform.issuer}\n{sub}".encode()).hexdigest()[:24]
    return f"lti-{digest}@{PLACEHOLDER_DOMAIN}"


def ensure_user(session: Session, platform: LtiPlatform, sub: str, *, email: str | None,
                name: str | None, role: str, claims: dict | None = None) -> User:
    """The account of platform user ``sub``; its role only ever goes up to instructor.

    ``claims`` (the launch, or the roster's member) refresh what the LMS says of the person:
    its user id, SIS id, login id and name parts (``identity.record_person``)."""
    if not sub:
        raise LaunchRejected(gettext("the launch names no user (anonymous launches are not supported)"))
    link = session.scalar(select(LtiUser).where(LtiUser.issuer == platform.issuer,
                                                LtiUser.sub == sub))
    if link is None:
        address = (email or "").strip().lower()
        if not address or "@" not in address or find_user(session, address) is not None:
            address = _placeholder_email(platform, sub)
        user = User(email=address, name=(name or "").strip() or address.split("@")[0],
                    role=role, password_hash=None)
        session.add(user)
        session.flush()
        link = LtiUser(issuer=platform.issuer, platform=platform, sub=sub, user=user)
        session.add(link)
        session.flush()
    link.platform = platform
    record_person(link, claims or {})
    user = link.user
    if role == "instructor" and user.role != "instructor":
        user.role = "instructor"
    return user


def ensure_context(session: Session, platform: LtiPlatform, claim: dict | None,
                   nrps: dict | None) -> tuple[Course, LtiContext | None]:
    """The course a launch belongs to (the platform's course, else the default one)."""
    course = platform.course or default_course(session)
    if course is None:
        raise LaunchRejected(gettext("this service has no course yet; an administrator must run "
                                     "`attn-grader serve` once or create one"))
    if not claim or not claim.get("id"):
        return course, None
    context = session.scalar(select(LtiContext).where(LtiContext.platform_id == platform.id,
                                                      LtiContext.context_id == claim["id"]))
    if context is None:
        context = LtiContext(platform=platform, context_id=str(claim["id"]), course=course)
        session.add(context)
    context.title = str(claim.get("title") or claim.get("label") or "")[:255]
    if nrps and nrps.get("context_memberships_url"):
        context.memberships_url = nrps["context_memberships_url"]
    session.flush()
    return context.course, context


def enroll_as(session: Session, course: Course, user: User, role: str) -> Enrollment:
    row = enroll(session, course, user)
    if role == "instructor":
        row.role = "instructor"
    return row


def _assignment_for(session: Session, course: Course, body: dict) -> Assignment | None:
    custom = body.get(CUSTOM_CLAIM) or {}
    ref = custom.get(ASSIGNMENT_PARAM)
    return find_assignment(session, str(ref), course) if ref else None


def ensure_link(session: Session, platform: LtiPlatform, course: Course,
                context: LtiContext | None, body: dict) -> LtiResourceLink:
    """The placed link of a resource launch, mapped to an assignment, with its AGS claim."""
    claim = body.get(LINK_CLAIM) or {}
    if not claim.get("id"):
        raise LaunchRejected(gettext("the launch has no resource link id"))
    link = session.scalar(select(LtiResourceLink).where(
        LtiResourceLink.platform_id == platform.id,
        LtiResourceLink.resource_link_id == claim["id"]))
    assignment = _assignment_for(session, course, body)
    if link is None:
        if assignment is None:
            raise LaunchRejected(gettext(
                "this LMS link is not attached to an assignment of the grader. Add it again "
                "through the LMS's content selection (deep linking), or set the custom "
                "parameter %(param)s=<assignment slug> on the link", param=ASSIGNMENT_PARAM))
        link = LtiResourceLink(platform=platform, resource_link_id=str(claim["id"]),
                               assignment=assignment)
        session.add(link)
    elif assignment is not None and assignment.id != link.assignment_id:
        link.assignment = assignment  # the instructor re-pointed the link's custom parameter
    link.deployment_id = str(body.get(DEPLOYMENT_CLAIM) or "")
    link.context_id = context.id if context else link.context_id
    record_link(link, body)
    ags = body.get(AGS_CLAIM)
    if ags:
        link.ags = {k: ags[k] for k in ("scope", "lineitems", "lineitem") if k in ags}
    session.flush()
    return link


def launch_user(session: Session, platform: LtiPlatform, body: dict):
    """(account, course, context or None, role) of a launch's user (any message type)."""
    role = role_from_claims(body.get(ROLES_CLAIM) or [])
    user = ensure_user(session, platform, str(body.get("sub") or ""), email=body.get("email"),
                       name=body.get("name"), role=role, claims=body)
    course, context = ensure_context(session, platform, body.get(CONTEXT_CLAIM),
                                     body.get(NRPS_CLAIM))
    record_section(enroll_as(session, course, user, role), body)
    return user, course, context, role
