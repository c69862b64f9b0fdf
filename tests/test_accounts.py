"""Accounts: password reset by e-mail through a real SMTP server on loopback (aiosmtpd), and
sign-up that an instructor opens, closes, limits to e-mail domains or to invitations."""
from __future__ import annotations

import email
import email.policy
import re
import threading
import time
from datetime import timedelta

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult
from sqlalchemy import select

from pages_support import PASSWORD, db_session, make_env, sign_in
from service_support import free_port, wait_until
from web.models import Invitation, User, utcnow

NEW_PASSWORD = "a brand new passphrase 7"


class Mailbox:
    """An aiosmtpd handler that keeps every message it is given."""

    def __init__(self):
        self.messages, self.lock = [], threading.Lock()

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            message = email.message_from_bytes(envelope.content, policy=email.policy.default)
            self.messages.append({"to": list(envelope.rcpt_tos), "from": envelope.mail_from,
                                  "subject": message["Subject"], "text": message.get_content(),
                                  "login": session.authenticated and session.auth_data})
        return "250 OK"


def _authenticator(server, session, envelope, mechanism, auth_data):
    ok = auth_data.login == b"grader" and auth_data.password == b"mail secret"
    return AuthResult(success=ok, handled=True, auth_data=auth_data.login if ok else None)


@pytest.fixture
def smtp():
    mailbox = Mailbox()
    controller = Controller(mailbox, hostname="127.0.0.1", port=free_port(), authenticator=_authenticator,
                            auth_require_tls=False)  # loopback only: the test has no certificate
    controller.start()
    mailbox.port = controller.port
    yield mailbox
    controller.stop()


@pytest.fixture
def site(tmp_path, smtp):
    from web.db import dispose_engines

    env = make_env(tmp_path, SMTP_HOST="127.0.0.1", SMTP_PORT=smtp.port, SMTP_SECURITY="none",
                   SMTP_USERNAME="grader", SMTP_PASSWORD="mail secret",
                   MAIL_FROM="Course grader <grader@example.org>", PASSWORD_RESET_SECONDS=600)
    env.smtp = smtp
    yield env
    dispose_engines()


def _reset_link(message: str) -> str:
    return re.search(r"http://localhost(/reset-password/\S+)", message).group(1)


# ---- password reset ---------------------------------------------------------------------------

def test_a_reset_link_arrives_by_smtp_and_works_once(site):
    client = site.app.test_client()
    page = client.get("/forgot-password").get_data(as_text=True)
    assert 'name="email"' in page
    answer = client.post("/forgot-password", data={"email": "Ada@Example.org"}, follow_redirects=True)
    assert "If that address has an account here, a reset link is on its way" in answer.get_data(as_text=True)
    wait_until(lambda: site.smtp.messages, timeout=20, what="the reset e-mail")
    mail = site.smtp.messages[0]
    assert mail["to"] == ["ada@example.org"] and mail["from"] == "grader@example.org"
    assert mail["login"] == b"grader"  # the SMTP_USERNAME/PASSWORD login was used
    assert mail["subject"] == "Reset your attn-grader password" and "within 10 minutes" in mail["text"]
    link = _reset_link(mail["text"])

    form = client.get(link).get_data(as_text=True)
    assert "Choose a new password" in form and "ada@example.org" in form
    weak = client.post(link, data={"password": "password", "confirm": "password"}).get_data(as_text=True)
    assert "password not accepted" in weak  # the password policy still applies
    done = client.post(link, data={"password": NEW_PASSWORD, "confirm": NEW_PASSWORD}, follow_redirects=True)
    assert "Your password is changed" in done.get_data(as_text=True)
    assert sign_in(site.app.test_client(), "ada@example.org", NEW_PASSWORD).status_code == 302
    assert sign_in(site.app.test_client(), "ada@example.org", PASSWORD).status_code == 200  # the old one is gone

    again = client.get(link, follow_redirects=True).get_data(as_text=True)  # single use
    assert "already used or is no longer valid" in again
    reuse = client.post(link, data={"password": "yet another passphrase 9", "confirm": "yet another passphrase 9"},
                        follow_redirects=True)
    assert "already used or is no longer valid" in reuse.get_data(as_text=True)


def test_the_reset_mail_is_in_the_accounts_language_and_the_pages_in_the_browsers(site):
    from web.services.users import find_user
    with db_session(site) as session:
        find_user(session, "ada@example.org").locale = "ru"
        session.commit()
    client = site.app.test_client()
    answer = client.post("/forgot-password", data={"email": "ada@example.org"}, follow_redirects=True,
                         headers={"Accept-Language": "zh"}).get_data(as_text=True)
    assert "如果该地址在这里有账户" in answer  # the asker's page: the browser's language
    wait_until(lambda: site.smtp.messages, timeout=20, what="the reset e-mail")
    mail = site.smtp.messages[0]
    assert mail["subject"] == "Сброс пароля attn-grader"  # the account's language
    assert "в течение 10 минут" in mail["text"]
    form = client.get(_reset_link(mail["text"]), headers={"Accept-Language": "zh"}).get_data(as_text=True)
    assert "设置新密码" in form
    weak = client.post(_reset_link(mail["text"]), data={"password": "password", "confirm": "password"},
                       headers={"Accept-Language": "zh"}).get_data(as_text=True)
    assert "密码未被接受" in weak and "这是最常见的密码之一" in weak


def test_unknown_addresses_get_the_same_answer_and_no_mail(site):
    client = site.app.test_client()
    known = client.post("/forgot-password", data={"email": "bob@example.org"}, follow_redirects=True)
    unknown = client.post("/forgot-password", data={"email": "nobody@example.org"}, follow_redirects=True)
    assert known.status_code == unknown.status_code == 200

    def flashes(response):
        return re.findall(r'<p class="flash[^"]*" role="status">(.*?)</p>', response.get_data(as_text=True))
    assert flashes(known) == flashes(unknown) and flashes(known)
    wait_until(lambda: site.smtp.messages, timeout=20, what="bob's reset e-mail")
    time.sleep(0.5)  # give a (wrong) second message the time to arrive
    assert [m["to"] for m in site.smtp.messages] == [["bob@example.org"]]


def test_tampered_and_expired_links_are_refused(site):
    from web.services import password_reset

    with site.app.app_context():
        from web.db import session_factory
        with session_factory(site.engine)() as session:
            ada = session.scalar(select(User).where(User.email == "ada@example.org"))
            token = password_reset.make_token(ada, site.config["SECRET_KEY"])
            with pytest.raises(password_reset.ResetLinkInvalid, match="expired"):
                password_reset.user_for_token(session, token, site.config["SECRET_KEY"], max_age=-1)
            with pytest.raises(password_reset.ResetLinkInvalid, match="not valid"):
                password_reset.user_for_token(session, token, "another secret", max_age=600)
    client = site.app.test_client()
    page = client.get(f"/reset-password/{token[:-3]}xyz", follow_redirects=True).get_data(as_text=True)
    assert "This reset link is not valid" in page and "Send me a reset link" in page


def test_without_smtp_the_page_says_to_ask_the_instructor(tmp_path):
    env = make_env(tmp_path)
    client = env.app.test_client()
    assert 'id="no-mail"' in client.get("/forgot-password").get_data(as_text=True)
    assert "Forgot your password?" in client.get("/sign-in").get_data(as_text=True)


def test_a_bad_smtp_security_setting_is_named():
    from web.config import load_config

    with pytest.raises(ValueError, match="ATTN_GRADER_SMTP_SECURITY='tls': expected starttls, ssl or none"):
        load_config({"SMTP_SECURITY": "tls", "SECRET_KEY": "x", "DATABASE_URL": "sqlite://"}, environ={})


@pytest.fixture
def certificate(tmp_path):
    """A self-signed certificate for 127.0.0.1 (openssl), as (cert, key) paths."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (needed to make the test server's certificate)")
    cert, key = tmp_path / "smtp.crt", tmp_path / "smtp.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True, timeout=60)
    return cert, key


def test_starttls_is_used_and_the_certificate_verified(certificate):
    import ssl

    from web.config import load_config
    from web.services.password_reset import send_mail

    cert, key = certificate
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    mailbox = Mailbox()
    controller = Controller(mailbox, hostname="127.0.0.1", port=free_port(), tls_context=server_tls,
                            require_starttls=True, authenticator=_authenticator)
    controller.start()
    try:
        config = load_config({"SECRET_KEY": "x", "DATABASE_URL": "sqlite://", "SMTP_HOST": "127.0.0.1",
                              "SMTP_PORT": controller.port, "SMTP_SECURITY": "starttls",
                              "SMTP_USERNAME": "grader", "SMTP_PASSWORD": "mail secret",
                              "SMTP_CA_FILE": str(cert)}, environ={})
        send_mail(config, "ada@example.org", "over TLS", "hello")
        assert [(m["to"], m["subject"], m["login"]) for m in mailbox.messages] == \
            [(["ada@example.org"], "over TLS", b"grader")]
        with pytest.raises(ssl.SSLCertVerificationError):  # a certificate no CA vouches for
            send_mail({**config, "SMTP_CA_FILE": None}, "ada@example.org", "not sent", "hello")
        assert len(mailbox.messages) == 1
    finally:
        controller.stop()


# ---- sign-up policy ---------------------------------------------------------------------------

def _instructor(env):
    client = env.app.test_client()
    assert sign_in(client, "prof@example.org").status_code == 302
    return client


def _sign_up(env, email, invite=None):
    data = {"name": "New Student", "email": email, "password": NEW_PASSWORD, "confirm": NEW_PASSWORD}
    if invite is not None:
        data["invite"] = invite
    return env.app.test_client().post("/sign-up", data=data, follow_redirects=True)


def _exists(env, email) -> bool:
    from web.db import session_factory
    with session_factory(env.engine)() as session:
        return session.scalar(select(User).where(User.email == email)) is not None


def test_instructor_closes_sign_up_and_limits_it_to_a_domain(site):
    prof = _instructor(site)
    assert "Sign-up" in prof.get("/instructor/").get_data(as_text=True)
    assert "Now: <strong>open</strong>" in prof.get("/instructor/sign-up/").get_data(as_text=True)
    assert _sign_up(site, "first@anywhere.com").status_code == 200 and _exists(site, "first@anywhere.com")

    prof.post("/instructor/sign-up/settings", data={"mode": "closed", "domains": ""})
    assert 'id="signup-closed"' in site.app.test_client().get("/sign-up").get_data(as_text=True)
    refused = _sign_up(site, "second@anywhere.com").get_data(as_text=True)
    assert "Not signed up: sign-up is closed on this site" in refused and not _exists(site, "second@anywhere.com")

    bad = prof.post("/instructor/sign-up/settings", data={"mode": "domain", "domains": "not a domain!"})
    assert "not an e-mail domain" in bad.get_data(as_text=True)
    empty = prof.post("/instructor/sign-up/settings", data={"mode": "domain", "domains": ""})
    assert "list at least one e-mail domain" in empty.get_data(as_text=True)
    prof.post("/instructor/sign-up/settings", data={"mode": "domain", "domains": "@Uni.edu, college.ac.uk"})
    assert "uni.edu, college.ac.uk" in site.app.test_client().get("/sign-up").get_data(as_text=True)
    outside = _sign_up(site, "third@gmail.com").get_data(as_text=True)
    assert "limited to addresses at uni.edu, college.ac.uk" in outside and not _exists(site, "third@gmail.com")
    assert _sign_up(site, "fourth@cs.uni.edu") and _exists(site, "fourth@cs.uni.edu")  # subdomains count
    assert _sign_up(site, "fifth@college.ac.uk") and _exists(site, "fifth@college.ac.uk")
    assert not (_sign_up(site, "sixth@notuni.edu") and _exists(site, "sixth@notuni.edu"))
    # an address in the domain needs no invitation, and a stale one it carries does not stop it
    assert _sign_up(site, "seventh@uni.edu", invite="stale-code") and _exists(site, "seventh@uni.edu")

    student = site.app.test_client()
    sign_in(student, "ada@example.org")
    assert student.get("/instructor/sign-up/").status_code == 403
    assert student.post("/instructor/sign-up/settings", data={"mode": "open"}).status_code == 403


def test_invitation_links_admit_as_many_as_they_allow(site):
    prof = _instructor(site)
    prof.post("/instructor/sign-up/settings", data={"mode": "invite", "domains": ""})
    page = site.app.test_client().get("/sign-up").get_data(as_text=True)
    assert 'id="signup-invite-only"' in page and 'name="password"' not in page
    assert "needs an invitation" in _sign_up(site, "x@anywhere.com").get_data(as_text=True)

    made = prof.post("/instructor/sign-up/invitations", data={"max_uses": 2, "days": 7, "note": "section B"})
    link = re.search(r'id="new-invitation">[^<]*<code>([^<]+)</code>', made.get_data(as_text=True)).group(1)
    code = re.search(r"invite=([\w-]+)", link).group(1)
    with_link = site.app.test_client().get(link.replace("http://localhost", "")).get_data(as_text=True)
    assert 'id="signup-invited"' in with_link and f'value="{code}"' in with_link
    assert "Welcome" in _sign_up(site, "one@anywhere.com", code).get_data(as_text=True)
    assert "Welcome" in _sign_up(site, "two@anywhere.com", code).get_data(as_text=True)
    used_up = _sign_up(site, "three@anywhere.com", code).get_data(as_text=True)
    assert "this invitation has been used up" in used_up and not _exists(site, "three@anywhere.com")
    assert "not valid" in _sign_up(site, "four@anywhere.com", "made-up-code").get_data(as_text=True)
    listing = prof.get("/instructor/sign-up/").get_data(as_text=True)
    assert "section B" in listing and "2/2" in listing and code not in listing  # the code is shown once

    # bound to one address, then withdrawn
    made = prof.post("/instructor/sign-up/invitations", data={"email": "ta@anywhere.com", "max_uses": 1, "days": 7})
    code = re.search(r"invite=([\w-]+)", made.get_data(as_text=True)).group(1)
    assert "for another e-mail address" in _sign_up(site, "other@anywhere.com", code).get_data(as_text=True)
    from web.db import session_factory
    with session_factory(site.engine)() as session:
        invitation_id = session.scalar(select(Invitation.id).where(Invitation.email == "ta@anywhere.com"))
    prof.post(f"/instructor/sign-up/invitations/{invitation_id}/revoke")
    assert "was withdrawn" in _sign_up(site, "ta@anywhere.com", code).get_data(as_text=True)


def test_expired_invitations_and_closed_sign_up_refuse_even_with_a_code(site):
    from web.db import session_factory
    from web.services import signup

    with session_factory(site.engine)() as session:
        prof = session.scalar(select(User).where(User.email == "prof@example.org"))
        _old, old_code = signup.create_invitation(session, prof, days=1, now=utcnow() - timedelta(days=2))
        _fresh, fresh_code = signup.create_invitation(session, prof)
        signup.update_settings(session, prof, "invite")
        session.commit()
    assert "has expired" in _sign_up(site, "late@anywhere.com", old_code).get_data(as_text=True)
    with session_factory(site.engine)() as session:
        signup.update_settings(session, session.get(User, site.people["prof"]["id"]), "closed")
        session.commit()
    assert "sign-up is closed" in _sign_up(site, "closed@anywhere.com", fresh_code).get_data(as_text=True)
    with session_factory(site.engine)() as session:
        with pytest.raises(ValueError, match="unknown sign-up mode 'secret'"):
            signup.update_settings(session, session.get(User, site.people["prof"]["id"]), "secret")
