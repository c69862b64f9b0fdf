"""``attn-grader check``, ``tasks`` and ``template``: the students' local pre-check."""
from __future__ import annotations

import json
import os
import sys

import click

from . import userconfig
from .i18n import LANGUAGES, N_, T, gettext_for, render

LANG_HELP = ("Language of the output: en, ru or zh [default: `attn-grader config set lang`, "
             "else LANG/LC_ALL, else en].")
PUBLIC_SEED = 20240607  # the local pre-check's inputs; the server's seed is a secret HMAC of task, code and grader
# The service's default ATTN_GRADER_MAX_SUBMISSION_BYTES: a file the pre-check passes but the
# server refuses would cost the student a surprise at the deadline.
SERVER_LIMIT_BYTES = 64 * 1024
# What each sandbox level gives, for the report's last line: the level's name stays as typed (it is
# a value of --sandbox), what it means is said in the reader's language. "auto" is what auto fell
# back to without the outer wall (namespaces, or a plain subprocess with limits): strict when whole.
SANDBOX_ISOLATION = {"local": N_("no isolation"), "none": N_("no isolation"),
                     "auto": N_("partial isolation"), "strict": N_("full isolation")}


def _task_choice():
    from .tasks import TASK_IDS  # every registered task (this package's and the entry points')
    return click.Choice(list(TASK_IDS))


@click.command("check")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--task", type=_task_choice(), required=True, help="Which task the file solves.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object (the grade report).")
@click.option("--sandbox", type=click.Choice(["local", "auto", "strict", "none"]), default="local",
              show_default=True,
              help="How your code runs: local forks it from this warm process (fastest, no isolation: "
                   "it is your own code); auto/strict isolate it as the server does (strict refuses "
                   "without full isolation). The verdicts are the same.")
@click.option("--seed", type=int, default=None, help=f"Seed of the inputs (default: the public {PUBLIC_SEED}).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--only", "only", metavar="CHECK", default=None,
              help="Run one check (e.g. mask.bool_broadcast) on its smallest failing case and show it in full.")
@click.option("--lang", type=click.Choice(LANGUAGES), default=None, help=LANG_HELP)
def check(file, task, as_json, sandbox, seed, device, only, lang):
    """Grade FILE locally, with the same checks as the server (public seed)."""
    import torch

    from .sandbox import SandboxUnavailable

    lang = userconfig.language(lang)
    _ = gettext_for(lang)

    try:
        with open(file, "rb") as f:
            source = f.read()
    except OSError as exc:
        raise click.UsageError(_("cannot read {file}: {error}").format(file=file, error=exc.strerror or exc)) from None
    if device == "cuda":
        if not torch.cuda.is_available():
            raise click.UsageError(_("--device cuda was given but no CUDA device is available here"))
    seed = PUBLIC_SEED if seed is None else seed
    notebook = _notebook_script(file, source, task, as_json)
    if notebook is not None:
        source = notebook
    text = source if isinstance(source, str) else source.decode("utf-8", "replace")
    if not text.lstrip("\ufeff").strip():
        _fail(as_json, task, _("{file} is empty: write your {function}() in it (`attn-grader template {task} > "
                               "{file}` gives a starter)").format(file=file, function=_function(task), task=task),
              lang)
    size = len(source.encode() if isinstance(source, str) else source)
    if size > SERVER_LIMIT_BYTES:
        warning = T("{file} is {size} bytes of code; the server refuses submissions over {limit} bytes "
                    "({kib} KiB) unless its operator raised the limit", file=file, size=size,
                    limit=SERVER_LIMIT_BYTES, kib=SERVER_LIMIT_BYTES // 1024)
        if not as_json:
            click.echo(_("Warning: {warning}").format(warning=render(warning, lang)), err=True)
    # The checks' tensors are small: one thread grades them fastest, and torch's default pool
    # (a thread per core) made a grading several times slower on a busy machine (measured:
    # 0.22 s on one thread, 1.3 s on two with the cores busy). Grading workers do the same.
    torch.set_num_threads(1)
    if sandbox == "local" and device == "cpu":
        from .sandbox import local
        local.prepare()  # forked now, while this process is single-threaded (no progress bar yet)
    from .grading import grade_source
    try:
        if as_json or only:
            report = grade_source(source, task, seed=seed, sandbox=sandbox, device=device, only=only)
        else:
            report = _grade_with_progress(source, task, seed, sandbox, device, file, lang)
    except ValueError as exc:  # an unknown --only check
        raise click.UsageError(str(exc)) from None
    except SandboxUnavailable as exc:
        if as_json:
            click.echo(json.dumps({"task": task, "score": 0, "max_score": 100, "passed": False, "checks": [],
                                   "error": f"sandbox unavailable: {exc}"}))
        else:
            click.echo(_("Error: --sandbox strict cannot run here: {error}").format(error=exc), err=True)
        sys.exit(2)
    if size > SERVER_LIMIT_BYTES:
        report.warnings.append(warning)
    mismatch = torch_mismatch(torch.__version__)
    if mismatch is not None:
        report.warnings.append(mismatch)
    function_cell = _notebook_cells(report, source, task) if notebook is not None else None
    if as_json:
        click.echo(json.dumps({**report.to_dict(), **({"notebook": {"function_cell": function_cell}}
                                                      if notebook is not None else {})}))
    elif only:
        _print_one(report, only, file, task, lang)
    else:
        _print_report(report, file, seed, lang)
        if notebook is not None:
            from .tasks import TITLES
            click.echo(_("{function}() is defined in cell {cell} of {file}").format(
                function=TITLES[task][1], cell=function_cell, file=file) if function_cell
                else _("no cell of {file} defines {function}()").format(file=file, function=TITLES[task][1]))
    _exit_now(0 if report.passed else 1)


def torch_mismatch(local: str, server: str | None = None):
    """A note when this torch is another release than the one the service grades with (the
    server's own, where a graded result says it, else ``grader.TORCH_VERSION``; a build tag such
    as ``+cpu`` does not count), else None."""
    from . import TORCH_VERSION

    server = (server or TORCH_VERSION).split("+")[0]
    if local.split("+")[0] == server:
        return None
    return T("your torch is {local}, the service grades with torch {server}: the checks are the same, but "
             "a rare numerical corner may differ; `pip install 'torch=={server}' --extra-index-url "
             "https://download.pytorch.org/whl/cpu` matches it", local=local, server=server)


def _exit_now(code: int) -> None:
    """Exit without the interpreter's teardown of torch (a third of a second of freeing
    what the process is about to lose anyway). Everything is written and every child is
    gone by now; in-process callers (click's test runner swaps the streams) exit normally."""
    if sys.stdout is sys.__stdout__ and sys.stderr is sys.__stderr__:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _function(task):
    from .tasks import TITLES
    return TITLES[task][1]


def _fail(as_json, task, message, lang=None):
    """End the command with ``message``: one JSON report with --json, else a line on stderr."""
    if as_json:
        click.echo(json.dumps({"task": task, "score": 0, "max_score": 100, "passed": False,
                               "checks": [], "error": message}))
    else:
        _ = gettext_for(lang)
        click.echo(_("Error: {message}").format(message=message), err=True)
    sys.exit(1)


def _notebook_script(file, data, task, as_json):
    """The code cells of a .ipynb FILE as a script (None for a .py); a notebook the grader cannot
    run (magics, shell lines, not a notebook) ends the command with the reason."""
    from .notebook import NotebookError, is_notebook, notebook_script

    if not is_notebook(file):
        return None
    try:
        return notebook_script(data)
    except NotebookError as exc:
        if as_json:
            click.echo(json.dumps({"task": task, "score": 0, "max_score": 100, "passed": False, "checks": [],
                                   "error": f"{file}: {exc}"}))
        else:
            click.echo(f"Error: {file}: {exc}", err=True)
        sys.exit(1)


def _notebook_cells(report, script, task):
    """Tell the report's lines as notebook cells; returns the cell that defines the function."""
    from .notebook import annotate_report
    from .tasks import TITLES

    return annotate_report(report, script).defining_cell(script, TITLES[task][1])


def _grade_with_progress(source, task, seed, sandbox, device, file, lang=None):
    from rich.console import Console

    from .console import progress_bar
    from .grading import grade_source, progress_steps
    from .tasks import get_task

    bar, job = progress_bar(Console(stderr=True), file, progress_steps(get_task(task)), lang)
    with bar:
        def progress(check_id, done, total):
            bar.update(job, description=check_id, completed=done, total=total)

        return grade_source(source, task, seed=seed, sandbox=sandbox, device=device, progress=progress)


def _print_one(report, only, file, task, lang=None):
    """One check in full: its verdict, the case it ran (the smallest that still fails) and its numbers."""
    from rich.console import Console
    from rich.text import Text

    _ = gettext_for(lang)
    console = Console()
    if report.error:
        console.print(Text(render(report.error, lang), style="red"))
        return
    check = next((c for c in report.checks if c.id == only), None)
    if check is None:
        console.print(Text(_("{check} was not run").format(check=only), style="red"))
        return
    colour = "green" if check.passed else "red"
    console.print(Text(f"{check.id}: {_('pass') if check.passed else _('FAIL')}", style=f"bold {colour}"))
    console.print(Text(render(check.message, lang)))
    from .console import details_renderables
    hidden = [k for k in check.details if k.startswith("weights_")] + ["reproduce", "traceback", "diagnosis",
                                                                      "because_of"]
    for shown in details_renderables(check.details, lang, skip=hidden):
        console.print(shown)
    if check.details.get("traceback"):
        console.print(Text(check.details["traceback"]))
    if not check.passed:
        console.print(Text(_("this is the smallest case of the check that still fails, on public inputs; "
                             "the server draws other values of the same kind"), style="dim"))


def first_to_reproduce(report):
    """The failing check a student should run alone first: one no named bug explains (what the
    summary leaves open), a scored one before an unscored one; else the check a bug is charged to."""
    explained = {i for cause in report.causes for i in cause["charged"] + cause["knock_on"]}
    failing = [c for c in report.checks if not c.passed and c.details.get("reproduce")
               and not c.details.get("because_of")]
    return next((c for c in failing if c.id not in explained and c.max_points), None) or \
        next((c for c in failing if c.id not in explained), None) or next(iter(failing), None)


def _print_report(report, file, seed, lang=None):
    from rich.console import Console
    from rich.text import Text

    from .console import error_not_in_checks, for_output, print_checks, print_first_traceback, print_source_caret, score_line

    _ = gettext_for(lang)
    console = for_output(Console())
    said = report.to_dict()
    checks = [dict(c, details=check.details) for c, check in zip(said["checks"], report.checks)]  # uncut
    print_checks(console, _("{file} — task {task}").format(file=file, task=report.task), checks, lang)
    summary = said.get("summary_i18n") or said["summary"]
    if not report.passed and summary and not report.error:  # a load failure is its one message
        console.print(Text(render(summary, lang)))
    first = first_to_reproduce(report)
    if first is not None:
        console.print(Text(_("to see one failure alone, on its smallest case: attn-grader check {file} --task "
                             "{task} --only {check}").format(file=file, task=report.task, check=first.id),
                           style="yellow"))
    print_first_traceback(console, checks, lang)
    print_source_caret(console, checks)
    for stream, text in (("stdout", report.student_stdout), ("stderr", report.student_stderr)):
        if text.strip():  # warnings land on stderr: a student should see them too
            console.print(Text(_("your code printed (on {stream}):").format(stream=stream), style="dim"))
            console.print(text.strip()[-1500:], markup=False, highlight=False)
    console.print(score_line(report.score, report.max_score, report.passed, lang))
    if error_not_in_checks(report.error, checks):  # said once
        console.print(Text(render(report.error, lang), style="red"))
    for w in report.warnings:
        console.print(Text(_("note: {warning}").format(warning=render(w, lang)), style="yellow"))
    level = report.sandbox or "n/a"
    sandbox = _("{level}, {isolation}").format(level=level, isolation=_(SANDBOX_ISOLATION[level])) \
        if level in SANDBOX_ISOLATION else level
    console.print(Text(_("inputs from the public seed {seed}; the server grades on secret inputs of the same kind, "
                         "the same for the same file (grader {version}; sandbox: {sandbox})").format(
        seed=seed, version=__import__('grader').GRADER_VERSION, sandbox=sandbox), style="dim"))


class _TaskOrCommand(click.Group):
    """``attn-grader tasks [TASK]`` shows a spec (each task id is a command of its own, made here);
    ``attn-grader tasks validate PATH`` proves a task folder."""

    def get_command(self, ctx, name):
        if name in self.commands:
            return self.commands[name]
        from .tasks import TASKS
        if name not in TASKS:
            return None

        @click.command(name, help=f"Show the specification of {name}.")
        @click.option("--lang", type=click.Choice(LANGUAGES), default=None, help=LANG_HELP)
        @click.pass_context
        def show(ctx, lang):
            from rich.console import Console
            from rich.markdown import Markdown

            from .tasks import spec_markdown
            lang = lang or ctx.parent.params.get("lang")
            Console().print(Markdown(spec_markdown(name, userconfig.language(lang))))
        return show

    def resolve_command(self, ctx, args):
        from .tasks import TASKS
        if args and self.get_command(ctx, args[0]) is None and not args[0].startswith("-"):
            raise click.UsageError(f"{args[0]!r} is neither a task ({', '.join(TASKS)}) nor 'validate'", ctx)
        return super().resolve_command(ctx, args)


@click.group("tasks", cls=_TaskOrCommand, invoke_without_command=True,
             subcommand_metavar="[TASK] | validate PATH")
@click.option("--lang", type=click.Choice(LANGUAGES), default=None, help=LANG_HELP)
@click.pass_context
def tasks(ctx, lang):
    """Show the specification of TASK (or list the tasks); `tasks validate PATH` proves a task folder."""
    if ctx.invoked_subcommand is not None:
        return
    from rich.console import Console
    from rich.text import Text

    from .tasks import TASKS
    lang = userconfig.language(lang)
    _ = gettext_for(lang)
    console = Console()
    for t in TASKS.values():
        # Text, not markup: a course package's title may contain brackets
        console.print(Text.assemble((t.id, "bold"), "  ", _("{title}: define {function}()  (attn-grader tasks {task} "
                                                            "for the full spec)").format(
            title=t.title_in(lang), function=t.function, task=t.id)))


@tasks.command("validate")
@click.argument("path")
@click.option("--seeds", type=click.IntRange(1, 50), default=5, show_default=True,
              help="Seeds each correct corpus file is graded under.")
@click.option("--sandbox", type=click.Choice(["local", "auto", "strict", "none"]), default="auto", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the findings as one JSON object.")
def validate_command(path, seeds, sandbox, as_json):
    """Prove the task in folder PATH (or a registered task id) before it goes live: its corpus, its bug
    catalogue, its input space, its shortcuts and its cost. Exits 1 when any proof fails."""
    from .validate import load_task, validate

    try:
        task = load_task(path)
    except (ValueError, ImportError) as exc:
        raise click.BadParameter(str(exc), param_hint="'PATH'")
    say = (lambda text: None) if as_json else (lambda text: click.echo(f"  … {text}", err=True))
    result = validate(task, seeds=seeds, sandbox=sandbox, say=say)
    if as_json:
        click.echo(json.dumps(result.to_dict(), ensure_ascii=False))
    else:
        click.echo(f"task {task.id} ({task.folder})")
        for f in result.findings:
            mark = "FAIL" if not f.ok else ("note" if f.warning else "ok  ")
            click.echo(f"{mark}  {f.proof:<9} {f.message}")
        failed = sum(not f.ok for f in result.findings)
        click.echo(f"{task.id}: " + ("every proof passed" if not failed else f"{failed} proof(s) failed"))
    _exit_now(0 if result.ok else 1)


@click.command("template")
@click.argument("task", type=_task_choice())
@click.option("--notebook", is_flag=True, help="Print a Jupyter notebook (.ipynb) instead of a .py file.")
@click.option("--lang", type=click.Choice(LANGUAGES), default=None,
              help="Language of the starter's comments and docstrings (the code is the same in each): "
                   "en, ru or zh [default: `attn-grader config set lang`, else LANG/LC_ALL, else en].")
def template(task, notebook, lang):
    """Print a starter file for TASK (redirect it into your .py or, with --notebook, .ipynb file)."""
    lang = userconfig.language(lang)
    if notebook:
        from .notebook import template_notebook
        click.echo(template_notebook(task, lang), nl=False)
        return
    from .tasks import template as read_template
    click.echo(read_template(task, lang), nl=False)
