"""The tool's signing key pair: generated once, stored in the database, published as a JWKS.

Platforms verify what the tool signs (service token requests, deep linking responses)
against the keys at ``/lti/jwks``. ``rotate_key`` adds a new active key and keeps the old
ones published (inactive), so tokens signed just before the rotation still verify.
"""
from __future__ import annotations

import json

from jwcrypto.jwk import JWK
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from ..db import write_session
from .models import LtiKey

KEY_BITS = 2048  # RSA 2048 with RS256: what LTI 1.3 (IMS Security Framework) requires


def _new_key() -> LtiKey:
    jwk = JWK.generate(kty="RSA", size=KEY_BITS)
    return LtiKey(kid=jwk.thumbprint(),
                  private_pem=jwk.export_to_pem(private_key=True, password=None).decode(),
                  public_pem=jwk.export_to_pem().decode(), active=True)


def _newest_active(session: Session) -> LtiKey | None:
    return session.scalar(select(LtiKey).where(LtiKey.active.is_(True))
                          .order_by(LtiKey.id.desc()).limit(1))


def ensure_signing_key(engine: Engine) -> None:
    """Make the first key when the app starts, in a transaction of its own, so no page has to.

    A page's transaction has usually read already (the signed-in user), and SQLite will not
    turn such a read into a write once another process (a grading worker) has written since:
    "database is locked" at once, whatever the busy timeout (seen on ``/instructor/lti``).
    The write lock taken at BEGIN makes a second process starting at the same time find the
    first one's key. (Two PostgreSQL processes may each add one: both are published, the
    newer signs.)
    """
    with Session(bind=engine) as session:
        if _newest_active(session) is not None:
            return
    with write_session(engine) as session:
        if _newest_active(session) is None:
            session.add(_new_key())


def signing_key(session: Session) -> LtiKey:
    """The newest active key; made in ``session`` where no app made one at its start."""
    key = _newest_active(session)
    if key is None:
        key = _new_key()
        session.add(key)
        session.flush()
    return key


def rotate_key(session: Session) -> LtiKey:
    """A new signing key; older keys stay in the JWKS but no longer sign."""
    for old in session.scalars(select(LtiKey).where(LtiKey.active.is_(True))):
        old.active = False
    key = _new_key()
    session.add(key)
    session.flush()
    return key


def public_jwk(key: LtiKey) -> dict:
    jwk = json.loads(JWK.from_pem(key.public_pem.encode()).export_public())
    jwk.update(kid=key.kid, alg="RS256", use="sig")
    return jwk


def jwks(session: Session) -> dict:
    """Every stored public key, the signing one first (what ``/lti/jwks`` serves)."""
    signing_key(session)
    keys = session.scalars(select(LtiKey).order_by(LtiKey.active.desc(), LtiKey.id.desc()))
    return {"keys": [public_jwk(k) for k in keys]}
