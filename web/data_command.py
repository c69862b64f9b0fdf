"""``attn-grader data``: one person's data on request (export, erasure) and the access-log
files' retention (``web.services.data_requests``, ``web.access_files``)."""
from __future__ import annotations

import getpass
import json
import os

import click

from .cli import cli_config, cli_session


def _operator() -> str:
    """Who ran the command, for the record: the sudo caller where there is one."""
    try:
        return os.environ.get("SUDO_USER") or getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for this uid (a container)
        return f"uid {os.getuid()}"


def _person(session, email: str):
    from .services.users import find_user

    user = find_user(session, email)
    if user is None:
        raise click.ClickException(f"no user {email} (the address as they signed up with; "
                                   "`attn-grader users list` lists them)")
    return user


@click.group()
def data():
    """A person's data on request (export, erasure) and access-log retention."""


reference_option = click.option("--reference", default="",
                                help="the request's ticket or case number, for the record")


@data.command("export")
@click.argument("email")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="write the JSON here (created 0600) [default: standard output]")
@reference_option
def export(email, output, reference):
    """Everything stored about EMAIL, as one JSON document (the export is recorded)."""
    from .services.data_requests import export_person

    config = cli_config()
    with cli_session(config) as session:
        document = export_person(session, _person(session, email),
                                 access_log_dir=config.get("ACCESS_LOG_DIR"),
                                 operator=_operator(), reference=reference)
    text = json.dumps(document, ensure_ascii=False, indent=2, default=str)
    if output is None:
        click.echo(text)
        return
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text + "\n")
    summary = ", ".join(f"{name} {n}" for name, n in document["counts"].items())
    click.echo(f"wrote {output}: {summary}", err=True)


@data.command("erase")
@click.argument("email")
@click.option("--yes", is_flag=True, help="erase without asking")
@reference_option
def erase(email, yes, reference):
    """Remove or anonymise what identifies EMAIL; scores and statistics stay (recorded)."""
    from .services.data_requests import erase_person

    config = cli_config()
    with cli_session(config) as session:
        user = _person(session, email)
        if not yes and not click.confirm(
                f"erase {user.email} (user {user.id}): account details, tokens, LMS identities, "
                f"code, written answers and access-log identity? This cannot be undone",
                default=False):
            click.echo("nothing erased")
            return
        counts = erase_person(session, user, access_log_dir=config.get("ACCESS_LOG_DIR"),
                              operator=_operator(), reference=reference)
    click.echo(f"erased user {user.id}: " + (", ".join(f"{what} {n}" for what, n in
                                                        counts.items()) or "nothing stored"))


@data.command("prune-logs")
@click.option("--days", type=int, default=None,
              help="keep this many days [default: ATTN_GRADER_ACCESS_LOG_RETENTION_DAYS]")
def prune_logs(days):
    """Delete access-log files older than the retention period."""
    from .access_files import prune

    config = cli_config()
    directory = config.get("ACCESS_LOG_DIR")
    if not directory:
        raise click.ClickException("ATTN_GRADER_ACCESS_LOG_DIR is unset: the service keeps no "
                                   "access-log files (prune the log store's own copies there)")
    keep = config["ACCESS_LOG_RETENTION_DAYS"] if days is None else days
    if keep < 0:
        raise click.BadParameter("must be 0 or more", param_hint="--days")
    removed = prune(directory, keep)
    click.echo(f"removed {len(removed)} file(s) older than {keep} day(s) from {directory}"
               + "".join(f"\n  {path.name}" for path in removed))


@data.command("requests")
def requests_log():
    """List the data requests carried out (exports and erasures)."""
    from sqlalchemy import select

    from .models import DataRequest

    with cli_session(cli_config()) as session:
        rows = session.scalars(select(DataRequest).order_by(DataRequest.id)).all()
        for row in rows:
            click.echo(f"{row.created_at:%Y-%m-%d %H:%M}  {row.kind:8} {row.subject:32} "
                       f"by {row.operator or '-'}  {row.reference}".rstrip())
        if not rows:
            click.echo("no data requests recorded")
