"""The documentation: the site under docs/ builds with MkDocs in strict mode (a warning, a page
missing from the nav, a broken link or anchor fails), the README stays a short front door whose
links land on pages, and every `attn-grader ...` command shown in either exists with the options
shown (read from the CLI's click commands in this process, not by running each one)."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FENCE = re.compile(r"^\s*(```|~~~)")
# a command at the start of a code line or span: `attn-grader ...`, `.venv/bin/attn-grader ...`,
# `$ attn-grader ...` or `T=$(attn-grader ...)`; not `pip install attn-grader`, nor the package
# name alone in `'attn-grader[server]'`
COMMAND_START = re.compile(r"^(?:\$ |\.venv/bin/|[A-Z_]+=\$\()?(attn-grader(?![-\[\w]).*)")
# words that stand for a value the reader chooses: FILE, EMAIL, ID…, ..., <id>
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*…?$|\.\.\.|…|^<.*>$")


def documented_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def shown_commands(text: str) -> list[str]:
    """Every `attn-grader` command in a Markdown text: the lines of code blocks (backslash
    continuations joined) and inline code spans."""
    commands, in_block, pending = [], False, ""
    for line in text.splitlines():
        if FENCE.match(line):
            in_block, pending = not in_block, ""
            continue
        if in_block:
            pending += line.rstrip()
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            spans, pending = [pending.strip()], ""
        else:
            spans = [s.strip() for s in re.findall(r"`([^`\n]+)`", line)]
        for span in spans:
            match = COMMAND_START.match(span)
            if match and not re.match(r"attn-grader\s*(<|…|$)", match.group(1)):
                commands.append(" ".join(match.group(1).split()))
    return commands


def _words(command: str) -> list[list[str]]:
    """The command's words, split into alternatives at `|` (a table's `\\|` too); a shell
    comment, a closing `)` of `$(...)` and a redirection end it; [optional] brackets and
    {a,b} choices are unwrapped."""
    command = command.replace("\\|", "|")
    command = re.split(r"\s#\s|\s#$", command)[0]
    words = shlex.split(command.replace("[", " ").replace("]", " "))
    segments, current = [], []
    for word in words:
        if word in (">", ">>", "2>", "<") or word.endswith(")") and not word.startswith("-"):
            if word.endswith(")") and word.rstrip(")"):
                current.append(word.rstrip(")"))
            break
        if word == "|":
            segments.append(current)
            current = []
        else:
            current.append(word)
    segments.append(current)
    return segments


def _option_names(command: click.Command, ctx: click.Context) -> dict[str, click.Parameter]:
    names = {}
    for param in command.get_params(ctx):
        for name in [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]:
            if name.startswith("-"):
                names[name] = param
    return names


def _check_options(command, ctx, words, where) -> list[str]:
    problems = []
    options = _option_names(command, ctx)
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-") or word == "-" or PLACEHOLDER.search(word):
            continue
        name, _, inline_value = word.partition("=")
        for alias in name.split("/"):  # `--port/--host`: two options named in one breath
            param = options.get(alias)
            if param is None:
                problems.append(f"{where}: `{ctx.command_path}` has no option {alias}")
                continue
            takes_value = isinstance(param, click.Option) and not param.is_flag and param.nargs != 0
            if not takes_value:
                continue
            value = inline_value
            if not value and "/" not in name and i < len(words) and not words[i].startswith("-"):
                value = words[i]
                i += 1
            if not value or not isinstance(param.type, click.Choice) or PLACEHOLDER.search(value):
                continue
            # `--role {student,instructor}` shows every choice at once
            for choice in value.strip("{}").split(",") if value.startswith("{") else [value]:
                if choice not in param.type.choices:
                    problems.append(f"{where}: `{ctx.command_path} {alias} {value}`: "
                                    f"{choice!r} is not one of {list(param.type.choices)}")
    return problems


def check_command(command: str, where: str) -> list[str]:
    """What is wrong with one shown command: an unknown subcommand or option, or a value that
    an option with fixed choices refuses. Positional arguments are not counted (examples
    name files that do not exist here)."""
    from grader.cli import main

    segments = _words(command)
    first = segments[0]
    assert first[0] == "attn-grader", command
    ctx = click.Context(main, info_name="attn-grader")
    cmd, parent = main, None
    words = first[1:]
    while isinstance(cmd, click.Group) and words and not words[0].startswith("-"):
        name = words[0]
        if PLACEHOLDER.search(name):  # `attn-grader COMMAND --help`
            return []
        sub = cmd.get_command(ctx, name)
        if sub is None:
            return [f"{where}: `{ctx.command_path}` has no command {name!r} (in `{command}`)"]
        parent, cmd = (cmd, ctx), sub
        ctx = click.Context(sub, info_name=name, parent=ctx)
        words = words[1:]
    problems = _check_options(cmd, ctx, words, where)
    for alternative in segments[1:]:
        if not alternative:
            continue
        if alternative[0].startswith("-"):  # `--assignment sdpa | --submission ID`
            problems += _check_options(cmd, ctx, alternative, where)
        elif parent is not None and parent[0].get_command(parent[1], alternative[0]) is not None:
            # `lti platforms list | deployments PLATFORM | remove PLATFORM`: sibling commands
            sibling = parent[0].get_command(parent[1], alternative[0])
            sub_ctx = click.Context(sibling, info_name=alternative[0], parent=parent[1])
            problems += _check_options(sibling, sub_ctx, alternative[1:], where)
        elif parent is not None and alternative[0].isidentifier():
            problems.append(f"{where}: `{parent[1].command_path}` has no command "
                            f"{alternative[0]!r} (in `{command}`)")
        # anything else is a shell pipe into another program
    return problems


def test_every_attn_grader_command_shown_exists_with_its_options():
    problems, checked = [], 0
    for path in documented_files():
        for command in shown_commands(path.read_text(encoding="utf-8")):
            problems += check_command(command, str(path.relative_to(ROOT)))
            checked += 1
    assert checked > 50, f"only {checked} commands found: has the extraction broken?"
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("command, wrong", [
    ("attn-grader check my.py --tsak sdpa", "has no option --tsak"),
    ("attn-grader chek my.py", "has no command 'chek'"),
    ("attn-grader check my.py --task sdpa --sandbox strictest", "'strictest' is not one of"),
    ("attn-grader questions export --format docx", "'docx' is not one of"),
    ("attn-grader users add EMAIL --role {student,admin}", "'admin' is not one of"),
    ("attn-grader lti platforms list | delete PLATFORM", "has no command 'delete'"),
    ("attn-grader regrade --assignment sdpa \\| --submision ID", "has no option --submision"),
])
def test_the_command_check_finds_what_is_wrong(command, wrong):
    problems = check_command(command, "example")
    assert len(problems) == 1 and wrong in problems[0], problems


def test_commands_are_read_from_code_blocks_and_inline_code_only():
    text = ("Run `attn-grader check a.py --task sdpa`, or `pip install attn-grader`.\n"
            "```sh\n.venv/bin/attn-grader questions list \\\n  --json   # all\n"
            "T=$(attn-grader users token a@b.c)\n```\nattn-grader in prose is not a command.\n")
    assert shown_commands(text) == ["attn-grader check a.py --task sdpa",
                                    "attn-grader questions list --json # all",
                                    "attn-grader users token a@b.c)"]


def test_the_site_builds_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about its successor
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                          "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"mkdocs build --strict failed (`make docs` shows it):\n{run.stdout}{run.stderr}"
    assert "WARNING" not in run.stderr, run.stderr
    site = tmp_path / "site"
    security = (site / "operators" / "security.html").read_text(encoding="utf-8")
    assert "Threat model" in security  # SECURITY.md is shown through the snippet
    for page in DOCS.rglob("*.md"):
        built = site / page.relative_to(DOCS).with_suffix(".html")
        assert built.exists(), f"{page} was not built"
    # opened from disk (file://, as the README says), every link between pages lands on a file,
    # never on a folder, which a browser would show as a directory listing (review 3, P7)
    broken = []
    for built in site.rglob("*.html"):
        if "assets" in built.relative_to(site).parts or built.name == "404.html":
            continue
        for href in re.findall(r'href="([^"#?]+)', built.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", href) or href.startswith("/"):
                continue
            target = (built.parent / href).resolve()
            if not target.is_file():
                broken.append(f"{built.relative_to(site)} -> {href}")
    assert not broken, broken[:10]


def test_the_readme_is_a_short_front_door_whose_links_land():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 160, "README.md is the front door: move the detail into docs/"
    assert "make run" in readme and "make test" in readme
    targets = re.findall(r"\]\(((?!https?:|#)[^)#\s]+)(?:#[^)]*)?\)", readme)
    assert any(t.startswith("docs/") for t in targets)
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
