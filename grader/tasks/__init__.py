"""The graded tasks: what students write, how it is checked and how many points each family is worth."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class Task:
    id: str
    title: str
    function: str
    positional: int                 # positional arguments the grader passes
    keywords: tuple                 # keyword arguments the grader may pass
    points: dict                    # family -> points (sum 100); 0 = optional, reported only
    checks: list = field(default_factory=list)

    @property
    def spec_markdown(self) -> str:
        with open(os.path.join(HERE, f"{self.id}.md"), encoding="utf-8") as f:
            return f.read()

    @property
    def template(self) -> str:
        with open(os.path.join(HERE, f"{self.id}_template.py.tmpl"), encoding="utf-8") as f:
            return f.read()


def _load() -> dict:
    from . import mha, sdpa
    return {t.id: t for t in (sdpa.TASK, mha.TASK)}


TASKS = _load()
