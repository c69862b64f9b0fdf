"""The server install is pinned: ``constraints.txt`` (``make lock``) fixes every package's
version except torch's, ``make install`` installs with it, and these tests fail when the
environment drifted from the pins or the pins no longer satisfy ``pyproject.toml``."""
from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
UNPINNED = {"torch"}  # TORCH_SPEC chooses it: the CPU wheel, or a CUDA build on a GPU host


def pins() -> dict[str, str]:
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not pinned with =="
            out[canonicalize_name(name)] = version
    return out


def project_requirements(*extras: str) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    return [Requirement(line) for line in lines]


def test_every_requirement_of_the_project_is_pinned_within_its_range():
    pinned = pins()
    problems = []
    for req in project_requirements("server", "test", "docs", "deploy"):
        name = canonicalize_name(req.name)
        if name in UNPINNED:
            assert name not in pinned
            continue
        if name not in pinned:
            problems.append(f"{req.name} is not in constraints.txt")
        elif not req.specifier.contains(Version(pinned[name]), prereleases=True):
            problems.append(f"{req.name}=={pinned[name]} does not satisfy {req}")
    assert not problems, "run `make lock`: " + "; ".join(problems)


def test_the_installed_versions_are_the_pinned_ones():
    pinned = pins()
    installed = {canonicalize_name(d.metadata["Name"]): d.version
                 for d in metadata.distributions()}
    needed = {canonicalize_name(r.name) for r in project_requirements("server", "test", "docs")} - UNPINNED
    missing = sorted(needed - set(installed))
    assert not missing, f"not installed (run `make install`): {missing}"
    drift = sorted(f"{name} {installed[name]} (pinned {version})"
                   for name, version in pinned.items()
                   if name in installed and installed[name] != version)
    assert not drift, "installed versions differ from constraints.txt: " + ", ".join(drift)


def test_make_install_uses_the_constraints():
    makefile = (ROOT / "Makefile").read_text()
    assert '-e ".[server,test,docs]" -c constraints.txt' in makefile
    assert "$(VENV)/.installed: pyproject.toml constraints.txt" in makefile


def test_the_torch_the_students_are_told_about_is_the_one_make_installs():
    from grader import TORCH_VERSION

    makefile = (ROOT / "Makefile").read_text()
    assert f"TORCH_SPEC ?= torch=={TORCH_VERSION}\n" in makefile
    assert f"LOCK_TORCH ?= torch=={TORCH_VERSION}+cpu\n" in makefile
