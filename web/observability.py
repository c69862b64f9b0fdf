"""Logs, health and metrics: what an operator needs to see the service from outside.

- ``configure_logging()``: one JSON object per line (``ATTN_GRADER_LOG_FORMAT=json``, the
  default for ``serve`` and ``worker`` unless stderr is a terminal) or plain text (``text``).
  Records carry the ``submission_id``/``job_id``/``attempt``/``request_id`` of the work in
  progress, taken from ``log_context(...)`` (a context variable, so threads and requests
  never mix them up) or from ``extra=`` on the call.
- ``init_app(app)``: a request id and an access log line per request, ``/healthz``
  (database, migrations, broker) and ``/metrics`` in the Prometheus text format.
- Metrics are computed from the database at scrape time, so one scrape of any web process
  shows the whole fleet: every web and worker process writes to the same tables, and no
  process-local counter has to be aggregated across gunicorn workers or hosts.
- Database errors become JSON answers that say what happened, always 503 with ``Retry-After``
  (the service is briefly unable to store anything; nothing was stored, the client may retry):
  the database unreachable (retry in 30 s) or its disk full (retry in 300 s), told apart by the
  message. Not 507: that is WebDAV's "this resource cannot hold it", which clients and proxies
  do not take for a temporary outage worth a retry.
"""
from __future__ import annotations

import contextvars
import json
import logging
import time
import uuid
from contextlib import contextmanager
from datetime import timedelta

from flask import Blueprint, Flask, Response, current_app, g, jsonify, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)
from sqlalchemy import case, distinct, func, inspect as sqlalchemy_inspect, select
from sqlalchemy.exc import InterfaceError, OperationalError, SQLAlchemyError

from grader import settings

log = logging.getLogger(__name__)
bp = Blueprint("observability", __name__)

# ---- structured logging ------------------------------------------------------------------

CONTEXT_FIELDS = ("request_id", "submission_id", "job_id", "attempt", "worker", "queue")
_context: contextvars.ContextVar[dict] = contextvars.ContextVar("attn_grader_log", default={})
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


@contextmanager
def log_context(**fields):
    """Attach ``fields`` (e.g. job_id=3, submission_id=7) to every record logged inside."""
    token = _context.set({**_context.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


class ContextFilter(logging.Filter):
    """Copies the current ``log_context`` onto each record (explicit ``extra=`` wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _context.get().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, pid, msg, context ids, extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                  + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(), "logger": record.name,
            "pid": record.process, "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value if isinstance(value, (str, int, float, bool, type(None))) \
                    else str(value)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """The classic line, with the context ids appended as key=value."""

    def __init__(self):
        super().__init__("%(asctime)s %(name)s[%(process)d] %(levelname)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ids = " ".join(f"{k}={getattr(record, k)}" for k in CONTEXT_FIELDS
                       if getattr(record, k, None) is not None)
        return f"{line} [{ids}]" if ids else line


def configure_logging(level: str = "INFO", fmt: str | None = None, stream=None) -> None:
    """Set up the root logger once per process from ``ATTN_GRADER_LOG_LEVEL``/``_LOG_FORMAT``;
    ``level`` and ``fmt`` are the command's own defaults, where the operator set none."""
    level = (settings.value("LOG_LEVEL") or level).upper()
    handler = logging.StreamHandler(stream)
    default = "text" if getattr(handler.stream, "isatty", lambda: False)() else "json"
    fmt = settings.value("LOG_FORMAT") or fmt or default
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_attn_grader", False):
            root.removeHandler(old)
    handler._attn_grader = True
    root.addHandler(handler)
    root.setLevel(level)


# ---- request ids and access log ------------------------------------------------------------

access_log = logging.getLogger("web.access")


def _start_request() -> None:
    incoming = request.headers.get("X-Request-ID", "")
    g.request_id = incoming[:64] if incoming.isprintable() and incoming else uuid.uuid4().hex
    g.request_started = time.perf_counter()
    g.log_token = _context.set({**_context.get(), "request_id": g.request_id})


def _finish_request(response: Response) -> Response:
    response.headers.setdefault("X-Request-ID", g.get("request_id", ""))
    started = g.get("request_started")
    if started is not None and request.endpoint not in ("observability.metrics",
                                                        "observability.healthz"):
        try:
            access_log.info("%s %s %s", request.method, request.path, response.status_code,
                            extra={"method": request.method, "path": request.path,
                                   "status": response.status_code,
                                   "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                                   "user_id": _request_user_id(), "remote": request.remote_addr})
        except Exception:  # the log line must never turn an answer into a 500
            log.exception("access log line failed")
    return response


def _request_user_id() -> int | None:
    """The token's user, or the signed-in user if the view loaded one, without a query.

    Read from the object's identity, never from its attributes: after a database error the
    session was rolled back, the user's attributes are expired, and reading ``user.id``
    would go back to the database that just failed (a 503 became a 500 that way).
    """
    user = g.get("api_user") or g.get("_login_user")
    state = sqlalchemy_inspect(user, raiseerr=False)  # None for the anonymous user
    return state.identity[0] if state is not None and state.identity else None


def _end_request(_exc=None) -> None:
    token = g.pop("log_token", None)
    if token is not None:
        try:
            _context.reset(token)
        except ValueError:  # created in another context (streamed response); nothing to undo
            pass


# ---- database errors as clear answers ------------------------------------------------------

DISK_FULL_SQLSTATE = "53100"  # PostgreSQL disk_full
STORE_FULL_MESSAGE = ("the submission store is full, so nothing was saved. Please try again "
                      "later, and tell your instructor if it keeps happening.")
DB_DOWN_MESSAGE = ("the database is unavailable right now: nothing was saved. Please try again "
                   "in a few seconds.")
# A restarting database is back in seconds; freeing a disk takes an operator.
DB_DOWN_RETRY_SECONDS, STORE_FULL_RETRY_SECONDS = 30, 300


def is_disk_full(exc: BaseException) -> bool:
    orig = getattr(exc, "orig", exc)
    if getattr(orig, "sqlstate", None) == DISK_FULL_SQLSTATE:
        return True
    text_ = str(orig).lower()
    return "database or disk is full" in text_ or "no space left on device" in text_


def _database_error(exc: SQLAlchemyError):
    session = g.get("db_session")
    if session is not None:
        try:
            session.rollback()  # nothing half-written: the transaction never committed
        except SQLAlchemyError:
            session.invalidate()
    store_full = is_disk_full(exc)
    if store_full:
        message, retry_after = STORE_FULL_MESSAGE, STORE_FULL_RETRY_SECONDS
        log.critical("submission store full: %s", exc.__class__.__name__, exc_info=exc)
    else:
        message, retry_after = DB_DOWN_MESSAGE, DB_DOWN_RETRY_SECONDS
        log.error("database unavailable: %s", getattr(exc, "orig", exc), exc_info=exc)
    if request.path.startswith("/api/") or request.accept_mimetypes.best == "application/json":
        response = jsonify(error=message, request_id=g.get("request_id"))
    elif current_app.config.get("PAGES") and request.accept_mimetypes.accept_html:
        # a page of its own, rendered without the context processors and in a language chosen
        # without the database: the site's layout, Flask-Login's ``current_user`` and the
        # signed-in user's saved language all read it
        from flask_babel import force_locale

        from .i18n import visitor_language
        lang = visitor_language()
        with force_locale(lang):
            html = current_app.jinja_env.get_template("unavailable.html").render(
                lang=lang, store_full=store_full,
                request_id=g.get("request_id"), retry=retry_after, again=request.method == "GET")
        response = Response(html)
    else:
        response = Response(f"{message}\n(request id {g.get('request_id')})\n",
                            mimetype="text/plain")
    response.status_code = 503
    response.headers["Retry-After"] = str(retry_after)
    return response


# ---- /healthz --------------------------------------------------------------------------------

@bp.get("/healthz")
def healthz():
    """Liveness plus readiness: 200 when the database answers, 503 when it does not."""
    from .extensions import state
    from .schema import schema_state

    checks: dict = {}
    status = 200
    engine = state().engine
    try:  # reading the schema's revision is the round trip that shows the database answers
        checks["database"] = schema_state(engine).summary
    except SQLAlchemyError as exc:
        checks["database"] = f"unreachable: {type(getattr(exc, 'orig', exc)).__name__}"
        status = 503
    checks["broker"] = _broker_health(state().dispatcher)
    overall = "ok" if status == 200 and all(
        v in ("ok", "none (database queue)") for v in checks.values()) else \
        ("down" if status != 200 else "degraded")
    response = jsonify(status=overall, checks=checks)
    response.status_code = status
    response.headers["Cache-Control"] = "no-store"
    return response


def _broker_health(dispatcher) -> str:
    broker = getattr(dispatcher, "broker", None)
    if broker is None:
        return "none (database queue)"
    client = getattr(broker, "client", None)
    if client is None:  # stub or RabbitMQ broker: nothing cheap to ping
        return "ok"
    try:
        client.ping()
        return "ok"
    except Exception as exc:  # the web still accepts work; the reconciler re-sends it
        return f"unreachable: {type(exc).__name__}"


# ---- /metrics ------------------------------------------------------------------------------

DURATION_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
WAIT_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900)
WORKER_SEEN_WINDOW = timedelta(minutes=15)


def _seconds_between(dialect: str, start, end):
    """(end - start) in seconds, as SQL for this dialect."""
    if dialect == "sqlite":
        return (func.julianday(end) - func.julianday(start)) * 86400.0
    return func.extract("epoch", end - start)


class DatabaseCollector:
    """A prometheus_client collector that reads the job tables on each scrape."""

    def __init__(self, engine):
        self.engine = engine

    def collect(self):
        from .models import HOST_LOST
        from .models import GradingJob as J, Result, Submission, utcnow

        started = time.perf_counter()
        up = GaugeMetricFamily("attn_grader_database_up",
                               "1 when the metrics query reached the database")
        try:
            with self.engine.connect() as conn:
                families = list(self._families(conn, J, Result, Submission, HOST_LOST, utcnow()))
            up.add_metric([], 1)
        except SQLAlchemyError:
            log.exception("metrics: database query failed")
            families = []
            up.add_metric([], 0)
        yield up
        yield from families
        scrape = GaugeMetricFamily("attn_grader_metrics_scrape_seconds",
                                   "time spent computing these metrics")
        scrape.add_metric([], time.perf_counter() - started)
        yield scrape

    def _families(self, conn, J, Result, Submission, host_lost, now):
        dialect = self.engine.dialect.name
        from .models import JOB_STATUSES, QUEUES

        jobs = GaugeMetricFamily("attn_grader_jobs", "grading jobs by status and queue",
                                 labels=["status", "queue"])
        counts = {(s, q): 0 for s in JOB_STATUSES for q in QUEUES}
        for status_, queue, n in conn.execute(
                select(J.status, J.queue, func.count()).group_by(J.status, J.queue)):
            counts[(status_, queue)] = n
        for (status_, queue), n in sorted(counts.items()):
            jobs.add_metric([status_, queue], n)
        yield jobs

        oldest = GaugeMetricFamily("attn_grader_queue_oldest_seconds",
                                   "age of the oldest queued job per queue (0 when empty)",
                                   labels=["queue"])
        firsts = dict(conn.execute(select(J.queue, func.min(J.queued_at))
                                   .where(J.status == "queued").group_by(J.queue)).all())
        for queue in QUEUES:
            first = firsts.get(queue)
            oldest.add_metric([queue], max(0.0, (now - first).total_seconds()) if first else 0.0)
        yield oldest

        yield from self._histogram(conn, J, dialect, "attn_grader_job_duration_seconds",
                                   "claim-to-finish time of finished jobs", J.started_at,
                                   J.finished_at, DURATION_BUCKETS, J.status == "done")
        yield from self._histogram(conn, J, dialect, "attn_grader_queue_wait_seconds",
                                   "queued-to-claimed time of claimed jobs", J.queued_at,
                                   J.started_at, WAIT_BUCKETS, J.started_at.isnot(None))

        failures = CounterMetricFamily("attn_grader_job_failures",
                                       "jobs given up on, by queue and reason",
                                       labels=["queue", "reason"])
        reason = case((J.error.like(f"{host_lost}%"), "host_lost"), else_="grader_error")
        found = {(q, r): n for q, r, n in conn.execute(
            select(J.queue, reason, func.count()).where(J.status == "failed")
            .group_by(J.queue, reason))}
        for queue in QUEUES:
            for why in ("host_lost", "grader_error"):
                failures.add_metric([queue, why], found.get((queue, why), 0))
        yield failures

        retries = CounterMetricFamily("attn_grader_job_retries",
                                      "claims beyond the first (lost workers, grader errors)",
                                      labels=["queue"])
        extra = dict(conn.execute(select(J.queue, func.sum(J.attempts - 1))
                                  .where(J.attempts > 1).group_by(J.queue)).all())
        for queue in QUEUES:
            retries.add_metric([queue], int(extra.get(queue) or 0))
        yield retries

        results = CounterMetricFamily("attn_grader_results",
                                      "grading results by outcome (passed, failed, error)",
                                      labels=["outcome"])
        outcome = case((Result.error.isnot(None), "error"),
                       (Result.passed.is_(True), "passed"), else_="failed")
        found = dict(conn.execute(select(outcome, func.count()).group_by(outcome)).all())
        for name in ("passed", "failed", "error"):
            results.add_metric([name], found.get(name, 0))
        yield results

        submissions = CounterMetricFamily("attn_grader_submissions", "submissions accepted")
        submissions.add_metric([], conn.execute(select(func.count(Submission.id))).scalar_one())
        yield submissions

        since = now - WORKER_SEEN_WINDOW
        seen = GaugeMetricFamily(
            "attn_grader_workers_seen",
            "distinct worker processes that claimed or finished a job in the last 15 minutes",
            labels=["queue"])
        active = dict(conn.execute(
            select(J.queue, func.count(distinct(J.worker)))
            .where(J.worker.isnot(None),
                   (J.started_at >= since) | (J.finished_at >= since) | (J.status == "running"))
            .group_by(J.queue)).all())
        for queue in QUEUES:
            seen.add_metric([queue], active.get(queue, 0))
        yield seen

    def _histogram(self, conn, J, dialect, name, doc, start, end, buckets, where):
        seconds = _seconds_between(dialect, start, end)
        columns = [func.sum(case((seconds <= b, 1), else_=0)) for b in buckets]
        row = conn.execute(select(func.count(), func.coalesce(func.sum(seconds), 0.0), *columns)
                           .where(where, start.isnot(None), end.isnot(None))).one()
        total, total_seconds, per_bucket = row[0], float(row[1] or 0.0), row[2:]
        family = HistogramMetricFamily(name, doc)
        family.add_metric([], [(str(float(b)), int(n or 0)) for b, n in zip(buckets, per_bucket)]
                          + [("+Inf", int(total))], total_seconds)
        yield family


def metrics_text(engine) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(engine))
    return generate_latest(registry)


@bp.get("/metrics")
def metrics():
    """Prometheus text format; with ATTN_GRADER_METRICS_TOKEN set, scrapers must send it."""
    from .extensions import state

    token = current_app.config["METRICS_TOKEN"]
    if token:
        import hmac

        sent = request.headers.get("Authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            response = Response("metrics need 'Authorization: Bearer <metrics token>'\n",
                                status=401, mimetype="text/plain")
            response.headers["WWW-Authenticate"] = "Bearer"
            return response
    return Response(metrics_text(state().engine), mimetype=CONTENT_TYPE_LATEST,
                    headers={"Cache-Control": "no-store"})


def init_app(app: Flask) -> None:
    """Register request ids, the access log, /healthz, /metrics and the database-error answers.

    Called before any other extension registers a ``before_request``: a request that another
    hook refuses (the rate limiter's 429) still gets its request id and its access line."""
    app.before_request(_start_request)
    app.after_request(_finish_request)
    app.teardown_request(_end_request)
    # A connection that broke mid-request (PostgreSQL restarted) raises either of these.
    for unavailable in (OperationalError, InterfaceError):
        app.register_error_handler(unavailable, _database_error)
    app.register_blueprint(bp)
    if app.config.get("ACCESS_LOG_DIR"):  # the access lines a data request can answer for
        from .access_files import keep_access_files

        keep_access_files(access_log, app.config["ACCESS_LOG_DIR"])

