"""Passwords (argon2id) and API tokens (random, stored as SHA-256).

Tokens are long random strings, so a fast hash is enough to store them: nobody can
brute-force 256 bits, and lookups by hash stay an indexed equality. Passwords are chosen by
people, so they get argon2id with argon2-cffi's defaults (m=64 MiB, t=3, p=4).
"""
from __future__ import annotations

import hashlib
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import select
from sqlalchemy.orm import Session, joinedload

from .models import ApiToken, User, utcnow
from .security import MIN_PASSWORD_LENGTH

TOKEN_PREFIX = "agt_"
_hasher = PasswordHasher()


def hash_password(password: str, email: str | None = None) -> str:
    """The argon2id hash of a new password; ValueError naming every policy problem."""
    from .security import check_password  # length, common passwords, not the email

    check_password(password, email)
    return _hasher.hash(password)


def verify_password(user: User, password: str) -> bool:
    """True when ``password`` is the user's; upgrades an outdated hash in place."""
    if not user.password_hash:
        return False
    try:
        _hasher.verify(user.password_hash, password)
    except (VerificationError, InvalidHashError):
        return False
    if _hasher.check_needs_rehash(user.password_hash):
        user.password_hash = _hasher.hash(password)
    return True


def authenticate(session: Session, email: str, password: str) -> User | None:
    """The active user with this email and password, or None (same answer for both errors)."""
    user = session.scalar(select(User).where(User.email == normalize_email(email)))
    if user is None:
        _hasher.hash(password or "x" * MIN_PASSWORD_LENGTH)  # same cost as a real check
        return None
    return user if user.is_active and verify_password(user, password) else None


def normalize_email(email: str) -> str:
    return email.strip().lower()


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue_token(session: Session, user: User, label: str = "") -> str:
    """Create an API token for ``user`` and return its plaintext (shown once, never stored)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiToken(user=user, token_hash=hash_token(token), prefix=token[:10], label=label))
    session.flush()
    return token


def user_for_token(session: Session, token: str) -> User | None:
    """The active user owning an unrevoked ``token``, or None."""
    if not token or not token.startswith(TOKEN_PREFIX):
        return None
    # The owner in the same statement: every API request starts here.
    row = session.scalar(select(ApiToken).options(joinedload(ApiToken.user))
                         .where(ApiToken.token_hash == hash_token(token)))
    if row is None or row.revoked_at is not None or not row.user.is_active:
        return None
    return row.user


def revoke_tokens(session: Session, user: User) -> int:
    """Revoke every token of ``user``; returns how many were live."""
    live = [t for t in user.tokens if t.revoked_at is None]
    for token in live:
        token.revoked_at = utcnow()
    return len(live)
