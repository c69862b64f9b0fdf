"""Security review, one test per concern: headers, sessions, CSRF, passwords, token scope,
upload limits, rate limits, redirects and proxies."""
import re
from pathlib import Path

import pytest
from sqlalchemy import func, select

from service_support import make_config
from web import create_app
from web.auth import authenticate
from web.db import session_factory
from web.models import User
from web.security import check_password, password_problems

TEMPLATES = Path(__file__).resolve().parent.parent / "web" / "templates"
PASSWORD = "correct horse"  # service_support's people


@pytest.fixture
def service(tmp_path, _seeded_sqlite):
    """SQLite only: these are checks of the web layer, the same on every database."""
    import shutil
    from types import SimpleNamespace

    from web.db import dispose_engines, get_engine

    template, people = _seeded_sqlite
    shutil.copy(template, tmp_path / "grader.db")
    config = make_config(tmp_path, f"sqlite:///{tmp_path / 'grader.db'}")
    yield SimpleNamespace(config=config, engine=get_engine(config["DATABASE_URL"]),
                          people=people, tmp_path=tmp_path)
    dispose_engines()


def _client(service, ip="10.0.0.1", **config):
    try:
        app = create_app({**service.config, "PAGES": True, **config})
    except ImportError as exc:  # the pages package is still being written
        pytest.skip(f"the HTML pages cannot be imported yet: {exc}")
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = ip
    return app, client


def _csrf(client, path="/sign-in") -> str:
    page = client.get(path).get_data(as_text=True)
    return re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page).group(1)


def _sign_in(client, email="ada@example.org", password=PASSWORD, **extra):
    return client.post("/sign-in", data={"csrf_token": _csrf(client), "email": email,
                                         "password": password, **extra})


def _bearer(service, who):
    return {"Authorization": f"Bearer {service.people[who]['token']}"}


# ---- headers ---------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/sign-in", "/healthz", "/api/v1/tasks"])
def test_every_response_carries_the_security_headers(service, path):
    _, client = _client(service)
    r = client.get(path, headers=_bearer(service, "ada"))
    csp = r.headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
    assert "default-src 'self'" in csp and "unsafe-inline" not in csp
    assert r.headers["X-Frame-Options"] == "DENY"
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["Referrer-Policy"] == "same-origin"
    assert "Strict-Transport-Security" not in r.headers  # plain HTTP on a laptop


def test_charts_may_style_themselves_but_never_run_scripts(service):
    app, client = _client(service)
    with client.session_transaction() as session:
        session["_user_id"] = str(service.people["prof"]["id"])
    r = client.get("/instructor/charts/sdpa/scores.svg")
    assert r.status_code == 200 and r.mimetype == "image/svg+xml"
    csp = r.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "style-src 'unsafe-inline'" in csp
    assert "script" not in csp


def test_script_nonce_is_fresh_per_response(service):
    _, client = _client(service)
    nonces = {re.search(r"'nonce-([^']+)'", client.get("/sign-in")
                        .headers["Content-Security-Policy"]).group(1) for _ in range(3)}
    assert len(nonces) == 3


def test_templates_need_no_inline_script_or_style_the_policy_would_block():
    offenders = []
    for path in TEMPLATES.rglob("*.html"):
        text = path.read_text()
        for match in re.finditer(r"<script\b(?![^>]*\bsrc=)(?![^>]*\bnonce=)[^>]*>", text):
            offenders.append(f"{path.name}: {match.group(0)}")
        for match in re.finditer(r"\s(on[a-z]+|style)=\"", text):
            offenders.append(f"{path.name}: {match.group(1)}=")
    assert not offenders, "inline code blocked by the CSP: " + ", ".join(offenders)


def test_https_mode_adds_hsts_and_secure_cookies(service):
    _, client = _client(service, HTTPS=True)
    site = "https://localhost"
    page = client.get("/sign-in", base_url=site).get_data(as_text=True)
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page).group(1)
    r = client.post("/sign-in", base_url=site, headers={"Referer": site + "/sign-in"},
                    data={"csrf_token": token, "email": "ada@example.org", "password": PASSWORD})
    assert r.status_code == 302
    assert r.headers["Strict-Transport-Security"].startswith("max-age=31536000")
    cookie = r.headers["Set-Cookie"]
    assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie


def test_token_authenticated_answers_are_not_cached(service):
    _, client = _client(service)
    assert client.get("/api/v1/tasks", headers=_bearer(service, "ada")) \
        .headers["Cache-Control"] == "no-store"


# ---- sessions and CSRF -----------------------------------------------------------------

def test_session_cookie_is_httponly_lax_and_expires(service):
    app, client = _client(service)
    r = _sign_in(client)
    cookie = r.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert app.permanent_session_lifetime.total_seconds() <= 24 * 3600
    assert app.config["REMEMBER_COOKIE_DURATION"].days <= 30


def test_sign_in_and_out_need_the_csrf_token(service):
    _, client = _client(service)
    r = client.post("/sign-in", data={"email": "ada@example.org", "password": PASSWORD})
    assert r.status_code == 400 and "Set-Cookie" not in r.headers
    assert _sign_in(client).status_code == 302
    assert client.get("/").status_code == 200
    client.post("/sign-out", data={})  # no token: ignored, still signed in
    assert client.get("/").status_code == 200


def test_wrong_password_and_unknown_email_get_the_same_answer(service):
    _, client = _client(service, ip="10.0.0.7")
    wrong = _sign_in(client, password="not the password").get_data(as_text=True)
    unknown = _sign_in(client, email="nobody@example.org").get_data(as_text=True)
    assert "Wrong email or password." in wrong and "Wrong email or password." in unknown


def test_sign_in_redirects_only_within_the_site(service):
    _, client = _client(service, ip="10.0.0.8")
    r = client.post("/sign-in?next=//evil.example/steal", data={
        "csrf_token": _csrf(client), "email": "ada@example.org", "password": PASSWORD})
    assert r.status_code == 302 and "evil.example" not in r.headers["Location"]


# ---- passwords ---------------------------------------------------------------------------

@pytest.mark.parametrize("password, problem", [
    ("short", "at least 8"), ("password123", "most common"), ("aaaaaaaaaaaa", "distinct"),
    ("x" * 2000, "at most"), ("ada@example.org", "email"), ("Ada2026!", "email")])
def test_password_policy_names_the_problem(password, problem):
    problems = password_problems(password, email="ada@example.org")
    assert any(problem in p for p in problems), problems
    with pytest.raises(ValueError, match="password not accepted"):
        check_password(password, "ada@example.org")


def test_a_passphrase_is_accepted():
    assert password_problems("violet tractor seventeen", "ada@example.org") == []
    # it holds the address's "ada", but 15 other characters: the sign-up page's rule says so
    assert password_problems("ada-strong-pass-42", "ada@example.org") == []


def test_sign_up_refuses_a_common_password_and_creates_nobody(service):
    _, client = _client(service, ip="10.0.0.9")
    r = client.post("/sign-up", data={
        "csrf_token": _csrf(client, "/sign-up"), "name": "Eve", "email": "eve@example.org",
        "password": "password123", "confirm": "password123"})
    assert r.status_code == 200 and "most common passwords" in r.get_data(as_text=True)
    with session_factory(service.engine)() as session:
        assert session.scalar(select(func.count()).where(User.email == "eve@example.org")) == 0


def test_passwords_are_stored_as_argon2id_only(service):
    with session_factory(service.engine)() as session:
        user = session.scalar(select(User).where(User.email == "ada@example.org"))
        assert user.password_hash.startswith("$argon2id$") and PASSWORD not in user.password_hash
        assert authenticate(session, "ADA@example.org ", PASSWORD) is not None
        assert authenticate(session, "ada@example.org", PASSWORD.upper()) is None


# ---- API tokens: who may see what ------------------------------------------------------

def test_a_student_token_cannot_read_scores_or_others_submissions(service):
    _, client = _client(service)
    made = client.post("/api/v1/submissions", headers=_bearer(service, "bob"),
                       json={"task": "sdpa", "code": "x = 1\n"})
    assert made.status_code == 202
    assert client.get("/api/v1/scores", headers=_bearer(service, "ada")).status_code == 403
    assert client.get("/api/v1/scores.csv", headers=_bearer(service, "ada")).status_code == 403
    other = client.get(f"/api/v1/submissions/{made.get_json()['id']}",
                       headers=_bearer(service, "ada"))
    assert other.status_code == 404  # not 403: ids of others' work are not confirmed
    assert client.get("/api/v1/scores", headers=_bearer(service, "prof")).status_code == 200


def test_tokens_only_count_in_the_authorization_header(service):
    _, client = _client(service)
    token = service.people["ada"]["token"]
    assert client.get(f"/api/v1/tasks?token={token}").status_code == 401
    assert client.get("/api/v1/tasks", headers={"Authorization": f"Token {token}"}) \
        .status_code == 401
    assert client.get("/api/v1/tasks", headers={"Authorization": "Bearer agt_forged"}) \
        .status_code == 401


def test_a_signed_in_browser_cannot_use_the_api_without_a_token(service):
    _, client = _client(service)
    assert _sign_in(client).status_code == 302
    r = client.post("/api/v1/submissions", json={"task": "sdpa", "code": "x = 1\n"})
    assert r.status_code == 401  # cookies never authenticate the CSRF-exempt API


def test_a_revoked_token_stops_working(service):
    from web.auth import revoke_tokens

    _, client = _client(service)
    assert client.get("/api/v1/tasks", headers=_bearer(service, "ada")).status_code == 200
    with session_factory(service.engine)() as session:
        revoke_tokens(session, session.get(User, service.people["ada"]["id"]))
        session.commit()
    r = client.get("/api/v1/tasks", headers=_bearer(service, "ada"))
    assert r.status_code == 401 and "revoked" in r.get_json()["error"]


# ---- limits ------------------------------------------------------------------------------

def test_oversized_uploads_get_413_with_the_limit(service):
    app, client = _client(service, MAX_SUBMISSION_BYTES=1000)
    assert app.config["MAX_CONTENT_LENGTH"] == 2 * 1000 + 64 * 1024  # bodies are bounded too
    r = client.post("/api/v1/submissions", headers=_bearer(service, "ada"),
                    json={"task": "sdpa", "code": "#" * 1500})
    assert r.status_code == 413 and "1000" in r.get_json()["error"]
    huge = client.post("/api/v1/submissions", headers=_bearer(service, "ada"),
                       data={"task": "sdpa", "code": "#" * 200_000})
    assert huge.status_code == 413 and "1000" in huge.get_json()["error"]


def test_sign_in_is_rate_limited_per_address(service):
    _, client = _client(service, ip="10.9.9.9")
    token = _csrf(client)
    codes = [client.post("/sign-in", data={"csrf_token": token, "email": "ada@example.org",
                                           "password": "wrong guess"}).status_code
             for _ in range(12)]
    assert codes[:10] == [200] * 10 and codes[-1] == 429
    _, elsewhere = _client(service, ip="10.9.9.10")
    assert _sign_in(elsewhere).status_code == 302  # other people can still sign in


def test_api_is_rate_limited_per_token_with_retry_after(service):
    _, client = _client(service, API_RATE_LIMIT="3 per minute")
    codes = [client.get("/api/v1/tasks", headers=_bearer(service, "bob")).status_code
             for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    r = client.get("/api/v1/tasks", headers=_bearer(service, "bob"))
    assert "Retry-After" in r.headers and "error" in r.get_json()
    assert client.get("/api/v1/tasks", headers=_bearer(service, "prof")).status_code == 200


def test_behind_a_trusted_proxy_limits_apply_to_the_client_address(service):
    _, client = _client(service, ip="127.0.0.1", TRUSTED_PROXIES=1)
    token = _csrf(client)

    def attempt(client_ip):
        return client.post("/sign-in", headers={"X-Forwarded-For": client_ip}, data={
            "csrf_token": token, "email": "ada@example.org", "password": "wrong guess"})

    codes = [attempt("203.0.113.5").status_code for _ in range(11)]
    assert codes[-1] == 429
    assert attempt("203.0.113.6").status_code == 200  # a different student behind the proxy
