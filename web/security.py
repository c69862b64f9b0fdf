"""Security policy the whole app shares: response headers, cookies, proxies and passwords.

``init_app(app)`` adds to every response:
- ``Content-Security-Policy``: only this origin's scripts, styles and images (plus ``data:``
  images for plots); inline ``<script>`` runs only with the per-request nonce that templates
  get as ``csp_nonce()``; no plugins; ``frame-ancestors 'none'``, except the LTI pages a
  registered LMS shows in its own page: those name that LMS's origins (``web.lti.frame``
  sets ``g.frame_ancestors``) and drop ``X-Frame-Options``.
- ``X-Frame-Options: DENY`` (older browsers' clickjacking guard), ``X-Content-Type-Options:
  nosniff``, ``Referrer-Policy: same-origin``, ``Cross-Origin-Opener-Policy: same-origin``,
  a ``Permissions-Policy`` that turns off camera, microphone and geolocation, and
  ``Cache-Control: no-store`` on anything that needed a login or a token.
- over HTTPS (``ATTN_GRADER_HTTPS=true``): ``Strict-Transport-Security`` and ``Secure`` cookies.

Behind a reverse proxy set ``ATTN_GRADER_TRUSTED_PROXIES`` to the number of proxies in front,
so rate limits and logs see the client's address rather than the proxy's.

``password_problems()`` is the password policy (NIST SP 800-63B style: a length floor, no
composition rules, a list of common passwords, not the user's own email).
"""
from __future__ import annotations

import secrets
from datetime import timedelta

from flask import Flask, g, request
from flask_babel import gettext

DEFAULT_CSP = ("default-src 'self'; script-src 'self' 'nonce-{nonce}'; style-src 'self'; "
               "img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; "
               "base-uri 'self'; form-action 'self'; frame-ancestors 'none'")
STATIC_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=()",
}
HSTS = "max-age=31536000; includeSubDomains"
# Charts are matplotlib SVGs full of style attributes: they may style themselves, nothing else
# (no scripts, no fetches), also when someone opens one directly.
SVG_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:"

MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 1024  # hashing cost is bounded; longer input is surely a mistake
# The most common passwords of at least 8 characters in public breach corpora; a length
# floor alone would accept every one of them.
COMMON_PASSWORDS = frozenset("""
12345678 123456789 1234567890 12345678910 123123123 11111111 00000000 87654321 11223344
password password1 password12 password123 passw0rd p@ssw0rd p@ssword qwertyuiop qwerty123
qwerty1234 1qaz2wsx zaq12wsx 1q2w3e4r 1q2w3e4r5t q1w2e3r4 q1w2e3r4t5 asdfghjkl asdf1234
iloveyou iloveyou1 sunshine princess football baseball welcome1 welcome123 superman
letmein1 trustno1 abc12345 abcd1234 abcdefgh starwars dragon123 monkey123 whatever
changeme changeme1 administrator admin123 admin1234 computer internet michelle jennifer
charlie1 freedom1 shadow12 master12 matrix12 mustang1 liverpool chocolate 123qweasd
qweasdzxc 1234qwer qwer1234 student1 student123 attention transformer
""".split())


def password_problems(password: str, email: str | None = None) -> list[str]:
    """What is wrong with ``password`` as a new password (empty list: acceptable), in the
    request's language (English outside a request: the CLI's ``users add``)."""
    if not isinstance(password, str):
        return [gettext("the password must be text")]
    problems = []
    if len(password) < MIN_PASSWORD_LENGTH:
        problems.append(gettext("use at least %(num)d characters", num=MIN_PASSWORD_LENGTH))
    if len(password) > MAX_PASSWORD_LENGTH:
        problems.append(gettext("use at most %(num)d characters", num=MAX_PASSWORD_LENGTH))
    lowered = password.lower()
    if lowered in COMMON_PASSWORDS:
        problems.append(gettext("this is one of the most common passwords; choose another"))
    elif password and len(set(password)) == 1:
        problems.append(gettext("use more than one distinct character"))
    if email:
        # Built on the address: what is left without it (or without the part before the @)
        # is too short. A long password that merely contains "ada" is not weak for that.
        address, local = email.lower(), email.split("@", 1)[0].lower()
        rest = min((lowered.replace(part, "") for part in (address, local) if len(part) >= 3),
                   key=len, default=lowered)
        if len(password) >= MIN_PASSWORD_LENGTH and len(rest) < MIN_PASSWORD_LENGTH:
            problems.append(gettext("your password is mostly your email address: without it, fewer than "
                                    "%(num)d characters are left", num=MIN_PASSWORD_LENGTH))
    return problems


def password_rules() -> str:
    """The rules ``password_problems`` enforces, in one sentence for the sign-up form."""
    return gettext("At least %(num)d characters, not one of the most common passwords, and at least "
                   "%(num)d characters besides your email address.", num=MIN_PASSWORD_LENGTH)


def check_password(password: str, email: str | None = None) -> None:
    """Raise ``ValueError`` with every problem of ``password`` in one message."""
    problems = password_problems(password, email)
    if problems:
        raise ValueError(gettext("password not accepted: %(problems)s", problems="; ".join(problems)))


# ---- headers -------------------------------------------------------------------------------

def csp_nonce() -> str:
    """This response's script nonce (for ``<script nonce="{{ csp_nonce() }}">``)."""
    if "csp_nonce" not in g:
        g.csp_nonce = secrets.token_urlsafe(16)
    return g.csp_nonce


def content_security_policy(form_action: tuple[str, ...] = ()) -> str:
    """This response's policy: the app's template with its nonce, its framing origins (an
    LMS's LTI frame) and any extra ``form-action`` origins (a form posting to the LMS)."""
    policy = _app_config("CONTENT_SECURITY_POLICY", DEFAULT_CSP).replace("{nonce}", csp_nonce())
    ancestors = g.get("frame_ancestors")
    if ancestors:
        policy = policy.replace("frame-ancestors 'none'", "frame-ancestors " + " ".join(ancestors))
    if form_action:
        policy = policy.replace("form-action 'self'",
                                "form-action 'self' " + " ".join(form_action))
    return policy


def _private(response) -> bool:
    """Whether the response was made for a particular signed-in user or token holder."""
    if request.headers.get("Authorization") or g.get("api_user") is not None:
        return True
    try:
        from flask_login import current_user
        return bool(current_user and current_user.is_authenticated)
    except Exception:  # no login manager (a bare test app)
        return False


def _add_headers(response):
    for name, value in STATIC_HEADERS.items():
        response.headers.setdefault(name, value)
    if g.get("frame_ancestors"):  # CSP's frame-ancestors alone decides (XFO cannot name one)
        response.headers.pop("X-Frame-Options", None)
    policy = response.headers.get("Content-Security-Policy")
    if policy is None and response.mimetype == "image/svg+xml":
        response.headers["Content-Security-Policy"] = SVG_CSP
    elif policy is None:
        response.headers["Content-Security-Policy"] = content_security_policy()
    if _app_config("HTTPS", False):
        response.headers.setdefault("Strict-Transport-Security", HSTS)
    if "Cache-Control" not in response.headers and _private(response):
        response.headers["Cache-Control"] = "no-store"
    return response


def _app_config(name: str, default):
    from flask import current_app
    return current_app.config.get(name, default)


def init_app(app: Flask) -> None:
    # Flask's own defaults are already keys of app.config (None/False), so ``setdefault``
    # cannot change them: fill in the ones still at Flask's insecure default explicitly.
    if app.config.get("MAX_CONTENT_LENGTH") is None:  # bound every request body
        app.config["MAX_CONTENT_LENGTH"] = 2 * int(app.config.get("MAX_SUBMISSION_BYTES")
                                                   or 64 * 1024) + 64 * 1024
    if app.config.get("SESSION_COOKIE_SAMESITE") is None:
        app.config["SESSION_COOKIE_SAMESITE"] = "Lax"
    app.config["SESSION_COOKIE_HTTPONLY"] = True
    https = app.config["HTTPS"]  # load_config fills every service setting (grader/settings.py)
    if https:
        app.config["SESSION_COOKIE_SECURE"] = True
        app.config["REMEMBER_COOKIE_SECURE"] = True
        app.config["PREFERRED_URL_SCHEME"] = "https"
    app.config.setdefault("REMEMBER_COOKIE_HTTPONLY", True)
    app.config.setdefault("REMEMBER_COOKIE_SAMESITE", "Lax")
    # Session cookies are signed, not stored: a copied cookie works until it expires, so it
    # must expire (Flask's default is 31 days; Flask-Login's "keep me signed in", 365).
    app.config["PERMANENT_SESSION_LIFETIME"] = app.config.get(
        "SESSION_LIFETIME", timedelta(hours=12))
    app.config.setdefault("REMEMBER_COOKIE_DURATION", timedelta(days=14))

    proxies = app.config["TRUSTED_PROXIES"]  # serve reads it too (waitress keeps the headers)
    if proxies:
        from werkzeug.middleware.proxy_fix import ProxyFix

        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies)

    app.after_request(_add_headers)
    app.jinja_env.globals["csp_nonce"] = csp_nonce
