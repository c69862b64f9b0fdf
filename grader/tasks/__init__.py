"""The graded tasks: what students write, how it is checked and how many points each family is worth.

The specs and templates are plain files next to this module and can be read without torch
(``attn-grader tasks`` and ``template`` stay instant); ``TASKS`` imports the checks on first use.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
TASK_IDS = ("sdpa", "mha")
TITLES = {"sdpa": ("Scaled dot-product attention", "scaled_dot_product_attention"),
          "mha": ("Multi-head attention", "multi_head_attention")}


def spec_markdown(task_id: str) -> str:
    with open(os.path.join(HERE, f"{task_id}.md"), encoding="utf-8") as f:
        return f.read()


def template(task_id: str) -> str:
    with open(os.path.join(HERE, f"{task_id}_template.py.tmpl"), encoding="utf-8") as f:
        return f.read()


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
        return spec_markdown(self.id)

    @property
    def template(self) -> str:
        return template(self.id)


def __getattr__(name):
    if name == "TASKS":  # imported lazily: the checks need torch
        from . import mha, sdpa
        globals()["TASKS"] = {t.id: t for t in (sdpa.TASK, mha.TASK)}
        return globals()["TASKS"]
    raise AttributeError(name)
