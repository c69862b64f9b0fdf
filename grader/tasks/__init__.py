"""The graded tasks: one module per task, found in this package and through entry points.

A task module defines ``TASK = Task(...)``: what students write (spec and template, plain
files next to the module, ``<id>.md`` and ``<id>_template.py.tmpl``), how it is called, its
points per family, and a ``build`` function that returns its checks. The module itself
imports no torch, so ``attn-grader tasks`` and ``template`` stay instant; ``Task.checks``
calls ``build`` on first use.

A course ships its own task without forking the grader: a package with the same layout and
an entry point in the ``attn_grader.tasks`` group pointing at its ``Task`` object, e.g. in
its pyproject.toml::

    [project.entry-points."attn_grader.tasks"]
    softmax = "my_course.softmax_task:TASK"
"""
from __future__ import annotations

import functools
import importlib
import os
import pkgutil
import re
import warnings
from dataclasses import dataclass, field
from importlib import metadata
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ENTRY_POINT_GROUP = "attn_grader.tasks"


@dataclass
class Grading:
    """What ``Task.build`` returns: the checks (in report order) and the fingerprint, if any.

    A check that reads another's verdict declares it (``Check(needs=...)``); the order is then
    fixed here so that every check runs after what it needs, whatever order the list gives.
    """
    checks: list
    # (args, kwargs) of one call -> {axis: [edges of Task.input_space it stands on]}
    # (grader/checks/input_space.py); None: the task declares no input space
    describe: Callable | None = None
    fingerprint: object = None   # a checks.fingerprint.Fingerprint (the task folder's fingerprint.py), if any
    bugs: object = None          # a checks.bugs.Catalogue (the task folder's bugs.py); None: attention's
    # wrong_outputs(args, kwargs) -> (right output, {bug key: output with that bug}), in float64: how the
    # catalogue's bugs show on one call (``attn-grader tasks validate`` proves each one reachable)
    wrong_outputs: object = None
    # reference(args, kwargs, scale) -> the right outputs of one call as a tuple, in float64, computed
    # with ``scale`` where it is given (None where the task's scale cannot change): what
    # grader/checks/diagnosis.py compares a failing call with. None: no diagnosis beyond the catalogue.
    reference: object = None

    def __post_init__(self):
        self.checks = ordered_by_needs(self.checks)


def with_common_checks(own: list, *, post: tuple = ()) -> list:
    """A task's own checks framed by the ones every task has: the source scan first, then the
    task's checks, the in-place check, the task's own post-phase checks and forbidden.runtime last."""
    from ..checks import forbidden, properties
    from ..checks.base import Check

    return [Check("forbidden.static", forbidden.static_check), *own,
            Check("inputs.unchanged", properties.inputs_unchanged), *post,
            Check("forbidden.runtime", forbidden.runtime_check, post=True)]


class Edges:
    """An input space written as predicates, for a task whose edges are easiest said that way:
    ``{axis: {edge: predicate(args, kwargs) -> bool}}``. ``names`` is what ``Task.input_space``
    declares; the object itself is the task's ``Grading.describe`` (the edges one call stands on,
    recorded for every call and reported as ``drawn``: grader/checks/input_space.py)."""

    def __init__(self, space: dict):
        self.space = space
        self.names = {axis: tuple(edges) for axis, edges in space.items()}

    def __call__(self, args, kwargs) -> dict:
        out = {}
        for axis, edges in self.space.items():
            for edge, holds in edges.items():
                try:
                    met = bool(holds(args, kwargs))
                except Exception:  # a call of another shape (a gradient case, say): not this edge
                    met = False
                if met:
                    out.setdefault(axis, []).append(edge)
        return out


def ordered_by_needs(checks: list) -> list:
    """The checks in their given order, except that each comes after the checks it needs."""
    by_id = {c.id: c for c in checks}
    for c in checks:
        for need in getattr(c, "needs", ()):
            if need not in by_id:
                raise ValueError(f"check {c.id!r} needs {need!r}, which the task does not have")
            if by_id[need].post and not c.post:
                raise ValueError(f"check {c.id!r} needs the post-phase check {need!r}, which runs after it")
    placed, out = set(), []

    def place(c, path=()):
        if c.id in placed:
            return
        if c.id in path:
            raise ValueError(f"checks need each other in a circle: {' -> '.join(path + (c.id,))}")
        for need in getattr(c, "needs", ()):
            place(by_id[need], path + (c.id,))
        placed.add(c.id)
        out.append(c)

    for c in checks:
        place(c)
    return out


@dataclass
class Task:
    id: str
    title: str
    function: str
    home: str                       # the task module's __file__: spec and template lie next to it
    positional: int                 # positional arguments the grader passes
    keywords: tuple                 # keyword arguments the grader may pass
    arg_names: tuple                # names of the positional arguments, for messages
    points: dict                    # family -> points (sum 100); 0 = optional, reported only
    build: Callable[[], Grading]    # imports torch and the checks; called once, on first use
    order: int = 1000               # place in listings (built-in tasks: 10, 20, ...)
    outputs: int = 1                # 1: the function returns a tensor; n > 1: a tuple of n tensors
    gpu_suite: bool = False         # the half-precision GPU suite applies (it calls the sdpa signature)
    block: tuple = ()               # more of torch switched off in the child: "autograd"
    # axis -> its edge values, the inputs the spec says the function must handle and where real
    # bugs live; every edge is met by a scored case (Grading.describe says which a call meets)
    input_space: dict = field(default_factory=dict)
    # What `attn-grader tasks validate` proves the task against (grader/validate.py):
    skill: str = ""                 # what the exercise teaches; shortcuts/skill.py skips it and must fail
    budget: float = 3.0             # CPU of one grading, at most this many times sdpa's in the same run
    # Families that test one idea (name -> families): a bug is charged in each of them where it shows,
    # not once (grader/causes.py); other families keep the knock-on refund.
    concepts: dict = field(default_factory=dict)
    _grading: Grading | None = field(default=None, repr=False, compare=False)

    def _built(self) -> Grading:
        if self._grading is None:
            grading = self.build()
            if not isinstance(grading, Grading):
                raise TypeError(f"task {self.id!r}: build() returned {type(grading).__name__}, not a Grading")
            self._grading = grading
        return self._grading

    @property
    def checks(self) -> list:
        return self._built().checks

    @property
    def bugs(self):
        """The task's bug catalogue (``grader/checks/bugs.py``): its named bugs' sentences and families."""
        bugs = self._built().bugs
        if bugs is None:
            from ..checks.variants import ATTENTION
            return ATTENTION
        return bugs

    @property
    def reference(self):
        return self._built().reference

    @property
    def fingerprint(self):
        return self._built().fingerprint

    @property
    def describe(self) -> Callable | None:
        return self._built().describe

    @property
    def folder(self) -> str:
        """The task's folder (``grader/tasks/<id>/``): its spec, template and corpus lie there."""
        return os.path.dirname(os.path.abspath(self.home))

    @property
    def corpus(self) -> str:
        """Its corpus: ``corpus/correct/*.py`` and ``corpus/buggy/*.py`` (each starting ``# expect: <family>``)."""
        return os.path.join(self.folder, "corpus")

    def _file(self, suffix: str) -> str:
        # spec.md, spec.ru.md, template.py.tmpl in the task's folder; a task written as one module
        # (the layout before folders) keeps <id>.md and <id>_template.py.tmpl next to it.
        name = {".md": "spec.md", "_template.py.tmpl": "template.py.tmpl"}.get(suffix, f"spec{suffix}")
        path = os.path.join(self.folder, name)
        return path if os.path.exists(path) else os.path.join(self.folder, f"{self.id}{suffix}")

    @property
    def spec_markdown(self) -> str:
        with open(self._file(".md"), encoding="utf-8") as f:
            return f.read()

    def spec_in(self, lang: str | None) -> tuple[str, str]:
        """The spec in ``lang`` where the task ships a translation next to it (``<id>.ru.md``,
        ``<id>.zh.md``), else the English one: (markdown, the language it is written in).
        A course's own task without translations is shown in English on every page."""
        if lang and lang != "en":
            try:
                with open(self._file(f".{lang}.md"), encoding="utf-8") as f:
                    return f.read(), lang
            except FileNotFoundError:
                pass
        return self.spec_markdown, "en"

    def title_in(self, lang: str | None) -> str:
        """The task's title in ``lang``: its translated spec's heading ("# Задание `sdpa`: ..."), else
        the English title. Read once per file: every page that lists assignments asks."""
        if not lang or lang == "en":
            return self.title
        return _spec_heading(self._file(f".{lang}.md")) or self.title

    @property
    def template(self) -> str:
        with open(self._file("_template.py.tmpl"), encoding="utf-8") as f:
            return f.read()

    def template_in(self, lang: str | None) -> str:
        """The starter file with its docstrings and comments in ``lang`` where the task ships
        ``template.<lang>.py.tmpl`` (the same code as the English one: tests/test_cli_review3.py
        holds them to it), else the English template. The web editor opens with the reader's, so the
        similarity report discounts every language's as boilerplate."""
        if lang and lang != "en":
            try:
                with open(os.path.join(self.folder, f"template.{lang}.py.tmpl"), encoding="utf-8") as f:
                    return f.read()
            except FileNotFoundError:
                pass
        return self.template


@functools.lru_cache(maxsize=64)
def _spec_heading(path: str) -> str | None:
    """The title in a translated spec's first heading ("# Задание `sdpa`: масштабированное ...",
    capitalised), or None where there is no such file or heading."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    found = re.match(r"#[^\n`]*`[^`]+`\s*[:：]\s*([^\n]+)", text.lstrip())
    return found.group(1)[:1].upper() + found.group(1)[1:] if found else None


def _package_tasks() -> list[Task]:
    found = []
    for info in pkgutil.iter_modules([HERE]):
        module = importlib.import_module(f"{__name__}.{info.name}")
        task = getattr(module, "TASK", None)
        if isinstance(task, Task):
            found.append(task)
    return found


def _entry_point_tasks() -> list[tuple[Task, str]]:
    found = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            task = ep.load()
        except Exception as exc:  # one broken course package must not take the grader down
            warnings.warn(f"task entry point {ep.name} = {ep.value} cannot be loaded: "
                          f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=3)
            continue
        if not isinstance(task, Task):
            warnings.warn(f"task entry point {ep.name} = {ep.value} is a {type(task).__name__}, not a "
                          f"grader.tasks.Task", RuntimeWarning, stacklevel=3)
            continue
        found.append((task, f"entry point {ep.name} = {ep.value}"))
    return found


def discover() -> dict[str, Task]:
    """Every registered task by id: this package's modules, then the entry points, each by order."""
    tasks: dict[str, Task] = {}
    for task in sorted(_package_tasks(), key=lambda t: (t.order, t.id)):
        tasks[task.id] = task
    for task, source in sorted(_entry_point_tasks(), key=lambda pair: (pair[0].order, pair[0].id)):
        if task.id in tasks:
            warnings.warn(f"task {task.id!r} from {source} is ignored: a task with that id is already "
                          f"registered", RuntimeWarning, stacklevel=2)
            continue
        tasks[task.id] = task
    return tasks


_REGISTRY: dict[str, Task] | None = None


def registry(refresh: bool = False) -> dict[str, Task]:
    """The registered tasks (found once per process; ``refresh`` looks again, e.g. after an install)."""
    global _REGISTRY
    if _REGISTRY is None or refresh:
        _REGISTRY = discover()
    return _REGISTRY


def get_task(task_id: str) -> Task:
    tasks = registry()
    if task_id not in tasks:
        raise ValueError(f"unknown task {task_id!r}; choose one of {', '.join(tasks)}")
    return tasks[task_id]


def spec_markdown(task_id: str, lang: str | None = None) -> str:
    return get_task(task_id).spec_in(lang)[0]


def template(task_id: str, lang: str | None = None) -> str:
    return get_task(task_id).template_in(lang)


def __getattr__(name):
    # Read on every access, so a refreshed registry is what everybody sees.
    if name == "TASKS":
        return registry()
    if name == "TASK_IDS":
        return tuple(registry())
    if name == "TITLES":
        return {t.id: (t.title, t.function) for t in registry().values()}
    raise AttributeError(name)
