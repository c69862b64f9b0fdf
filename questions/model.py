"""Loading the bank: one YAML file per question, checked on the way in."""
from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import expr, schema

DEFAULT_BANK = Path(__file__).resolve().parent / "bank"


@dataclass
class Question:
    """One question as written in its file (``data``) plus where it came from."""
    data: dict
    path: str
    _variants: list | None = field(default=None, repr=False, compare=False)

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def kind(self) -> str:
        return self.data["kind"]

    @property
    def topics(self) -> list[str]:
        return list(self.data["topics"])

    @property
    def difficulty(self) -> str:
        d = self.data["difficulty"]
        return schema.DIFFICULTY_ALIASES.get(d, d)

    @property
    def points(self) -> float:
        return float(self.data.get("points", 1))

    @property
    def languages(self) -> list[str]:
        return [lang for lang in schema.LANGS if lang in self.data["prompt"]]

    @property
    def parameterised(self) -> bool:
        return bool(self.data.get("params"))

    def text(self, key: str, lang: str) -> str:
        return self.data[key][lang]

    def variants(self) -> list[dict]:
        """Every allowed assignment of parameter values, in a fixed order.

        Derived values are included; an assignment that breaks a constraint is left out.
        A question without parameters has exactly one (empty) variant; a ``matrix`` question
        has ``draws`` drawn matrices for each assignment.
        """
        if self._variants is None:
            self._variants = self._enumerate()
        return self._variants  # shared: callers copy before changing a variant

    def _enumerate(self) -> list[dict]:
        params = self.data.get("params") or {}
        names = list(params)
        grids = [_values(params[n]) for n in names]
        out = []
        for combo in itertools.product(*grids):
            env = dict(zip(names, combo))
            for name, formula in (self.data.get("derived") or {}).items():
                env[name] = _tidy(expr.evaluate(formula, env))
            if all(expr.evaluate(c, env) for c in self.data.get("constraints") or []):
                out.append(env)
        if self.kind == "matrix":  # the matrices are drawn, not enumerated (see handcalc)
            from .handcalc import draw
            out = draw(self.data, out)
        return out

    def summary(self) -> dict:
        return {"id": self.id, "kind": self.kind, "topics": self.topics,
                "difficulty": self.difficulty, "languages": self.languages,
                "points": self.points, "parameterised": self.parameterised,
                "source": self.data.get("source", ""),
                "title": {lang: self.data["title"][lang] for lang in self.languages}}


def _values(spec) -> list:
    if isinstance(spec, list):
        return list(spec)
    low, high = spec["range"]
    step = spec.get("step", 1)
    count = int(round((high - low) / step)) + 1
    return [_tidy(low + i * step) for i in range(count) if low + i * step <= high + 1e-12]


def _tidy(value):
    """Whole floats become ints so that 64.0 prints as 64."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        return int(value)
    return value


@dataclass
class Bank:
    """The loaded questions (valid ones only) and the problems found while loading."""
    questions: dict[str, Question] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    path: str = ""

    def get(self, question_id: str) -> Question:
        try:
            return self.questions[question_id]
        except KeyError:
            raise KeyError(f"no question {question_id!r} in the bank at {self.path}") from None

    def __iter__(self):
        return iter(sorted(self.questions.values(), key=lambda q: q.id))

    def __len__(self) -> int:
        return len(self.questions)

    def __contains__(self, question_id: str) -> bool:
        return question_id in self.questions


def load_question(path: str | os.PathLike) -> tuple[Question | None, list[str]]:
    """Parse and check one file; returns the question (or None) and its problems."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as f:
            # the C loader when libyaml is there: the same safe subset, ten times faster
            data = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        return None, [f"{path}: (yaml): {exc}".replace("\n", " ")]
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"{path}: (file): cannot read: {exc}"]
    problems = schema.check_structure(data, str(path), expected_id=path.stem)
    if problems:
        return None, problems
    question = Question(data, str(path))
    try:
        variants = question.variants()
    except (expr.ExprError, ArithmeticError) as exc:
        return None, [f"{path}: derived/constraints: {exc}"]
    if not variants:
        return None, [f"{path}: constraints: no combination of parameter values satisfies them"]
    if len(variants) > schema.MAX_VARIANTS:
        return None, [f"{path}: params: {len(variants)} variants, more than {schema.MAX_VARIANTS}"]
    return question, []


QUESTION_SUFFIXES = (".yaml", ".yml")


def _question_entries(root: Path) -> list[os.DirEntry]:
    with os.scandir(root) as entries:
        return sorted((e for e in entries if e.name.endswith(QUESTION_SUFFIXES) and e.is_file()),
                      key=lambda e: e.name)


def bank_files(path: str | os.PathLike | None = None) -> list[Path]:
    """The question files ``load_bank`` reads: every ``*.yaml``/``*.yml`` directly under ``path``."""
    root = Path(path) if path is not None else DEFAULT_BANK
    return [Path(e.path) for e in _question_entries(root)]


def bank_fingerprint(path: str | os.PathLike | None = None) -> tuple:
    """(name, size, mtime) of each question file: cheap to take (one directory read and one
    stat a file), and different whenever a file is added, removed or rewritten, so a cached
    bank can be checked on every use. Empty where the folder is missing."""
    root = Path(path) if path is not None else DEFAULT_BANK
    out = []
    try:
        for entry in _question_entries(root):
            try:
                st = entry.stat()
            except FileNotFoundError:  # removed between the listing and the stat
                continue
            out.append((entry.name, st.st_size, st.st_mtime_ns))
    except (FileNotFoundError, NotADirectoryError):
        pass
    return tuple(out)


def load_bank(path: str | os.PathLike | None = None) -> Bank:
    """Load every ``*.yaml`` file under ``path`` (default: the bundled bank)."""
    root = Path(path) if path is not None else DEFAULT_BANK
    bank = Bank(path=str(root))
    if not root.is_dir():
        bank.errors.append(f"{root}: (directory): not a directory")
        return bank
    files = bank_files(root)
    if not files:
        bank.errors.append(f"{root}: (directory): no .yaml question files")
    for file in files:
        question, problems = load_question(file)
        bank.errors.extend(problems)
        if question is None:
            continue
        if question.id in bank.questions:
            bank.errors.append(f"{file}: id: duplicate of {bank.questions[question.id].path}")
            continue
        bank.questions[question.id] = question
    return bank
