"""Flask extensions, the per-request database session, and accepting code in a request.

Views get the session with ``db_session()``; it is closed (and rolled back if uncommitted)
at the end of the request. On SQLite a request that may write (POST, PUT, PATCH, DELETE, and a
GET to a view marked ``writes_on_get``) starts its transaction with ``BEGIN IMMEDIATE`` so
concurrent writers wait for each other instead of failing with "database is locked": SQLite
will not turn a transaction that has read into a writing one once another process has written.
"""
from __future__ import annotations

from dataclasses import dataclass

from flask import current_app, g, request
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import LoginManager
from flask_wtf.csrf import CSRFProtect
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from .db import writing

limiter = Limiter(key_func=get_remote_address, default_limits=[])
login_manager = LoginManager()
csrf = CSRFProtect()

_READ_METHODS = ("GET", "HEAD", "OPTIONS")


@dataclass
class ServiceState:
    """What the app holds between requests, at ``app.extensions["attn_grader"]``."""
    engine: Engine
    dispatcher: object  # web.dispatch.broker.Dispatcher
    waiters: object = None  # web.dispatch.wakeup.StatusWaiters: requests waiting for a result


def state() -> ServiceState:
    return current_app.extensions["attn_grader"]


def writes_on_get(view):
    """Mark a view that writes when it answers a GET (an LMS's login or registration request)."""
    view.writes_on_get = True
    return view


def _may_write() -> bool:
    if request.method not in _READ_METHODS:
        return True
    view = current_app.view_functions.get(request.endpoint) if request.endpoint else None
    return getattr(view, "writes_on_get", False)


def db_session() -> Session:
    if "db_session" not in g:
        engine = state().engine
        if request and _may_write():
            engine = writing(engine)
        g.db_session = Session(bind=engine, expire_on_commit=False)
    return g.db_session


def close_db_session(_exc=None) -> None:
    session = g.pop("db_session", None)
    if session is not None:
        session.close()


def submit_code(user, assignment, code: str | bytes, filename: str):
    """``submissions.submit`` within a request (the form and the JSON API alike): the request's
    session, the app's dispatcher, and the configured size limit and claim budget."""
    from grader.settings import setting

    from .services import submissions

    config = current_app.config
    return submissions.submit(db_session(), user, assignment, code, filename=filename,
                              dispatcher=state().dispatcher,
                              max_bytes=config["MAX_SUBMISSION_BYTES"],
                              max_attempts=config["MAX_ATTEMPTS"],
                              require_function=config["GRADE_FUNCTION"] == setting("GRADE_FUNCTION").default)
