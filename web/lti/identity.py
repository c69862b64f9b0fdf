"""What an LMS tells us about a person and a placed link, kept for its gradebook import.

Canvas's gradebook CSV identifies a student by ``ID`` (Canvas's user id), ``SIS User ID`` or
``SIS Login ID`` and names an assignment column ``Title (assignment id)``; the LTI ``sub`` is
none of these. A launch carries them when the tool's configuration asks for them (Canvas's
variable substitutions, set as custom fields on the developer key; see docs/instructors/lti.md,
"2a. Canvas"); the standard LIS claim carries the SIS id, and the OpenID claims (and the
roster, NRPS) the name parts. A custom field Canvas could not fill arrives as the variable
itself (``$Canvas.user.id``) and is ignored.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..models import Assignment, Course, Enrollment
from .models import LtiResourceLink, LtiUser

# The domain of the stand-in address of an account made from a launch without a usable e-mail.
PLACEHOLDER_DOMAIN = "lti.invalid"
LIS_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/lis"
CUSTOM_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/custom"
# The custom fields the docs (instructors/lti.md) ask Canvas for, and the variables that fill them.
CANVAS_FIELDS = {
    "canvas_user_id": "$Canvas.user.id",
    "canvas_user_login_id": "$Canvas.user.loginId",
    "canvas_user_sis_id": "$Canvas.user.sisSourceId",
    "canvas_section_names": "$com.instructure.User.sectionNames",
    "canvas_assignment_id": "$Canvas.assignment.id",
}


def _value(raw) -> str | None:
    """A claim's text, or None when absent, empty or an unsubstituted ``$Variable``."""
    if raw is None or isinstance(raw, (dict, list)):
        return None
    text = str(raw).strip()
    return text if text and not text.startswith("$") else None


def section_names(raw) -> str | None:
    """Canvas sends its section names as a JSON array (``["Section A","Section B"]``)."""
    if isinstance(raw, list):
        names = [str(n).strip() for n in raw if str(n).strip()]
    else:
        text = _value(raw)
        if text is None:
            return None
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text
        names = [str(n).strip() for n in parsed] if isinstance(parsed, list) else [str(parsed)]
    names = [n for n in names if n]
    return ", ".join(names)[:255] if names else None


def record_person(link: LtiUser, claims: dict) -> None:
    """Keep what a launch (or a roster member) says of the person; silence changes nothing."""
    custom = claims.get(CUSTOM_CLAIM) or {}
    lis = claims.get(LIS_CLAIM) or {}
    found = {
        "lms_user_id": _value(custom.get("canvas_user_id")),
        "login_id": _value(custom.get("canvas_user_login_id")),
        "sis_user_id": _value(custom.get("canvas_user_sis_id")) or _value(lis.get("person_sourcedid"))
        or _value(claims.get("lis_person_sourcedid")),  # NRPS members carry it at the top
        "given_name": _value(claims.get("given_name")),
        "family_name": _value(claims.get("family_name")),
    }
    for field, value in found.items():
        if value is not None:
            limit = LtiUser.__table__.c[field].type.length
            setattr(link, field, value[:limit])


def record_section(enrollment: Enrollment, claims: dict) -> None:
    custom = claims.get(CUSTOM_CLAIM) or {}
    section = section_names(custom.get("canvas_section_names"))
    if section is not None:
        enrollment.section = section


def record_link(link: LtiResourceLink, claims: dict) -> None:
    assignment_id = _value((claims.get(CUSTOM_CLAIM) or {}).get("canvas_assignment_id"))
    if assignment_id is not None:
        link.lms_assignment_id = assignment_id[:64]


@dataclass
class LmsPerson:
    """One student as the LMS knows them (fields None where it never said)."""
    lms_user_id: str | None = None
    sis_user_id: str | None = None
    login_id: str | None = None
    given_name: str | None = None
    family_name: str | None = None
    section: str | None = None


def people(session: Session, course: Course) -> dict[int, LmsPerson]:
    """Each account's LMS identity, by user id; the newest platform link wins a tie."""
    out: dict[int, LmsPerson] = {}
    members = select(LtiUser).join(Enrollment, Enrollment.user_id == LtiUser.user_id) \
        .where(Enrollment.course_id == course.id).order_by(LtiUser.id)
    for row in session.scalars(members):
        person = out.setdefault(row.user_id, LmsPerson())
        for field in ("lms_user_id", "sis_user_id", "login_id", "given_name", "family_name"):
            if getattr(row, field):
                setattr(person, field, getattr(row, field))
    for user_id, section in session.execute(select(Enrollment.user_id, Enrollment.section).where(
            Enrollment.course_id == course.id, Enrollment.section.is_not(None))):
        out.setdefault(user_id, LmsPerson()).section = section
    return out


def assignment_ids(session: Session, course: Course) -> dict[int, str]:
    """The LMS's assignment id of each of the course's assignments placed in it."""
    rows = session.execute(select(LtiResourceLink.assignment_id, LtiResourceLink.lms_assignment_id)
                           .join(Assignment, Assignment.id == LtiResourceLink.assignment_id)
                           .where(Assignment.course_id == course.id,
                                  LtiResourceLink.lms_assignment_id.is_not(None))
                           .order_by(LtiResourceLink.id))  # the newest link wins
    return {assignment: lms_id for assignment, lms_id in rows}
