"""``attn-grader regrade``: queue submissions for grading again, then follow the workers.

The command only queues (``web.services.regrade``, the same path as the instructor pages);
the workers grade, and it waits for them to print each student's old -> new score.
"""
from __future__ import annotations

import click

from .cli import cli_config, migrated_engine
from .db import session_factory, writing


@click.command()
@click.option("--assignment", "assignment_ref", default=None, help="assignment slug or task id")
@click.option("--submission", "submission_id", type=int, default=None, help="one submission's id")
@click.option("--grader-version", "versions", multiple=True, metavar="VERSION",
              help="only submissions last graded by this grader version (repeatable; "
                   "`current`: this installation's)")
@click.option("--not-grader-version", "not_versions", multiple=True, metavar="VERSION",
              help="leave out submissions last graded by this version (repeatable; `current`: "
                   "this installation's, i.e. regrade what older graders scored)")
@click.option("--dry-run", is_flag=True, help="show what would be queued, queue nothing")
@click.option("--yes", is_flag=True, help="queue without asking")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="wait for the workers, then show old -> new scores")
@click.option("--timeout", default=3600.0, show_default=True, help="seconds to wait at most")
def regrade(assignment_ref, submission_id, versions, not_versions, dry_run, yes, wait, timeout):
    """Queue submissions for grading again by the workers (the same job queue as new ones).

    The dry run lists the chosen submissions with the grader version that scored each, and
    how many each version scored in the assignment, this installation's marked."""
    from .dispatch.broker import make_dispatcher
    from .models import Submission
    from .services.regrade import plan_regrades, queue_regrades

    if (assignment_ref is None) == (submission_id is None):
        raise click.UsageError("give --assignment or --submission")
    if (versions or not_versions) and submission_id is not None:
        raise click.UsageError("--grader-version/--not-grader-version select within --assignment")
    config = cli_config()
    engine = migrated_engine(config)
    current = _current_version(config)
    if current is None and "current" in versions + not_versions:
        raise click.UsageError("`current`: this service grades with its own GRADE_FUNCTION, "
                               "whose version is known only from its results; name it")
    versions = [current if v == "current" else v for v in versions]
    not_versions = [current if v == "current" else v for v in not_versions]
    with session_factory(engine)() as session:  # a read: nothing is held while the user decides
        plan = plan_regrades(session, _chosen(session, assignment_ref, submission_id, versions,
                                              not_versions))
        for item in plan:
            state = f"skipped: {item.skipped}" if item.skipped else "queue"
            kept = "  (override kept)" if item.overridden else ""
            click.echo(f"{item.submission_id:>10}  {item.email:30} {_score(item.old_score):>7}  "
                       f"{item.old_version or '-':12} {state}{kept}")
        if assignment_ref is not None:
            click.echo("graded last by: " + ", ".join(
                f"{version or '(not graded)'} {count}"
                + (" (this installation's grader)" if version == current else "")
                for version, count in sorted(_versions(session, assignment_ref).items(),
                                             key=lambda kv: -kv[1])))
    queued = [item for item in plan if item.skipped is None]
    click.echo(f"{len(plan)} submission(s), {len(queued)} to queue")
    if dry_run or not queued:
        click.echo("dry run: nothing queued" if dry_run else "nothing to queue")
        return
    if not yes and not click.confirm("queue these regrades?", default=False):
        click.echo("nothing queued")
        return
    with session_factory(writing(engine))() as session:  # SQLite: the write lock from BEGIN on
        chosen = [session.get(Submission, item.submission_id) for item in queued]
        queued = [item for item in queue_regrades(session, chosen, make_dispatcher(config))
                  if item.skipped is None]  # one may have been queued since the preview
    click.echo(f"queued {len(queued)} regrade job(s)")
    if wait and queued:
        _wait_and_show(engine, queued, timeout)


def _chosen(session, assignment_ref, submission_id, versions=(), not_versions=()) -> list:
    from .models import Submission
    from .services.regrade import assignment_submissions

    if submission_id is not None:
        submission = session.get(Submission, submission_id)
        if submission is None:
            raise click.ClickException(f"no submission {submission_id}")
        return [submission]
    return assignment_submissions(session, _task(session, assignment_ref), versions,
                                  not_versions)


def _task(session, assignment_ref):
    from .services.courses import find_assignment

    assignment = find_assignment(session, assignment_ref)
    if assignment is None or assignment.kind != "task":
        raise click.ClickException(f"no task assignment {assignment_ref!r}")
    return assignment


def _versions(session, assignment_ref) -> dict:
    from .services.regrade import versions_graded

    return versions_graded(session, _task(session, assignment_ref))


def _current_version(config) -> str | None:
    """The version this installation's grader writes: the real grader's, unless the service
    grades with another function (then the version is only known from its results)."""
    import grader
    from grader.settings import BY_NAME

    default = BY_NAME["GRADE_FUNCTION"].default
    return grader.GRADER_VERSION if config.get("GRADE_FUNCTION") == default else None


def _score(score) -> str:
    return "-" if score is None else f"{score:.2f}"


def _wait_and_show(engine, queued, timeout: float) -> None:
    """Follow the queued jobs with a progress bar, then print each score's change."""
    from rich.progress import Progress

    from .models import Submission
    from .services.regrade import wait_for_jobs

    sessions = session_factory(engine)
    with Progress(transient=True) as bar:
        task = bar.add_task("regrading", total=len(queued))
        finished = wait_for_jobs(sessions, [item.job_id for item in queued], timeout,
                                 progress=lambda done: bar.update(task, completed=done))
    with sessions() as session:
        for item in queued:
            sub = session.get(Submission, item.submission_id)
            mark = "  *" if sub.score != item.old_score else ""
            click.echo(f"{item.submission_id:>10}  {item.email:30} {_score(item.old_score):>7} -> "
                       f"{_score(sub.score):>7}  {item.old_version or '-'} -> "
                       f"{sub.grader_version or '-'}  {sub.status}{mark}")
    if not finished:
        raise click.ClickException(f"not every job finished within {timeout:.0f} s; they stay "
                                   "queued for the workers (attn-grader worker)")
