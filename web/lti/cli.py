"""``attn-grader lti``: register LMS platforms, show the tool's URLs and keys, send grades,
sync rosters. The same operations as the instructor's page at ``/instructor/lti``."""
from __future__ import annotations

import json
import logging
import time

import click

from ..cli import cli_config, _logging, cli_session


def _platform(session, ref):
    from .platforms import find_platform

    platform = find_platform(session, ref)
    if platform is None:
        raise click.ClickException(f"no LTI platform {ref!r}; see `attn-grader lti platforms list`")
    return platform


@click.group()
def lti():
    """LMS integration (LTI 1.3): platforms, keys, tool URLs, passback, rosters."""


@lti.command("urls")
@click.option("--base-url", required=True, help="this service's public address, e.g. "
              "https://grader.example.edu")
def urls(base_url):
    """The URLs to enter in the LMS's tool registration."""
    from .platforms import tool_urls

    for label, value in tool_urls(base_url).rows():
        click.echo(f"{label:40} {value}")


@lti.command("registration-url")
@click.option("--base-url", required=True, help="this service's public address, e.g. "
              "https://grader.example.edu")
@click.option("--course", "course_slug", default=None,
              help="the course its launches join [default: the default course]")
def registration_url(base_url, course_slug):
    """A dynamic-registration URL to paste into the LMS (valid 7 days, for one LMS)."""
    from sqlalchemy import select

    from ..models import Course
    from .registration import registration_url as make_url

    config = cli_config()
    if course_slug:
        with cli_session(config) as session:
            if session.scalar(select(Course).where(Course.slug == course_slug)) is None:
                raise click.ClickException(f"no course {course_slug!r}")
    click.echo(make_url(base_url, config["SECRET_KEY"], course_slug))


@lti.group()
def platforms():
    """Registered LMS platforms."""


@platforms.command("add")
@click.option("--name", default="", help="a label for you [default: the issuer's host]")
@click.option("--issuer", required=True, help="the platform's 'iss'")
@click.option("--client-id", required=True, help="the client id the LMS gave this tool")
@click.option("--login-url", "auth_login_url", required=True,
              help="the LMS's OIDC authentication request URL")
@click.option("--token-url", "auth_token_url", required=True, help="the LMS's access token URL")
@click.option("--jwks-url", "key_set_url", required=True, help="the LMS's public keyset URL")
@click.option("--audience", "auth_audience", default=None,
              help="token audience, if the LMS needs one other than the token URL")
@click.option("--deployment", "deployment_ids", multiple=True,
              help="a deployment id (repeatable); none accepts any deployment")
@click.option("--course", "course_slug", default=None,
              help="the course its launches join [default: the default course]")
@click.option("--allow-http", is_flag=True, help="accept http:// URLs (a local test LMS only)")
def platforms_add(deployment_ids, course_slug, **fields):
    """Register a platform (an LMS instance and this tool's client id there)."""
    from sqlalchemy import select

    from ..models import Course
    from .platforms import RegistrationError, add_platform

    with cli_session(cli_config()) as session:
        course = None
        if course_slug:
            course = session.scalar(select(Course).where(Course.slug == course_slug))
            if course is None:
                raise click.ClickException(f"no course {course_slug!r}")
        try:
            platform = add_platform(session, deployment_ids=list(deployment_ids), course=course,
                                    **fields)
        except RegistrationError as exc:
            raise click.ClickException(str(exc)) from None
        session.commit()
        click.echo(f"registered platform {platform.id} ({platform.name})")


@platforms.command("list")
@click.option("--json", "as_json", is_flag=True)
def platforms_list(as_json):
    """The registered platforms."""
    from .platforms import list_platforms

    with cli_session(cli_config()) as session:
        rows = [{"id": p.id, "name": p.name, "issuer": p.issuer, "client_id": p.client_id,
                 "deployment_ids": p.deployment_ids, "login_url": p.auth_login_url,
                 "course": p.course.slug if p.course else None,
                 "token_url": p.auth_token_url, "jwks_url": p.key_set_url}
                for p in list_platforms(session)]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        deployments = ",".join(row["deployment_ids"]) or "any"
        click.echo(f"{row['id']:>3}  {row['name']}  iss={row['issuer']}  "
                   f"client_id={row['client_id']}  deployments={deployments}  "
                   f"course={row['course'] or '(default)'}")
    if not rows:
        click.echo("no platforms registered")


@platforms.command("course")
@click.argument("platform")
@click.argument("course_slug", required=False)
def platforms_course(platform, course_slug):
    """Tie a platform's launches to one course (no COURSE_SLUG: the default course).

    Everyone that LMS calls course staff becomes an instructor here; a platform (one LMS
    registration, in Moodle one tool, so one deployment) per LMS course keeps courses apart.
    Accounts already enrolled stay where they are."""
    from sqlalchemy import select

    from ..models import Course

    with cli_session(cli_config()) as session:
        row = _platform(session, platform)
        course = None
        if course_slug:
            course = session.scalar(select(Course).where(Course.slug == course_slug))
            if course is None:
                raise click.ClickException(f"no course {course_slug!r}")
        row.course = course
        session.commit()
        click.echo(f"platform {row.id}: launches join "
                   f"{course.slug if course else 'the default course'}")


@platforms.command("deployments")
@click.argument("platform")
@click.argument("deployment_ids", nargs=-1)
def platforms_deployments(platform, deployment_ids):
    """Set a platform's accepted deployment ids (none: accept any)."""
    from .platforms import set_deployments

    with cli_session(cli_config()) as session:
        row = _platform(session, platform)
        set_deployments(session, row, list(deployment_ids))
        session.commit()
        click.echo(f"platform {row.id}: deployments {', '.join(row.deployment_ids) or 'any'}")


@platforms.command("remove")
@click.argument("platform")
@click.option("--yes", is_flag=True, help="do not ask")
def platforms_remove(platform, yes):
    """Remove a platform; its launches stop working, its users' accounts stay."""
    from .platforms import remove_platform

    with cli_session(cli_config()) as session:
        row = _platform(session, platform)
        if not yes:
            click.confirm(f"remove platform {row.id} ({row.name})?", abort=True)
        remove_platform(session, row)
        session.commit()
        click.echo(f"removed platform {row.id}")


@lti.command("jwks")
@click.option("--rotate", is_flag=True, help="generate a new signing key first")
def jwks(rotate):
    """Print the tool's public keys (what /lti/jwks serves)."""
    from .keys import jwks as public_keys, rotate_key

    with cli_session(cli_config()) as session:
        if rotate:
            rotate_key(session)
        data = public_keys(session)
        session.commit()
    click.echo(json.dumps(data, indent=2))


@lti.command("send")
@click.option("--loop", is_flag=True, help="keep sending every ATTN_GRADER_RECONCILE_SECONDS")
def send(loop):
    """Send due scores to the LMS now (serve and worker do this by themselves)."""
    from ..cli import migrated_engine
    from .passback import send_due

    _logging("INFO")
    logging.getLogger("alembic").setLevel(logging.WARNING)  # the migration check's chatter
    config = cli_config()
    engine = migrated_engine(config)
    while True:
        report = send_due(engine, lease_seconds=float(config["LEASE_SECONDS"]))
        click.echo(f"sent {len(report.sent)}, will retry {len(report.retrying)}")
        for row_id, error in report.errors.items():
            click.echo(f"  score {row_id}: {error}")
        if not loop:
            return
        time.sleep(float(config["RECONCILE_SECONDS"]))


@lti.command("outbox")
@click.option("--pending", is_flag=True, help="only scores the LMS does not have yet")
def outbox(pending):
    """Scores waiting for (or delivered to) the LMS."""
    from .passback import outbox as rows

    with cli_session(cli_config()) as session:
        found = rows(session, pending_only=pending)
        if not found:
            click.echo("no scores to send" if pending else "no scores in the outbox")
        for s in found:
            state = "sent" if s.sent_version >= s.version else f"waiting, {s.attempts} failures"
            click.echo(f"{s.user.email}  {s.link.assignment.slug}  "
                       f"{s.score_given:g}/{s.score_maximum:g}  {state}"
                       + (f"  last error: {s.last_error}" if s.last_error else ""))


@lti.command("roster")
@click.argument("platform")
@click.option("--context", "context_id", default=None, help="the LMS course id [default: all]")
def roster(platform, context_id):
    """Sync the roster (NRPS) of a platform's LMS courses into enrollments."""
    from sqlalchemy import select

    from .models import LtiContext
    from .roster import sync_roster

    with cli_session(cli_config()) as session:
        row = _platform(session, platform)
        query = select(LtiContext).where(LtiContext.platform_id == row.id)
        if context_id:
            query = query.where(LtiContext.context_id == context_id)
        contexts = session.scalars(query).all()
        if not contexts:
            raise click.ClickException("no LMS course has launched this tool yet")
        for context in contexts:
            try:
                result = sync_roster(session, context)
            except Exception as exc:
                session.rollback()
                raise click.ClickException(f"{context.context_id}: {exc}") from None
            session.commit()
            click.echo(f"{context.title or context.context_id}: {result.describe()}")
