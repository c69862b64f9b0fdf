"""The ``attn-grader`` command line.

Subcommands live next to what they drive and are imported only when used, so
``attn-grader check`` never loads the web app or the database layer, and the
grader package itself stays free of them.

Students install only the pre-check (``pip install attn-grader``); the service's commands
need the ``[server]`` extra, and say so instead of failing with a bare ImportError.
"""
from __future__ import annotations

import importlib

import click

# The commands a student uses, in the order they meet them: (module:attribute, one-line help).
STUDENT_COMMANDS = {
    "tasks": ("grader.commands:tasks", "Show what each task asks for, in your language (sdpa, mha, ...)."),
    "template": ("grader.commands:template", "Print a starter file for a task."),
    "check": ("grader.commands:check", "Grade an attention file locally (same checks as the server)."),
    "config": ("grader.userconfig:config", "Remember the server's URL and your API token; "
               "`config settings` lists every ATTN_GRADER_* variable."),
    "submit": ("grader.client:submit", "Submit a file to the grading service and wait for the result."),
}
# Commands of instructors and operators; most need `pip install 'attn-grader[server]'`.
SERVER_COMMANDS = {
    "serve": ("web.cli:serve", "Start the web server and grading workers (http://127.0.0.1:5000)."),
    "worker": ("web.cli:worker", "Run grading workers on this host (cpu and/or gpu queues)."),
    "db": ("web.cli:db", "Database migrations: upgrade, current, downgrade, revision."),
    "users": ("web.cli:users", "Manage accounts and API tokens."),
    "regrade": ("web.regrade_command:regrade", "Regrade submissions through the job queue; shows the changes."),
    "reconcile": ("web.cli:reconcile", "Re-notify lost grading jobs; fail those past max attempts."),
    "data": ("web.data_command:data", "A person's data on request (export, erasure); access-log retention."),
    "sandbox": ("grader.sandbox.cli:sandbox", "The sandbox: `sandbox policy` prints what a submission can touch."),
    "lti": ("web.lti.cli:lti", "LMS integration (LTI 1.3): platforms, keys, tool URLs, passback, rosters."),
    "questions": ("questions.cli:questions", "The self-check question bank: validate, list, show, export."),
    "experiments": ("reference_impl.cli:experiments", "Measure the chapter's claims about scaling."),
}
COMMANDS = {**STUDENT_COMMANDS, **SERVER_COMMANDS}
SERVER_EXTRA_HINT = "pip install 'attn-grader[server]'"


class MissingServerExtra(click.ClickException):
    def __init__(self, name: str, module: str):
        super().__init__(f"`attn-grader {name}` needs the service's packages ({module} is not "
                         f"installed): {SERVER_EXTRA_HINT}")


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return list(STUDENT_COMMANDS) + list(SERVER_COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name][0].split(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as exc:
            if name in STUDENT_COMMANDS or exc.name.split(".")[0] in ("grader", "web", "questions",
                                                                      "reference_impl"):
                raise
            # A student package without the server's dependencies: say what to install.
            missing = exc.name

            @click.command(name, context_settings={"ignore_unknown_options": True,
                                                   "allow_extra_args": True},
                           help=COMMANDS[name][1], add_help_option=False)
            def unavailable():
                raise MissingServerExtra(name, missing)
            return unavailable

    def format_commands(self, ctx, formatter):
        # The listing uses the static help so that `--help` imports nothing heavy.
        with formatter.section("Commands for students"):
            formatter.write_dl([(name, help_) for name, (_, help_) in STUDENT_COMMANDS.items()])
        with formatter.section(f"Commands for instructors and operators (most need {SERVER_EXTRA_HINT})"):
            formatter.write_dl([(name, help_) for name, (_, help_) in SERVER_COMMANDS.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Start with `attn-grader tasks`, then `attn-grader template sdpa > sdpa.py`, "
                    "`attn-grader check sdpa.py --task sdpa` and `attn-grader submit sdpa.py "
                    "--task sdpa`. `attn-grader COMMAND --help` tells more.")
@click.version_option(package_name="attn-grader")
def main() -> None:
    """Quizzes and a sandboxed autograder for scaled dot-product attention."""


if __name__ == "__main__":
    main()
