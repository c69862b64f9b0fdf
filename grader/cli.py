"""The ``attn-grader`` command line.

Subcommands live next to what they drive and are imported only when used, so
``attn-grader check`` never loads the web app or the database layer, and the
grader package itself stays free of them.
"""
from __future__ import annotations

import importlib

import click

# name -> ("module:attribute" of a click command or group, one-line help for the listing)
COMMANDS = {
    "experiments": ("reference_impl.cli:experiments", "Measure the chapter's claims about scaling."),
    "check": ("grader.commands:check", "Grade an attention file locally (same checks as the server)."),
    "tasks": ("grader.commands:tasks", "Show what each task asks for (sdpa, mha)."),
    "template": ("grader.commands:template", "Print a starter file for a task."),
    "sandbox": ("grader.sandbox.cli:sandbox", "The sandbox: `sandbox policy` prints what a submission can touch."),
    "questions": ("questions.cli:questions", "The self-check question bank: validate, list, show, export."),
    "serve": ("web.cli:serve", "Start the web server and grading workers (http://127.0.0.1:5000)."),
    "worker": ("web.cli:worker", "Run grading workers on this host (cpu and/or gpu queues)."),
    "db": ("web.cli:db", "Database migrations: upgrade, current, downgrade, revision."),
    "users": ("web.cli:users", "Manage accounts and API tokens."),
    "regrade": ("web.cli:regrade", "Regrade an assignment; shows score changes before applying."),
    "reconcile": ("web.cli:reconcile", "Re-notify lost grading jobs; fail those past max attempts."),
    "lti": ("web.lti.cli:lti", "LMS integration (LTI 1.3): platforms, keys, tool URLs, passback, rosters."),
    "submit": ("web.client:submit", "Submit a file to a grading service and wait for the result."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name][0].split(":")
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx, formatter):
        # The listing uses the static help so that `--help` imports nothing heavy.
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][1]) for name in self.list_commands(ctx)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="attn-grader")
def main() -> None:
    """Quizzes and a sandboxed autograder for scaled dot-product attention."""


if __name__ == "__main__":
    main()
