"""gunicorn settings for the attn-grader web app (the pages and the JSON API).

    gunicorn -c deploy/gunicorn.conf.py 'web:create_app()'

Every value can be overridden from the environment (GUNICORN_BIND, GUNICORN_WORKERS,
GUNICORN_THREADS), so one file serves every host. The app reads its own settings from
ATTN_GRADER_* variables (see deploy/attn-grader.env.example).

Threads, not async workers: requests spend their time in the database, and the app keeps
no per-process state that threads would have to share (rate limits live in Redis via
ATTN_GRADER_RATELIMIT_STORAGE_URI, the job queue in the database and Redis).
"""
import multiprocessing
import os

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")  # behind nginx/caddy with TLS
worker_class = "gthread"
workers = int(os.environ.get("GUNICORN_WORKERS", min(2 * multiprocessing.cpu_count() + 1, 9)))
# Up to ATTN_GRADER_WAITING_REQUESTS (8) threads of a process may hold a request that waits
# for a result (?wait=, long polling); the rest keep serving pages and the API.
threads = int(os.environ.get("GUNICORN_THREADS", 16))
# A submission upload or a score export may take a while on a slow link; grading never
# happens in the web process, so nothing legitimate needs more than this.
timeout = int(os.environ.get("GUNICORN_TIMEOUT", 60))
graceful_timeout = 30
keepalive = 5
# Recycle workers now and then so a slow leak cannot grow for weeks.
max_requests = 5000
max_requests_jitter = 500
# Import the app before forking: less memory, and a configuration error stops the master
# at once with its message instead of every worker failing separately. Database pools are
# created lazily, so no connection is shared across the fork.
preload_app = True
# The app writes one JSON line per request itself (web.observability); gunicorn's own
# access log would duplicate it.
accesslog = None
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "info")
# Trust X-Forwarded-* only from the local proxy; the app's ATTN_GRADER_TRUSTED_PROXIES
# must match the number of proxies in front.
forwarded_allow_ips = os.environ.get("GUNICORN_FORWARDED_ALLOW_IPS", "127.0.0.1")
# Request line and header limits well above what the pages send, far below abuse.
limit_request_line = 8190
limit_request_fields = 100


def on_starting(server):
    # The app's JSON logs (one line per request, job ids) go to stderr next to gunicorn's.
    from web.observability import configure_logging

    configure_logging("INFO")


def when_ready(server):
    # What the app loads lazily on first use, loaded once in the preloaded master so that every
    # worker is forked with it: the task registry (task modules and entry points, ~0.1 s) and the
    # parsed question bank (~0.4 s; each worker still re-reads it when its files change). The
    # web processes never import torch: grading runs in the workers.
    import grader.tasks
    from web.services import quizzes

    grader.tasks.registry()
    quizzes.question_bank()


def post_fork(server, worker):
    # Engines created before the fork (preload) must not share pooled sockets with the
    # master: drop the inherited connections without closing them under the master's feet.
    from web import db

    for engine in db._engines.values():
        engine.dispose(close=False)
