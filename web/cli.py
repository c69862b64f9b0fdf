"""Service commands of ``attn-grader``: serve, worker, db, users, reconcile (regrade: ``regrade_command``)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import click

from .config import load_config
from .db import DatabaseNotMigrated, check_migrated, get_engine, session_factory


def cli_config() -> dict:
    try:
        return load_config()
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


def migrated_engine(config: dict):
    engine = get_engine(config["DATABASE_URL"])
    try:
        check_migrated(engine)
    except DatabaseNotMigrated as exc:
        raise click.ClickException(str(exc)) from None
    return engine


def cli_session(config: dict):
    return session_factory(migrated_engine(config))()


def _logging(level: str = "INFO", access_lines: bool = False) -> None:
    """The command's logging; ``access_lines``: the web's one line per request (``web.access``,
    INFO) is written even where the command's own level is higher, unless the operator set
    ATTN_GRADER_LOG_LEVEL."""
    import logging

    from grader import settings

    from .observability import access_log, configure_logging

    try:  # JSON lines (text on a terminal); ATTN_GRADER_LOG_FORMAT/_LOG_LEVEL override
        configure_logging(level)
        chosen = settings.value("LOG_LEVEL")
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    if access_lines and not chosen:
        access_log.setLevel(logging.INFO)


# ---- serve / worker / reconcile ----------------------------------------------------------

def _sandbox_preflight(config: dict) -> None:
    """With ATTN_GRADER_SANDBOX=strict, refuse to start graders on a host that lacks a layer.

    Without this, every job would fail on this host one attempt at a time; an operator
    should hear what is missing once, at start-up.
    """
    if config["SANDBOX"] != "strict":
        return
    from grader.sandbox import strict_problems

    problems = strict_problems()
    if problems:
        raise click.ClickException(
            "ATTN_GRADER_SANDBOX=strict, but this host lacks: " + "; ".join(problems)
            + ". Install what is missing, or set ATTN_GRADER_SANDBOX=auto to grade with the "
              "strongest isolation available (not for untrusted students).")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
@click.option("--workers", type=int, default=None,
              help="grading worker processes [default: ATTN_GRADER_WORKERS or 2]")
@click.option("--threads", default=16, show_default=True,
              help="web server threads (up to ATTN_GRADER_WAITING_REQUESTS of them may hold "
                   "a request waiting for a result)")
@click.option("--demo/--no-demo", default=None, help="seed demo accounts into an empty database")
def serve(host, port, workers, threads, demo):
    """Start the web server and grading workers (http://127.0.0.1:5000)."""
    import waitress

    from . import create_app
    from .dispatch.supervisor import Supervisor, worker_specs
    from .housekeeping import host_round
    from .services.demo import load_demo_credentials, seed_demo

    _logging("WARNING", access_lines=True)
    config = cli_config()
    engine = migrated_engine(config)
    accounts = None
    if config["SEED_DEMO"] if demo is None else demo:
        with session_factory(engine)() as session:
            accounts = seed_demo(session, password=config["DEMO_PASSWORD"],
                                 credentials_dir=config["INSTANCE_PATH"])
        accounts = accounts or load_demo_credentials(config["INSTANCE_PATH"])
    app = create_app()
    workers = config["WORKERS"] if workers is None else workers
    if workers:
        _sandbox_preflight(config)
    # Bind the port before starting workers, so a port in use is one clear line, not a
    # traceback after workers were already forked. Behind a proxy (TRUSTED_PROXIES) the
    # app's ProxyFix reads X-Forwarded-For, which waitress would otherwise strip.
    try:
        server = waitress.create_server(
            app, host=host, port=port, threads=threads, ident="attn-grader",
            clear_untrusted_proxy_headers=not app.config.get("TRUSTED_PROXIES"))
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}"
                                   " (is another server using it? pick another with --port, or"
                                   f" `make run PORT={port + 1}` from the checkout)")
    supervisor = Supervisor(config, worker_specs(workers), housekeeping=host_round)
    supervisor.start()
    mode = "Dramatiq via " + config["BROKER_URL"] if config["BROKER_URL"] else "database queue"
    click.echo(f"attn-grader serving http://{host}:{port}/  ({workers} grading workers, {mode})")
    if workers:
        from grader.sandbox.backends import isolation_summary
        click.echo(isolation_summary(config["SANDBOX"]))
    click.echo(f"database: {engine.url.render_as_string(hide_password=True)}")
    if accounts:
        click.echo(accounts.describe())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        click.echo("stopping grading workers ...")
        supervisor.stop()


def _visible_gpus() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")  # CUDA's own variable, not one of ours
    if env is not None:
        return [g for g in env.split(",") if g.strip()]
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(out.stdout.splitlines()) if line.startswith("GPU")]


@click.command()
@click.option("--queues", default="cpu", show_default=True, help="comma-separated: cpu,gpu")
@click.option("--processes", type=int, default=None,
              help="CPU worker processes [default: number of cores]")
@click.option("--gpus", default=None, help="GPU ids for the gpu queue [default: all visible]")
@click.option("--reconcile/--no-reconcile", default=True, show_default=True,
              help="also run the reconciler in this process")
def worker(queues, processes, gpus, reconcile):
    """Run grading workers on this host (one process per GPU for the gpu queue)."""
    from .dispatch.supervisor import Supervisor, worker_specs
    from .housekeeping import host_round

    _logging()
    config = cli_config()
    migrated_engine(config)
    _sandbox_preflight(config)
    wanted = {q.strip() for q in queues.split(",") if q.strip()}
    unknown = wanted - {"cpu", "gpu"}
    if unknown or not wanted:
        raise click.BadParameter(f"unknown queue(s) {sorted(unknown)}; use cpu and/or gpu",
                                 param_hint="--queues")
    cpu = (processes or os.cpu_count() or 1) if "cpu" in wanted else 0
    gpu_ids = []
    if "gpu" in wanted:
        gpu_ids = [g.strip() for g in gpus.split(",")] if gpus else _visible_gpus()
        if not gpu_ids:
            raise click.ClickException("--queues gpu: no GPU found (nvidia-smi -L lists none); "
                                       "pass --gpus 0,1 or drop the gpu queue")
    supervisor = Supervisor(config, worker_specs(cpu, gpu_ids),
                            housekeeping=host_round if reconcile else None)
    supervisor.start()
    mode = "Dramatiq " + config["BROKER_URL"] if config["BROKER_URL"] else "database polling"
    click.echo(f"grading workers: {cpu} cpu, {len(gpu_ids)} gpu ({mode}); Ctrl-C stops")
    from grader.sandbox.backends import isolation_summary
    click.echo(isolation_summary(config["SANDBOX"]))
    signal.signal(signal.SIGTERM, lambda *_: supervisor.stop_event.set())
    try:
        supervisor.wait()
    except KeyboardInterrupt:
        pass
    finally:
        supervisor.stop()


@click.command()
@click.option("--loop", is_flag=True, help="keep running every ATTN_GRADER_RECONCILE_SECONDS")
def reconcile(loop):
    """Re-notify lost or stale grading jobs; fail those that lost their host too often."""
    from .dispatch.broker import make_dispatcher
    from .services.grading import reconcile_jobs as run

    config = cli_config()
    engine = migrated_engine(config)
    dispatcher = make_dispatcher(config)
    while True:
        report = run(engine, dispatcher, queued_stale_seconds=config["QUEUED_STALE_SECONDS"])
        click.echo(f"jobs failed for a lost host: {_job_ids(report.failed)}; "
                   f"jobs re-notified: {_job_ids(report.renotified)}")
        if not loop:
            return
        time.sleep(config["RECONCILE_SECONDS"])


def _job_ids(ids) -> str:
    """'none', or '2 (ids 14, 15)'."""
    return f"{len(ids)} (ids {', '.join(map(str, ids))})" if ids else "none"


# ---- db ----------------------------------------------------------------------------------

@click.group()
def db():
    """Database migrations (Alembic)."""


@db.command()
@click.argument("revision", default="head")
def upgrade(revision):
    """Apply migrations up to REVISION (default: the newest)."""
    from .db import current_revision, upgrade as run_upgrade
    from .schema import code_chain, schema_state

    config = cli_config()
    engine = get_engine(config["DATABASE_URL"])
    state = schema_state(engine)
    if state.current is not None and state.current not in {r for r, _d, _f in code_chain()}:
        # Alembic would only say it "can't locate revision": this code predates the database.
        raise click.ClickException(f"the database is at revision {state.current}, newer than "
                                   f"this code's {state.head}: nothing to upgrade here. "
                                   + state.advice)
    run_upgrade(config["DATABASE_URL"], revision)
    click.echo(f"database {engine.url.render_as_string(hide_password=True)} "
               f"is at revision {current_revision(engine)}")


@db.command()
@click.argument("revision")
def downgrade(revision):
    """Revert migrations down to REVISION ("base" empties the database)."""
    from alembic import command

    from .db import alembic_config

    command.downgrade(alembic_config(cli_config()["DATABASE_URL"]), revision)
    click.echo(f"downgraded to {revision}")


@db.command()
def current():
    """Show the database's revision and the code's."""
    from .schema import schema_state

    state = schema_state(get_engine(cli_config()["DATABASE_URL"]))
    click.echo(f"database: {state.current or '(empty)'}; code: {state.head}")
    if state.current != state.head:
        click.echo(("usable: " if state.usable else "NOT usable: ") + state.summary
                   + (f"\n-> {state.advice}" if state.advice else ""))


@db.command()
@click.option("-m", "--message", required=True, help="what the revision changes")
def revision(message):
    """Autogenerate a revision from the models (read it before committing)."""
    from alembic import command

    from .db import alembic_config

    command.revision(alembic_config(cli_config()["DATABASE_URL"]), message=message,
                     autogenerate=True)


# ---- users -------------------------------------------------------------------------------

@click.group()
def users():
    """Manage accounts and API tokens."""


@users.command("add")
@click.argument("email")
@click.option("--role", type=click.Choice(["student", "instructor"]), default="student",
              show_default=True)
@click.option("--name", default="", help="display name [default: the email's local part]")
@click.option("--password-stdin", is_flag=True, help="read the password from standard input")
def users_add(email, role, name, password_stdin):
    """Create an account (enrolled in the default course)."""
    from .services.courses import ensure_default_course
    from .services.users import add_user

    password = sys.stdin.readline().rstrip("\r\n") if password_stdin else None
    with cli_session(cli_config()) as session:
        ensure_default_course(session)
        try:
            user = add_user(session, email, role, password, name=name)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        session.commit()
        note = "" if password else " (no password: web login disabled until one is set)"
        click.echo(f"added {user.role} {user.email}{note}")


@users.command("token")
@click.argument("email")
@click.option("--label", default="cli", show_default=True)
def users_token(email, label):
    """Print a new API token for EMAIL (shown only this once)."""
    from .auth import issue_token
    from .services.users import find_user

    with cli_session(cli_config()) as session:
        user = find_user(session, email)
        if user is None:
            raise click.ClickException(f"no user {email}; add one with `attn-grader users add`")
        token = issue_token(session, user, label)
        session.commit()
    click.echo(token)


@users.command("password")
@click.argument("email")
def users_password(email):
    """Set EMAIL's password, read from standard input."""
    from .services.users import find_user, set_password

    password = sys.stdin.readline().rstrip("\r\n")
    with cli_session(cli_config()) as session:
        user = find_user(session, email)
        if user is None:
            raise click.ClickException(f"no user {email}")
        try:
            set_password(user, password)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        session.commit()
    click.echo(f"password set for {email}")


@users.command("revoke")
@click.argument("email")
def users_revoke(email):
    """Revoke every API token of EMAIL."""
    from .auth import revoke_tokens
    from .services.users import find_user

    with cli_session(cli_config()) as session:
        user = find_user(session, email)
        if user is None:
            raise click.ClickException(f"no user {email}")
        count = revoke_tokens(session, user)
        session.commit()
    click.echo(f"revoked {count} token(s) of {email}")


@users.command("list")
def users_list():
    """List accounts."""
    from sqlalchemy import select

    from .models import User

    with cli_session(cli_config()) as session:
        for user in session.scalars(select(User).order_by(User.role, User.email)):
            flags = "" if user.is_active else " (inactive)"
            click.echo(f"{user.role:10} {user.email}{flags}")
