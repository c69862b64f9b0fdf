"""``attn-grader sandbox``: the sandbox as an operator sees it (``sandbox policy``)."""
from __future__ import annotations

import json
import textwrap

import click

from . import policy

SECTIONS = {  # describe()'s keys, in reading order, with the question each answers
    "filesystem": "What a submission sees (everything else does not exist for it)",
    "namespaces": "Namespaces (wall: around the fork server; child: around each submission)",
    "uids": "Identities (one uid per run, no groups, no capabilities, no-new-privs)",
    "limits": "Limits (ATTN_GRADER_SANDBOX_<NAME> overrides each)",
    "rlimits": "Per-process rlimits (soft = hard; not set: left as inherited)",
    "cgroup": "Per-run cgroup (all of a run's processes together)",
    "seccomp": "Seccomp filter",
    "environment": "Environment (nothing else of the grader's)",
}


def _size(key: str, value):
    if isinstance(value, int) and not isinstance(value, bool) and value >= policy.MiB and (
            key.endswith(("bytes", "size")) or key in ("data", "fsize")):
        unit, name = (policy.GiB, "GiB") if value >= policy.GiB else (policy.MiB, "MiB")
        return f"{value} ({value / unit:g} {name})"
    return "not set" if value is None else value


def _lines(value, key: str = "", indent: int = 2) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            if isinstance(v, dict):
                out.append(f"{pad}{k}:")
                out += _lines(v, k, indent + 2)
            else:
                out += _lines(v, k, indent) if isinstance(v, list) else [f"{pad}{k}: {_size(k, v)}"]
        return out
    if isinstance(value, list):
        text = ", ".join(str(v) for v in value) or "(none)"
        return textwrap.wrap(text, 100, initial_indent=f"{pad}{key}: ", subsequent_indent=pad + "    ",
                             break_on_hyphens=False)
    return [f"{pad}{key}: {_size(key, value)}"]


def render(described: dict) -> str:
    """The policy as text, one section per layer."""
    out = ["The sandbox policy (grader/sandbox/policy.py), as this process's settings make it:"]
    for section in list(SECTIONS) + [k for k in described if k not in SECTIONS]:
        out += ["", SECTIONS.get(section, section) + ":"] + _lines(described[section])
    return "\n".join(out)


@click.group("sandbox")
def sandbox() -> None:
    """The sandbox that runs submissions."""


@click.command("policy")
@click.option("--json", "as_json", is_flag=True, help="Print the policy as one JSON object.")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="Threads per child (the CPU cgroup quota follows it).")
def show_policy(as_json, threads):
    """Print what a submission can touch: filesystem, namespaces, limits, cgroup, seccomp, env."""
    try:
        described = policy.describe(threads=threads)
    except ValueError as exc:  # a malformed ATTN_GRADER_SANDBOX_* setting, named in the message
        raise click.ClickException(str(exc)) from None
    click.echo(json.dumps(described, indent=2) if as_json else render(described))


sandbox.add_command(show_policy)
