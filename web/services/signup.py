"""Who may sign up: the site's sign-up mode, its e-mail domains, and invitations.

Instructors choose the mode (``SignupSettings``): open, domain (addresses in the listed domains,
or anyone with an invitation), invite (invitation only) or closed. An invitation is a random
code, stored as its SHA-256 like an API token; its link is shown once. Using one counts with a
conditional UPDATE, so two people racing for the last use cannot both get it.
"""
from __future__ import annotations

import hashlib
import re
import secrets
from datetime import datetime, timedelta

from flask_babel import gettext
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ..auth import normalize_email
from ..models import SIGNUP_MODES, Invitation, SignupSettings, User, utcnow

_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
INVITE_DAYS = 14


class SignupRefused(Exception):
    """Sign-up is not allowed for this address or code; the message says what would allow it."""


def settings(session: Session) -> SignupSettings:
    """The site's sign-up settings (an unsaved default 'open' row before anyone changed them)."""
    return session.get(SignupSettings, 1) or SignupSettings(id=1, mode="open", allowed_domains="")


def parse_domains(text: str) -> list[str]:
    """'example.edu, @Dept.Example.edu' -> ['example.edu', 'dept.example.edu']; ValueError if bad."""
    domains = []
    for raw in re.split(r"[\s,;]+", text or ""):
        domain = raw.strip().lower().lstrip("@")
        if not domain:
            continue
        if not _DOMAIN.match(domain):
            raise ValueError(f"not an e-mail domain: {raw!r} (write it like example.edu)")
        if domain not in domains:
            domains.append(domain)
    return domains


def update_settings(session: Session, editor: User, mode: str, domains_text: str = "") -> SignupSettings:
    if mode not in SIGNUP_MODES:
        raise ValueError(f"unknown sign-up mode {mode!r}: use one of {', '.join(SIGNUP_MODES)}")
    domains = parse_domains(domains_text)
    if mode == "domain" and not domains:
        raise ValueError("list at least one e-mail domain to limit sign-up to")
    row = session.get(SignupSettings, 1) or SignupSettings(id=1)
    row.mode, row.allowed_domains = mode, " ".join(domains)
    row.updated_at, row.updated_by_id = utcnow(), editor.id
    session.add(row)
    session.flush()
    return row


def domain_allowed(row: SignupSettings, email: str) -> bool:
    domain = normalize_email(email).rpartition("@")[2]
    return any(domain == d or domain.endswith("." + d) for d in row.allowed_domains.split())


def _hash(code: str) -> str:
    return hashlib.sha256(code.strip().encode()).hexdigest()


def create_invitation(session: Session, creator: User, *, email: str | None = None, max_uses: int = 1,
                      days: int = INVITE_DAYS, note: str = "", now: datetime | None = None
                      ) -> tuple[Invitation, str]:
    """A new invitation and its code (shown once); ``email`` binds it to one address."""
    if max_uses < 1:
        raise ValueError("an invitation must allow at least one sign-up")
    if days < 1:
        raise ValueError("an invitation must be valid for at least one day")
    code = secrets.token_urlsafe(18)
    invitation = Invitation(code_hash=_hash(code), prefix=code[:6], max_uses=max_uses, uses=0,
                            email=normalize_email(email) if email else None, note=note[:200],
                            expires_at=(now or utcnow()) + timedelta(days=days),
                            created_by_id=creator.id, created_at=now or utcnow())
    session.add(invitation)
    session.flush()
    return invitation, code


def invitation_problem(invitation: Invitation | None, email: str, now: datetime) -> str | None:
    if invitation is None:
        return gettext("this invitation link is not valid; ask your instructor for a new one")
    if invitation.revoked_at is not None:
        return gettext("this invitation was withdrawn; ask your instructor for a new one")
    if invitation.expires_at and now > invitation.expires_at:
        return gettext("this invitation has expired; ask your instructor for a new one")
    if invitation.uses >= invitation.max_uses:
        return gettext("this invitation has been used up; ask your instructor for a new one")
    if invitation.email and invitation.email != normalize_email(email):
        return gettext("this invitation is for another e-mail address")
    return None


def find_invitation(session: Session, code: str | None) -> Invitation | None:
    return session.scalar(select(Invitation).where(Invitation.code_hash == _hash(code))) if code else None


def admit(session: Session, email: str, code: str | None, now: datetime | None = None) -> Invitation | None:
    """Check that ``email`` may sign up now (with invitation ``code``, if any) and use up the
    invitation; raises ``SignupRefused``. Returns the invitation used, or None."""
    now = now or utcnow()
    row = settings(session)
    if row.mode == "closed":
        raise SignupRefused(gettext("sign-up is closed on this site; ask your instructor for an account"))
    if row.mode == "open":  # an invitation link followed on an open site needs no checking
        return None
    if row.mode == "domain" and domain_allowed(row, email):
        return None  # an invitation they may also hold is kept for someone who needs it
    if not code and row.mode == "domain":
        raise SignupRefused(gettext("sign-up is limited to addresses at %(domains)s; use that address, "
                                    "or ask your instructor for an invitation",
                                    domains=", ".join(row.allowed_domains.split())))
    if not code:
        raise SignupRefused(gettext("sign-up needs an invitation: open the invitation link your "
                                    "instructor sent you"))
    invitation = find_invitation(session, code)
    problem = invitation_problem(invitation, email, now)
    if problem:
        raise SignupRefused(problem)
    used = session.execute(update(Invitation).where(Invitation.id == invitation.id,
                                                    Invitation.uses < Invitation.max_uses)
                           .values(uses=Invitation.uses + 1))
    if used.rowcount != 1:
        raise SignupRefused(gettext("this invitation has been used up; ask your instructor for a new one"))
    return invitation


def list_invitations(session: Session) -> list[Invitation]:
    return list(session.scalars(select(Invitation).order_by(Invitation.id.desc()).limit(200)))


def revoke_invitation(session: Session, invitation_id: int, now: datetime | None = None) -> bool:
    invitation = session.get(Invitation, invitation_id)
    if invitation is None or invitation.revoked_at is not None:
        return False
    invitation.revoked_at = now or utcnow()
    return True
