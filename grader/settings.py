"""Every ``ATTN_GRADER_*`` environment variable, declared once: name, type, default, meaning.

The one place a setting is read from the environment. The service (``web.config.load_config``),
the sandbox (``grader.sandbox.policy``, ``pool``, ``wall``), the student CLI (``grader.userconfig``,
``grader.client``), logging and the question tools all read their variables through
:func:`value`; a test greps the tree for any other ``os.environ`` read of an ``ATTN_GRADER_``
variable. ``attn-grader config settings`` prints the table and the docs' Configuration page's
table (docs/operators/configuration.md) is that command's ``--markdown`` output (``tests/test_settings.py`` checks they agree).

It lives in ``grader`` (not ``web``) because the grader package must not import the web app,
and it imports only the standard library so the student's package stays light.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

PREFIX = "ATTN_GRADER_"
GiB, MiB = 1 << 30, 1 << 20
TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
TYPE_WORDS = {int: "an integer", float: "a number", bool: "true or false", str: "text"}


@dataclass(frozen=True)
class Setting:
    """One environment variable ``ATTN_GRADER_<name>``. An empty value counts as unset."""

    name: str
    type: type          # str, int, float or bool
    default: object     # None: unset (``shown`` says what happens then)
    help: str
    group: str          # one of GROUPS
    choices: tuple[str, ...] = ()
    shown: str = ""     # the default as the table says it, where it is computed or None

    @property
    def variable(self) -> str:
        return PREFIX + self.name

    def parse(self, raw: str):
        """``raw`` as this setting's type, or a ValueError that names the variable and the value."""
        text = raw.strip()
        if self.type is bool:
            if text.lower() not in TRUE_WORDS + FALSE_WORDS:
                raise self.error(raw)
            return text.lower() in TRUE_WORDS
        if self.type in (int, float):
            try:
                return self.type(text)
            except ValueError:
                raise self.error(raw) from None
        return self.check(text)

    def check(self, value):
        """``value`` itself when it is one of ``choices`` (or there are none); a ValueError if not."""
        if self.choices and value not in self.choices:
            raise self.error(value)
        return value

    def error(self, raw) -> ValueError:
        expected = (", ".join(self.choices[:-1]) + " or " + self.choices[-1] if self.choices
                    else TYPE_WORDS[self.type])
        return ValueError(f"{self.variable}={raw!r}: expected {expected}")

    def read(self, environ=None):
        """The value from ``environ`` (default ``os.environ``), or the default when unset or empty."""
        raw = (os.environ if environ is None else environ).get(self.variable, "")
        return self.parse(raw) if raw.strip() else self.default

    def default_text(self) -> str:
        if self.shown:
            return self.shown
        if self.default is None:
            return "unset"
        if isinstance(self.default, bool):
            return "`true`" if self.default else "`false`"
        if isinstance(self.default, float):
            return f"`{self.default:g}`"
        if self.type is int and self.name.endswith(("_BYTES", "_SIZE")) and self.default >= MiB:
            unit, word = (GiB, "GiB") if self.default >= GiB else (MiB, "MiB")
            return f"`{self.default}` ({self.default / unit:g} {word})"
        return f"`{self.default}`"


# In the order the Configuration page's table lists them.
GROUPS = {
    "service": "the web service",
    "workers": "grading workers and the job queue",
    "mail": "password-reset e-mail",
    "logging": "logs and metrics",
    "sandbox": "the sandbox, read by each grading process (`attn-grader sandbox policy` shows the result)",
    "student CLI": "`attn-grader submit` and `attn-grader config`",
    "tools": "instructors' and researchers' commands",
}

_S = Setting
SETTINGS: tuple[Setting, ...] = (
    # -- the web service
    _S("INSTANCE_PATH", str, "instance", "folder for the SQLite database, the generated secret key "
       "and the demo credentials", "service"),
    _S("DATABASE_URL", str, None, "SQLAlchemy URL, e.g. `postgresql+psycopg://user@host/db`", "service",
       shown="SQLite in the instance folder"),
    _S("MIGRATION_LOCK_TIMEOUT", int, 10, "seconds `attn-grader db upgrade` waits for a table's lock "
       "on PostgreSQL before that migration gives up (rolled back, the earlier ones kept: run it "
       "again once the long transaction ended) instead of holding every query on the table", "service"),
    _S("SECRET_KEY", str, None, "Flask's secret for sessions and CSRF", "service",
       shown="generated once into `<instance>/secret_key` (0600)"),
    _S("QUIZ_SECRET", str, None, "key of the per-student quiz variants (HMAC)", "service",
       shown="derived from the secret key"),
    _S("PAGES", bool, True, "serve the HTML pages (`false`: the JSON API only)", "service"),
    _S("SEED_DEMO", bool, True, "`serve` seeds the demo course and accounts into an empty database",
       "service"),
    _S("DEMO_PASSWORD", str, None, "password of the demo accounts", "service",
       shown="generated and printed"),
    _S("MAX_SUBMISSION_BYTES", int, 64 * 1024, "largest accepted source file", "service"),
    _S("WAITING_REQUESTS", int, 8, "requests per web process that may wait for a result at once "
       "(`?wait=`); each holds a server thread, the rest answer at once", "service"),
    _S("RATELIMIT_STORAGE_URI", str, "memory://", "Flask-Limiter storage; use `redis://…` with several "
       "web processes", "service"),
    _S("API_RATE_LIMIT", str, "120 per minute", "per-token limit on every `/api/v1` request", "service"),
    _S("HTTPS", bool, False, "behind TLS: secure cookies and HSTS", "service"),
    _S("TRUSTED_PROXIES", int, 0, "number of proxies whose `X-Forwarded-For` is trusted (rate limits, "
       "logs, absolute links)", "service"),
    _S("PASSWORD_RESET_SECONDS", int, 3600, "how long a password-reset link stays valid", "service"),
    _S("LTI_ALLOW_HTTP", bool, False, "accept `http://` LMS URLs in LTI registrations (a local test LMS "
       "only; an LMS on a network must use https)", "service"),
    # -- grading workers and the job queue
    _S("WORKERS", int, 2, "grading worker processes started by `serve`", "workers"),
    _S("SANDBOX", str, "auto", "sandbox level the workers grade with: `auto`, `strict` (refuses to start "
       "without every layer), `none`", "workers", choices=("auto", "strict", "none")),
    _S("SANDBOX_PREWARM", bool, True, "each grading worker keeps one sandboxed child forked, walled in "
       "and waiting (single use, the same isolation), so a submission does not wait for its "
       "sandbox's set-up; `false`: it is set up after the claim (GPU runs always pre-warm)", "workers"),
    _S("GRADE_FUNCTION", str, "grader.grading:grade_source", "`module:function` the workers grade with",
       "workers"),
    _S("QUIZ_GRADE_FUNCTION", str, "web.services.quiz_grading:grade_code_try",
       "`module:function` the workers grade quiz code answers with", "workers"),
    _S("BROKER_URL", str, None, "`redis://host:port/db` or `amqp://user:password@host:5672/vhost` "
       "(RabbitMQ) to wake workers through Dramatiq", "workers",
       shown="unset (workers poll the database)"),
    _S("BROKER_NAMESPACE", str, "attn_grader", "prefix of the broker's Redis keys (Redis only; on "
       "RabbitMQ use a vhost per installation)", "workers"),
    _S("LEASE_SECONDS", float, 60.0, "a running job not renewed for this long is presumed lost", "workers"),
    _S("MAX_ATTEMPTS", int, 3, "claims per job before it fails as \"grading host lost\"", "workers"),
    _S("QUEUED_STALE_SECONDS", float, 120.0, "a queued `prefer-gpu` job no GPU worker claimed for "
       "this long moves to the cpu queue (a job that merely waits is never re-sent: claims take "
       "the longest-waiting job)", "workers"),
    _S("MAX_GRADE_SECONDS", float, 900.0, "a grading run longer than this is presumed stuck: the job "
       "goes to another worker, the process restarts", "workers"),
    _S("RECONCILE_SECONDS", float, 10.0, "how often the reconciler runs inside `serve` and `worker`",
       "workers"),
    _S("POLL_SECONDS", float, 2.0, "an idle worker's own look at the database: a polling worker's "
       "fallback re-check (a job queued on its host wakes it at once); a broker worker's, once no "
       "message came for this long (a message lost with Redis costs no more)", "workers"),
    _S("TORCH_THREADS", int, 0, "torch threads per grading worker; `0`: the worker's share of the cores "
       "this process may use (`os.sched_getaffinity` / workers on the host, at least 1)", "workers"),
    # -- password-reset e-mail
    _S("SMTP_HOST", str, None, "mail server for password-reset links", "mail",
       shown="unset (no reset by e-mail)"),
    _S("SMTP_PORT", int, 587, "the mail server's port", "mail"),
    _S("SMTP_SECURITY", str, "starttls", "`starttls` (port 587), `ssl` (implicit TLS, port 465) or "
       "`none` (a relay on localhost only); certificates are verified", "mail",
       choices=("starttls", "ssl", "none")),
    _S("SMTP_USERNAME", str, None, "login at the mail server, if it needs one", "mail"),
    _S("SMTP_PASSWORD", str, None, "password for `SMTP_USERNAME`", "mail"),
    _S("SMTP_TIMEOUT", float, 10.0, "seconds to wait for the mail server", "mail"),
    _S("SMTP_CA_FILE", str, None, "CA certificates (PEM) to verify the mail server with, for a relay "
       "with an internal CA", "mail", shown="the system's CAs"),
    _S("MAIL_FROM", str, "attn-grader <no-reply@localhost>", "`From:` of the service's e-mail; use an "
       "address your mail server may send as", "mail"),
    # -- logs and metrics
    _S("LOG_LEVEL", str, None, "level of the service's log lines: `DEBUG`, `INFO`, `WARNING`, "
       "`ERROR`", "logging", shown="`INFO` (`WARNING` for `serve`, which still writes its `web.access` lines)"),
    _S("LOG_FORMAT", str, None, "`json` (one object per line) or `text`", "logging",
       choices=("json", "text"), shown="`json` (`text` on a terminal)"),
    _S("ACCESS_LOG_DIR", str, None, "folder where the web service also keeps its access lines as one "
       "JSON-lines file a day (`access-YYYY-MM-DD.jsonl`), which `attn-grader data` exports, "
       "anonymises and prunes", "logging", shown="unset (access lines go to the log stream only)"),
    _S("ACCESS_LOG_RETENTION_DAYS", int, 90, "days of access-log files `attn-grader data prune-logs` "
       "keeps in `ACCESS_LOG_DIR` (run it daily, e.g. from a systemd timer or cron)", "logging"),
    _S("METRICS_TOKEN", str, None, "if set, `/metrics` needs `Authorization: Bearer <token>`", "logging"),
    # -- the sandbox: one submission's run (grader/sandbox/policy.py's Limits reads these)
    _S("SANDBOX_MEMORY_BYTES", int, 2 * GiB, "memory of a run: the cgroup's memory.max (all its "
       "processes) and RLIMIT_DATA", "sandbox"),
    _S("SANDBOX_CPU_SECONDS", int, 20, "RLIMIT_CPU per process, soft = hard (a SIGKILL)", "sandbox"),
    _S("SANDBOX_WALL_SECONDS", float, 60.0, "the whole session of one submission, in the child's own "
       "time (its waits for a busy core are not charged)", "sandbox"),
    _S("SANDBOX_CALL_SECONDS", float, 10.0, "one call of the student's function; a hung call costs "
       "this much", "sandbox"),
    _S("SANDBOX_LOAD_SECONDS", float, 20.0, "import of the student's file (cold: torch too)", "sandbox"),
    _S("SANDBOX_PROCESSES", int, 64, "the cgroup's pids.max and RLIMIT_NPROC", "sandbox"),
    _S("SANDBOX_FILE_SIZE", int, 16 * MiB, "RLIMIT_FSIZE: the largest file a run may write", "sandbox"),
    _S("SANDBOX_TMP_SIZE", int, 64 * MiB, "bytes of the run's private `/tmp` (tmpfs)", "sandbox"),
    _S("SANDBOX_OPEN_FILES", int, 256, "RLIMIT_NOFILE", "sandbox"),
    _S("SANDBOX_OUTPUT_BYTES", int, 1 * MiB, "stdout and stderr kept of a run, each", "sandbox"),
    _S("SANDBOX_UID_BASE", int, 60000, "first of the per-run uids (no passwd entry needed); read once "
       "per process", "sandbox"),
    _S("SANDBOX_UID_SLOTS", int, 1000, "how many per-run uids, each held by an flock across the host's "
       "grading processes; read once per process", "sandbox"),
    _S("SANDBOX_SECCOMP", str, "allow-list", "the system-call filter: `allow-list`, `deny-list` (GPU runs "
       "use it until CUDA's calls are measured) or `log` (measuring the list, never for grading)",
       "sandbox", choices=("allow-list", "deny-list", "log")),
    _S("SANDBOX_WARM_WORKERS", int, 1, "pre-started single-use children kept per pool (GPU runs, and "
       "CPU runs in grading workers with `SANDBOX_PREWARM`)", "sandbox"),
    _S("BWRAP", str, None, "the bubblewrap binary of the sandbox's outer wall", "sandbox",
       shown="`bwrap` on the PATH"),
    # -- the student's command line
    _S("CONFIG", str, None, "the settings file of `attn-grader config`", "student CLI",
       shown="`~/.config/attn-grader/config.ini` (click's app folder)"),
    _S("SERVER", str, None, "URL of the grading service for `submit` (before `config set server`)",
       "student CLI", shown="from `attn-grader config`"),
    _S("TOKEN", str, None, "API token for `submit` (before `config set token`)", "student CLI",
       shown="from `attn-grader config`"),
    _S("LANG", str, None, "language of `check`'s and `submit`'s output: en, ru or zh (before "
       "`config set lang`)", "student CLI", shown="from `attn-grader config`, else LANG/LC_ALL, else en"),
    # -- instructors' and researchers' tools
    _S("SEEDS", str, None, "the course's source texts for the question bank's copying rule "
       "(`attn-grader questions validate`)", "tools", shown="`../shared/seeds` beside the checkout"),
    _S("DEVICE", str, None, "device of the reference experiments (`attn-grader experiments`), "
       "e.g. `cpu` or `cuda:1`", "tools", shown="CUDA when visible, else the CPU"),
)
del _S
BY_NAME = {s.name: s for s in SETTINGS}


def setting(name: str) -> Setting:
    """The declaration of ``name`` (without the prefix); a KeyError names an undeclared one."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"{PREFIX}{name} is not a declared setting (grader/settings.py)") from None


def value(name: str, environ=None):
    """The current value of ``ATTN_GRADER_<name>``, typed and checked, or its default."""
    return setting(name).read(environ)


def group(name: str) -> tuple[Setting, ...]:
    return tuple(s for s in SETTINGS if s.group == name)


def markdown_table() -> str:
    """The Configuration page's table (docs/operators/configuration.md): one row per variable, grouped as ``GROUPS``."""
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    for key, title in GROUPS.items():
        rows.append(f"| **{key}** | | {title} |")
        for s in group(key):
            meaning = s.help.replace("|", r"\|")
            rows.append(f"| `{s.variable}` | {s.default_text()} | {meaning} |")
    return "\n".join(rows)
