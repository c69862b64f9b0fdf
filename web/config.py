"""Service configuration: environment variables with the ``ATTN_GRADER_`` prefix.

Every setting has a default that works on a laptop: an SQLite database and a generated
secret key under ``instance/`` (the secret is written once with 0600 permissions), grading
workers that claim jobs from the database itself, and an in-memory rate limiter.

``load_config()`` returns a plain dict of upper-case keys; ``create_app`` copies it into
``app.config`` and the worker processes read the same dict, so web and workers agree.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

PREFIX = "ATTN_GRADER_"

# name -> (type, default, help). The README's "Configuration" table is written from this.
SETTINGS: dict[str, tuple[type, object, str]] = {
    "INSTANCE_PATH": (str, "instance", "folder for the SQLite database and the secret key"),
    "DATABASE_URL": (str, None, "SQLAlchemy URL; default sqlite:///<instance>/attn_grader.db"),
    "SECRET_KEY": (str, None, "Flask secret; default generated into <instance>/secret_key"),
    "QUIZ_SECRET": (str, None, "key of the per-student quiz variants (HMAC); default derived "
                    "from SECRET_KEY"),
    "BROKER_URL": (str, None, "redis://host:port/db or amqp://user:pass@host:5672/vhost to "
                   "publish jobs through Dramatiq (scale-out)"),
    "BROKER_NAMESPACE": (str, "attn_grader", "prefix of the broker's Redis keys (Redis only)"),
    "RATELIMIT_STORAGE_URI": (str, "memory://", "Flask-Limiter storage (redis://... at scale)"),
    "API_RATE_LIMIT": (str, "120 per minute", "per-token limit on every /api/v1 request"),
    "SANDBOX": (str, "auto", "sandbox level workers pass to grade_source: auto, strict, none"),
    "SANDBOX_PREWARM": (bool, True, "each grading worker keeps one sandboxed child forked, walled "
                        "in and waiting, so a submission does not wait for its sandbox's set-up"),
    "GRADE_FUNCTION": (str, "grader.grading:grade_source", "module:function that grades code"),
    "QUIZ_GRADE_FUNCTION": (str, "web.services.quiz_grading:grade_code_try",
                            "module:function the workers grade quiz code answers with"),
    "MAX_SUBMISSION_BYTES": (int, 64 * 1024, "largest accepted source file"),
    "LEASE_SECONDS": (float, 60.0, "a running job not renewed for this long is presumed lost"),
    "MAX_ATTEMPTS": (int, 3, "claims per job before it is failed as 'grading host lost'"),
    "QUEUED_STALE_SECONDS": (float, 120.0, "a queued job waiting longer is re-notified"),
    "MAX_GRADE_SECONDS": (float, 900.0, "a grading run longer than this is presumed stuck: "
                          "the job goes to another worker, the process restarts"),
    "RECONCILE_SECONDS": (float, 10.0, "how often the reconciler runs inside serve/worker"),
    "POLL_SECONDS": (float, 2.0, "a database-polling worker's fallback re-check while idle "
                     "(new jobs wake it at once)"),
    "TORCH_THREADS": (int, 0, "torch threads per grading worker; 0: the worker's share of the "
                      "cores this process may use (sched_getaffinity / workers on the host)"),
    "WAITING_REQUESTS": (int, 8, "requests per web process that may wait for a result at once "
                         "(?wait=); each holds a server thread, the rest answer at once"),
    "WORKERS": (int, 2, "grading worker processes started by `serve`"),
    "PAGES": (bool, True, "serve the HTML pages (false: the JSON API only)"),
    "SEED_DEMO": (bool, True, "`serve` creates a demo course, instructor and student when empty"),
    "DEMO_PASSWORD": (str, None, "password of the demo accounts; default generated and printed"),
    "SMTP_HOST": (str, None, "mail server for password-reset e-mail; unset: no reset by e-mail"),
    "SMTP_PORT": (int, 587, "the mail server's port"),
    "SMTP_SECURITY": (str, "starttls", "starttls (port 587), ssl (port 465) or none (a local relay)"),
    "SMTP_USERNAME": (str, None, "login at the mail server, if it needs one"),
    "SMTP_PASSWORD": (str, None, "password for SMTP_USERNAME"),
    "SMTP_TIMEOUT": (float, 10.0, "seconds to wait for the mail server"),
    "SMTP_CA_FILE": (str, None, "CA certificates to verify the mail server with (default: the system's)"),
    "MAIL_FROM": (str, "attn-grader <no-reply@localhost>", "From: of the service's e-mail"),
    "PASSWORD_RESET_SECONDS": (int, 3600, "how long a password-reset link stays valid"),
    "LTI_ALLOW_HTTP": (bool, False, "accept http:// LMS URLs in LTI registrations (a local "
                       "test LMS only; an LMS on a network must use https)"),
}


def _parse(kind: type, raw: str, name: str):
    if kind is bool:
        value = raw.strip().lower()
        if value in ("1", "true", "yes", "on"):
            return True
        if value in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(f"{PREFIX}{name}={raw!r}: expected true/false")
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"{PREFIX}{name}={raw!r}: expected {kind.__name__}") from None


def load_config(overrides: dict | None = None, environ=None) -> dict:
    """Settings from ``environ`` (default ``os.environ``), then ``overrides`` on top."""
    environ = os.environ if environ is None else environ
    overrides = dict(overrides or {})
    config: dict = {}
    for name, (kind, default, _help) in SETTINGS.items():
        if name in overrides:
            config[name] = overrides.pop(name)
        elif PREFIX + name in environ:
            config[name] = _parse(kind, environ[PREFIX + name], name)
        else:
            config[name] = default
    config.update(overrides)  # extra Flask keys such as TESTING pass straight through

    instance = Path(config["INSTANCE_PATH"]).resolve()
    config["INSTANCE_PATH"] = str(instance)
    if not config["DATABASE_URL"]:
        instance.mkdir(parents=True, exist_ok=True)
        config["DATABASE_URL"] = f"sqlite:///{instance / 'attn_grader.db'}"
    config["DATABASE_URL"] = _with_driver(config["DATABASE_URL"])
    if not config["SECRET_KEY"]:
        config["SECRET_KEY"] = _instance_secret(instance)
    if config["SANDBOX"] not in ("auto", "strict", "none"):
        raise ValueError(f"{PREFIX}SANDBOX={config['SANDBOX']!r}: expected auto, strict or none")
    if config["SMTP_SECURITY"] not in ("starttls", "ssl", "none"):
        raise ValueError(f"{PREFIX}SMTP_SECURITY={config['SMTP_SECURITY']!r}: expected starttls, ssl "
                         f"or none")
    return config


def _with_driver(url: str) -> str:
    """``postgres://`` and ``postgresql://`` (as hosting providers write them) use psycopg 3."""
    for scheme in ("postgres://", "postgresql://"):
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url[len(scheme):]
    return url


def _instance_secret(instance: Path) -> str:
    """The laptop's secret key: generated once, readable only by its owner."""
    instance.mkdir(parents=True, exist_ok=True)
    path = instance / "secret_key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_hex(32))
    return path.read_text().strip()


QUIZ_SECRET_LABEL = b"attn-grader quiz variants v1"


def quiz_secret(config: dict) -> bytes:
    """The key the quiz variants are an HMAC under (``questions.variants.variant_seed``).

    ``QUIZ_SECRET`` when set, else derived from ``SECRET_KEY``, so that a student's variant
    (and thus answer key) can only be computed where the server's secret is.
    """
    if config.get("QUIZ_SECRET"):
        return str(config["QUIZ_SECRET"]).encode()
    if not config.get("SECRET_KEY"):
        raise ValueError("no quiz secret: set ATTN_GRADER_QUIZ_SECRET or ATTN_GRADER_SECRET_KEY")
    return hmac.new(str(config["SECRET_KEY"]).encode(), QUIZ_SECRET_LABEL, hashlib.sha256).digest()


def server_quiz_secret(environ=None) -> tuple[bytes | None, str]:
    """The server's quiz secret read the way the server reads it, never generated.

    For instructors' tools on the server (``attn-grader questions show --student``): returns
    (secret, where it came from), or (None, what was looked for) where no secret is set, as on
    a student's laptop. Unlike ``load_config`` it never writes a new ``secret_key``.
    """
    environ = os.environ if environ is None else environ
    if environ.get(PREFIX + "QUIZ_SECRET"):
        return quiz_secret({"QUIZ_SECRET": environ[PREFIX + "QUIZ_SECRET"]}), PREFIX + "QUIZ_SECRET"
    if environ.get(PREFIX + "SECRET_KEY"):
        return quiz_secret({"SECRET_KEY": environ[PREFIX + "SECRET_KEY"]}), PREFIX + "SECRET_KEY"
    instance = Path(environ.get(PREFIX + "INSTANCE_PATH") or SETTINGS["INSTANCE_PATH"][1]).resolve()
    path = instance / "secret_key"
    if path.is_file():
        return quiz_secret({"SECRET_KEY": path.read_text().strip()}), str(path)
    return None, (f"{PREFIX}QUIZ_SECRET, {PREFIX}SECRET_KEY or {path} "
                  f"(set {PREFIX}INSTANCE_PATH to the server's instance folder)")


def describe() -> list[tuple[str, str, str]]:
    """(variable, default, meaning) rows for `--help` texts and the README."""
    return [(PREFIX + name, "" if default is None else str(default), help_)
            for name, (_kind, default, help_) in SETTINGS.items()]
