"""Service configuration: the ``ATTN_GRADER_*`` variables of the service, loaded and derived.

What each variable is (type, default, meaning) is declared in ``grader/settings.py``, the one
registry of every setting; this module loads the service's groups of it into one dict and
derives what the defaults leave open (database URL, secret key).

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

from grader import settings as registry
from grader.settings import PREFIX

# The settings this dict carries: their declarations (type, default, meaning) are in
# grader/settings.py, with the sandbox's, the student CLI's and the tools' variables.
SERVICE_GROUPS = ("service", "workers", "mail", "logging")
SETTINGS = tuple(s for s in registry.SETTINGS if s.group in SERVICE_GROUPS)


def load_config(overrides: dict | None = None, environ=None) -> dict:
    """Settings from ``environ`` (default ``os.environ``), then ``overrides`` on top."""
    overrides = dict(overrides or {})
    config: dict = {}
    for setting in SETTINGS:
        if setting.name in overrides:  # given in code (tests, scripts): checked like the environment's
            value = overrides.pop(setting.name)
            config[setting.name] = None if value is None else setting.check(value)
        else:
            config[setting.name] = setting.read(environ)
    config.update(overrides)  # extra Flask keys such as TESTING pass straight through

    instance = Path(config["INSTANCE_PATH"]).resolve()
    config["INSTANCE_PATH"] = str(instance)
    if not config["DATABASE_URL"]:
        instance.mkdir(parents=True, exist_ok=True)
        config["DATABASE_URL"] = f"sqlite:///{instance / 'attn_grader.db'}"
    config["DATABASE_URL"] = _with_driver(config["DATABASE_URL"])
    if not config["SECRET_KEY"]:
        config["SECRET_KEY"] = _instance_secret(instance)
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
    for name in ("QUIZ_SECRET", "SECRET_KEY"):
        value = registry.value(name, environ)
        if value:
            return quiz_secret({name: value}), PREFIX + name
    instance = Path(registry.value("INSTANCE_PATH", environ)).resolve()
    path = instance / "secret_key"
    if path.is_file():
        return quiz_secret({"SECRET_KEY": path.read_text().strip()}), str(path)
    return None, (f"{PREFIX}QUIZ_SECRET, {PREFIX}SECRET_KEY or {path} "
                  f"(set {PREFIX}INSTANCE_PATH to the server's instance folder)")

