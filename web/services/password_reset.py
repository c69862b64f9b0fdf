"""Password reset by e-mail: a signed, expiring, single-use link, sent over SMTP.

The link carries an itsdangerous token signed with the app's secret key: the user's id and a
fingerprint of their current password hash. It expires after ``PASSWORD_RESET_SECONDS``, and it
works once: setting the new password changes the hash, so the fingerprint no longer matches
(the same holds for every other link sent before). Nothing is stored.

Asking for a link never tells whether the address has an account: the answer is the same, and
the mail goes out from a background thread, so the response takes as long either way.
"""
from __future__ import annotations

import hashlib
import logging
import smtplib
import ssl
from concurrent.futures import ThreadPoolExecutor
from email.message import EmailMessage

from flask_babel import force_locale, gettext
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from sqlalchemy.orm import Session

from ..models import User
from .users import find_user, set_password

log = logging.getLogger(__name__)
SALT = "attn-grader password reset"
_mailer = ThreadPoolExecutor(max_workers=2, thread_name_prefix="mail")


class ResetLinkInvalid(Exception):
    """The link is expired, tampered with, already used, or for an account that is gone."""


def _fingerprint(user: User) -> str:
    return hashlib.sha256((user.password_hash or "no password").encode()).hexdigest()[:20]


def _serializer(secret_key: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret_key, salt=SALT)


def make_token(user: User, secret_key: str) -> str:
    return _serializer(secret_key).dumps({"user": user.id, "password": _fingerprint(user)})


def user_for_token(session: Session, token: str, secret_key: str, max_age: int) -> User:
    """The user whose password ``token`` may reset; ``ResetLinkInvalid`` says why not."""
    try:
        data = _serializer(secret_key).loads(token, max_age=max_age)
    except SignatureExpired:
        raise ResetLinkInvalid(gettext("this reset link has expired; ask for a new one")) from None
    except BadSignature:
        raise ResetLinkInvalid(gettext("this reset link is not valid; ask for a new one")) from None
    user = session.get(User, data.get("user")) if isinstance(data, dict) else None
    if user is None or not user.is_active or data.get("password") != _fingerprint(user):
        raise ResetLinkInvalid(gettext("this reset link was already used or is no longer valid; "
                                       "ask for a new one"))
    return user


def reset_password(session: Session, token: str, password: str, secret_key: str, max_age: int) -> User:
    """Set the new password (ValueError names policy problems); the link is spent by it."""
    user = user_for_token(session, token, secret_key, max_age)
    set_password(user, password)
    return user


def mail_configured(config: dict) -> bool:
    return bool(config.get("SMTP_HOST"))


def send_mail(config: dict, to: str, subject: str, body: str) -> None:
    """Send one plain-text message with the SMTP settings in ``config`` (raises on failure)."""
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = config["MAIL_FROM"], to, subject
    message.set_content(body)
    host, port, timeout = config["SMTP_HOST"], config["SMTP_PORT"], config["SMTP_TIMEOUT"]
    security = config["SMTP_SECURITY"]
    # certificate and host name verified, against SMTP_CA_FILE or the system's CAs
    context = ssl.create_default_context(cafile=config.get("SMTP_CA_FILE") or None)
    if security == "ssl":
        smtp = smtplib.SMTP_SSL(host, port, timeout=timeout, context=context)
    else:
        smtp = smtplib.SMTP(host, port, timeout=timeout)
    with smtp:
        if security == "starttls":
            smtp.starttls(context=context)
        if config.get("SMTP_USERNAME"):
            smtp.login(config["SMTP_USERNAME"], config.get("SMTP_PASSWORD") or "")
        smtp.send_message(message)


def _send_logged(config: dict, to: str, subject: str, body: str) -> None:
    try:
        send_mail(config, to, subject, body)
        log.info("sent a password-reset e-mail", extra={"mail_to_domain": to.rpartition("@")[2]})
    except Exception:  # the person sees the same page either way; the operator sees the log
        log.exception("could not send a password-reset e-mail through %s:%s",
                      config.get("SMTP_HOST"), config.get("SMTP_PORT"))


def request_reset(session: Session, email: str, config: dict, link_for) -> object | None:
    """Mail a reset link to ``email`` if it is an active account; ``link_for(token)`` makes the
    URL. Returns the background send (a Future) or None, which callers must not show anyone."""
    user = find_user(session, email)
    if user is None or not user.is_active or not mail_configured(config):
        return None
    link = link_for(make_token(user, config["SECRET_KEY"]))
    with force_locale(user.locale or "en"):  # the account's language, not the asker's browser's
        body = gettext(
            "Hello %(name)s,\n\n"
            "someone (we hope you) asked to reset the password of your attn-grader account.\n"
            "Open this link within %(minutes)s minutes to choose a new password:\n\n"
            "%(link)s\n\n"
            "The link works once. If you did not ask for it, ignore this message: your password "
            "stays as it is.\n", name=user.name, minutes=config["PASSWORD_RESET_SECONDS"] // 60,
            link=link)
        subject = gettext("Reset your attn-grader password")
    return _mailer.submit(_send_logged, dict(config), user.email, subject, body)
