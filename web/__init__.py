"""The Flask service: pages, JSON API and job dispatch to grading workers.

``create_app(config=None)`` builds the app; ``config`` overrides the ``ATTN_GRADER_*``
environment (see ``web.config``). The app refuses to start on a database that is not
migrated to the code's revision and says which command to run.
"""
from __future__ import annotations

from flask import Flask


def create_app(config: dict | None = None) -> Flask:
    from .config import load_config
    from .db import check_migrated, get_engine
    from .dispatch.broker import make_dispatcher
    from .dispatch.wakeup import RedisRelay, StatusWaiters, wake_dir
    from .extensions import ServiceState, close_db_session, csrf, limiter, login_manager

    cfg = load_config(config)
    app = Flask(__name__, instance_path=cfg["INSTANCE_PATH"])
    app.config.update(cfg)
    # Body size limit and cookie flags are set by web.security (below).
    app.config.setdefault("RATELIMIT_STORAGE_URI", cfg["RATELIMIT_STORAGE_URI"])
    app.config.setdefault("RATELIMIT_HEADERS_ENABLED", True)  # Retry-After on 429
    # The rate limits' store (Redis at scale) must not take the service down with it: while
    # it is unreachable each web process counts in its own memory, and an error from the
    # store lets the request through (logged) rather than answering 500. The store's sockets
    # time out, so a Redis that stopped answering costs a request a second, not a hang.
    app.config.setdefault("RATELIMIT_IN_MEMORY_FALLBACK_ENABLED", True)
    app.config.setdefault("RATELIMIT_SWALLOW_ERRORS", True)
    if str(app.config["RATELIMIT_STORAGE_URI"]).startswith(("redis", "rediss", "unix")):
        app.config.setdefault("RATELIMIT_STORAGE_OPTIONS",
                              {"socket_connect_timeout": 1, "socket_timeout": 1})

    engine = get_engine(cfg["DATABASE_URL"])
    check_migrated(engine)
    app.extensions["attn_grader"] = ServiceState(
        engine=engine, dispatcher=make_dispatcher(cfg),
        waiters=StatusWaiters(wake_dir(cfg["DATABASE_URL"]), cfg["WAITING_REQUESTS"],
                              relay=RedisRelay.for_config(cfg)))
    app.teardown_appcontext(close_db_session)

    # Request ids, access log, /healthz, /metrics, database-error answers: first, so that a
    # request refused by a later hook (the rate limiter) is logged with its id too.
    from . import observability, security
    observability.init_app(app)

    limiter.init_app(app)
    csrf.init_app(app)
    login_manager.init_app(app)
    login_manager.user_loader(_load_user)
    from . import i18n
    i18n.init_app(app)  # the API's messages are translated too, so Babel is the whole app's

    from .api import bp as api_bp
    csrf.exempt(api_bp)  # token-authenticated JSON: no cookies, so no CSRF
    app.register_blueprint(api_bp)

    security.init_app(app)  # security headers
    if cfg["PAGES"]:  # /s/<public id>: the submission page's link handed out (web.public_ids)
        from .public_ids import bp as links_bp

        app.register_blueprint(links_bp)

    # The HTML pages live in web/pages (their own package); it registers its blueprints.
    # PAGES off: the JSON API alone (tests of the API, an API-only host).
    if cfg["PAGES"]:
        from . import pages

        pages.register(app)
    # LTI (LMS launches, grade passback): a plug-in with its own pages and session hooks.
    from . import lti
    lti.init_app(app)
    return app


def _load_user(user_id: str):
    from .extensions import db_session
    from .models import User

    try:
        user = db_session().get(User, int(user_id))
    except ValueError:
        return None
    return user if user is not None and user.is_active else None
