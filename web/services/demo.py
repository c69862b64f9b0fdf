"""The demo that ``make run`` opens: the chapter's course, an instructor and a student."""
from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..models import User
from .courses import ensure_default_course
from .users import add_user

INSTRUCTOR_EMAIL = "instructor@example.com"
STUDENT_EMAIL = "student@example.com"
CREDENTIALS_FILE = "demo-credentials.txt"


@dataclass
class DemoAccounts:
    instructor_email: str
    student_email: str
    password: str

    def describe(self) -> str:
        return (f"Demo accounts (password {self.password}):\n"
                f"  instructor: {self.instructor_email}\n  student:    {self.student_email}")


def seed_demo(session: Session, *, password: str | None = None,
              instructor_email: str = INSTRUCTOR_EMAIL, student_email: str = STUDENT_EMAIL,
              credentials_dir: str | None = None) -> DemoAccounts | None:
    """Seed an empty database; returns the accounts, or None when users already exist.

    The course is always ensured. With ``credentials_dir`` the accounts are written to a
    0600 file there so later starts can print them again (``load_demo_credentials``).
    """
    ensure_default_course(session)
    if session.scalar(select(func.count()).select_from(User)):
        session.commit()
        return None
    password = password or secrets.token_urlsafe(9)
    add_user(session, instructor_email, "instructor", password, name="Demo Instructor")
    add_user(session, student_email, "student", password, name="Demo Student")
    session.commit()
    accounts = DemoAccounts(instructor_email, student_email, password)
    if credentials_dir:
        path = Path(credentials_dir) / CREDENTIALS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{instructor_email}\n{student_email}\n{password}\n")
    return accounts


def load_demo_credentials(credentials_dir: str) -> DemoAccounts | None:
    path = Path(credentials_dir) / CREDENTIALS_FILE
    try:
        instructor, student, password = path.read_text().split()[:3]
    except (OSError, ValueError):
        return None
    return DemoAccounts(instructor, student, password)
