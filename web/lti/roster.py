"""Roster provisioning (LTI NRPS): the LMS course's members become accounts and enrollments.

Members the LMS reports as active are enrolled (staff as instructors); members it reports
as inactive or deleted lose their enrollment in the course. Their submissions stay.
"""
from __future__ import annotations

from dataclasses import dataclass

from pylti1p3.names_roles import NamesRolesProvisioningService
from pylti1p3.service_connector import ServiceConnector
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from ..models import Enrollment, utcnow
from .keys import signing_key
from .models import LtiContext, LtiUser
from .provision import enroll_as, ensure_user, role_from_claims
from .toolconf import http_session, registration_for


class RosterUnavailable(RuntimeError):
    """The platform offered no membership service for this course."""


@dataclass
class RosterResult:
    enrolled: int = 0
    instructors: int = 0
    removed: int = 0

    def describe(self) -> str:
        return (f"{self.enrolled} active members ({self.instructors} staff), "
                f"{self.removed} enrollments removed")


def sync_roster(session: Session, context: LtiContext, *, http=None) -> RosterResult:
    """Read the context's members from the LMS and apply them; the caller commits."""
    if not context.memberships_url:
        name = context.title or context.context_id
        raise RosterUnavailable(f"the LMS sent no membership service URL for course {name!r}; "
                                "enable 'Names and Role Provisioning' for the tool and launch "
                                "it once")
    platform = context.platform
    connector = ServiceConnector(registration_for(platform, signing_key(session)),
                                 http or http_session())
    members = NamesRolesProvisioningService(
        connector, {"context_memberships_url": context.memberships_url}).get_members()
    result = RosterResult()
    for member in members:
        sub = str(member.get("user_id") or "")
        if not sub:
            continue
        role = role_from_claims(member.get("roles") or [])
        if (member.get("status") or "Active") != "Active":
            link = session.scalar(select(LtiUser).where(LtiUser.issuer == platform.issuer,
                                                        LtiUser.sub == sub))
            if link is not None:
                result.removed += session.execute(delete(Enrollment).where(
                    Enrollment.course_id == context.course_id,
                    Enrollment.user_id == link.user_id)).rowcount
            continue
        name = member.get("name") or " ".join(
            p for p in (member.get("given_name"), member.get("family_name")) if p)
        user = ensure_user(session, platform, sub, email=member.get("email"), name=name,
                           role=role, claims=member)
        enroll_as(session, context.course, user, role)
        result.enrolled += 1
        result.instructors += role == "instructor"
    context.roster_synced_at = utcnow()
    session.flush()
    return result
