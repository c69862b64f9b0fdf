"""The student package as this service serves it: ``attn-grader`` is not on a public index, so
the task page's install line points at a wheel the service hands out itself (review 3, P11).

`make run` builds the wheel into ``<instance>/dist`` (``pip wheel --no-deps . -w instance/dist``,
which an operator can run by hand too); ``GET /downloads/<wheel>`` serves the newest one, and
pip installs straight from that address. Without a wheel there, the page says how to get one
instead of naming a package that pip would not find.
"""
from __future__ import annotations

import re
from pathlib import Path

WHEEL = re.compile(r"^attn_grader-[0-9][A-Za-z0-9.+!_-]*-py3-none-any\.whl$")


def wheel_folder(instance_path: str) -> Path:
    return Path(instance_path) / "dist"


def served_wheel(instance_path: str) -> Path | None:
    """The newest attn-grader wheel in the instance's ``dist`` folder, if any."""
    folder = wheel_folder(instance_path)
    if not folder.is_dir():
        return None
    wheels = [p for p in folder.iterdir() if p.is_file() and WHEEL.match(p.name)]
    return max(wheels, key=lambda p: p.stat().st_mtime) if wheels else None
