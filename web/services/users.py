"""Creating and finding users."""
from __future__ import annotations

import re

from flask_babel import gettext
from sqlalchemy import select
from sqlalchemy.orm import Session

from ..auth import hash_password, normalize_email
from ..models import ROLES, User
from .courses import default_course, enroll

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")


def find_user(session: Session, email: str) -> User | None:
    return session.scalar(select(User).where(User.email == normalize_email(email)))


def add_user(session: Session, email: str, role: str = "student", password: str | None = None,
             name: str = "") -> User:
    """Create a user (enrolled in the default course if there is one); ValueError if invalid."""
    email = normalize_email(email)
    if not _EMAIL.match(email):
        raise ValueError(gettext("not an email address: %(email)s", email=repr(email)))
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
    if find_user(session, email) is not None:
        raise ValueError(gettext("a user with email %(email)s already exists", email=email))
    user = User(email=email, role=role, name=name or email.split("@")[0],
                password_hash=hash_password(password, email) if password else None)
    session.add(user)
    session.flush()
    course = default_course(session)
    if course is not None:
        enroll(session, course, user)
    return user


def set_password(user: User, password: str) -> None:
    user.password_hash = hash_password(password, user.email)
