"""A task's bug catalogue: the named bugs its checks can recognise, each with its sentence for the
student and the family it is charged to (``grader/causes.py``).

Each task owns one (``Task.bugs``, built by the task folder's ``bugs.py``). Attention's own slips
(``variants.ATTENTION``: no scale, mask polarity, causal reversed, ...) are the base every task
extends: a task's own sentence for a name wins over attention's (``sdpa_backward`` says "... in your
backward"), and its families are tried after attention's (a task is charged in the first family of
the name it has). Nothing is registered globally: two tasks may word one bug differently.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..i18n import T


def key_name(key: str) -> str:
    """A candidate's bug name: keys may carry the details the student chose ("bug:detail")."""
    return key.split(":", 1)[0]


@dataclass(frozen=True)
class Catalogue:
    texts: dict                                   # name -> sentence (an N_-marked English template)
    homes: dict = field(default_factory=dict)     # name -> the families it is charged to, first one the task has
    own: tuple = ()                               # the names the task added (attn-grader tasks validate proves them)
    # Names a check recognises from what it observes (a dtype, an input changed in place), not from an
    # output equal to a wrong version's: no drawn case needs to show them as values.
    by_check: frozenset = frozenset()

    def extend(self, texts: dict, homes: dict | None = None, by_check=()) -> "Catalogue":
        """This catalogue with a task's own bugs: its sentences win, its families come after these."""
        merged = dict(self.homes)
        for name, families in (homes or {}).items():
            merged[name] = merged.get(name, ()) + tuple(f for f in families if f not in merged.get(name, ()))
        return Catalogue({**self.texts, **texts}, merged, tuple(texts), self.by_check | frozenset(by_check))

    def explain(self, name: str | None):
        """The bug's sentence (a ``T``: rendered in the reader's language), "" for no known bug.
        A key with details ("bug:detail") is explained by its bug's sentence."""
        text = self.texts.get(key_name(name), "") if name else ""
        return T(text) if text else ""

    def home_family(self, name: str, families) -> str | None:
        """Where bug ``name`` is charged in a task with these families (None: nowhere in particular)."""
        return next((f for f in self.homes.get(key_name(name), ()) if f in families), None)

    def __contains__(self, name) -> bool:
        return key_name(name) in self.texts
