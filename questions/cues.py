"""Answer cues a guessing student can exploit without knowing the subject.

Two rules, both run by ``attn-grader questions validate``:

* **length**: in every draw a student can see, in every language, the correct option(s) may be
  at most ``MAX_LENGTH_RATIO`` times as long as the wrong ones on average. Item writers tend to
  qualify the right answer until it is the longest; shuffling does not hide that.
* **longest option**: a guesser who always picks the longest option must not beat chance by more
  than ``MAX_LONGEST_GAIN`` on the bank's single-choice questions (each question's share of
  views, every variant, draw and language, averaged over questions), and no single-choice key
  may be the longest option in every view.
* **position**: options are always shuffled at delivery (the schema refuses ``shuffle: false``),
  and across the bank the key of single-choice items must not sit at the same place in the
  files for more than ``MAX_SAME_POSITION`` of them, so that an export or a reader of the files
  learns nothing from "the first option is the right one".
"""
from __future__ import annotations

import re
from collections import Counter

from . import schema
from .model import Question
from .variants import shown_options, substitute

MAX_LENGTH_RATIO = 1.25
MAX_SAME_POSITION = 0.5
MAX_LONGEST_GAIN = 0.10
POOL_DRAWS = 24  # seeds tried per variant for a question that draws options from a pool

_MARKUP = re.compile(r"[`*_]")


def draw_seeds(question: Question) -> range:
    """The seeds validation walks: one suffices unless options are drawn from a pool."""
    return range(POOL_DRAWS if question.data.get("show") else 1)


def visible_length(text: str) -> int:
    return len(_MARKUP.sub("", text).strip())


def length_ratio(options: list[dict], env: dict, lang: str) -> float:
    """Mean length of the correct options over the mean length of the wrong ones."""
    right = [visible_length(substitute(o["text"][lang], env, lang)) for o in options if o["correct"]]
    wrong = [visible_length(substitute(o["text"][lang], env, lang)) for o in options if not o["correct"]]
    if not right or not wrong:
        return 1.0
    return (sum(right) / len(right)) / max(1.0, sum(wrong) / len(wrong))


def length_problem(question: Question) -> str | None:
    """The worst length cue over the question's variants, draws and languages, or None."""
    worst = (0.0, "", 0, {})
    for env in question.variants():
        for seed in draw_seeds(question):
            shown = shown_options(question, seed)
            for lang in schema.LANGS:
                ratio = length_ratio(shown, env, lang)
                if ratio > worst[0]:
                    worst = (ratio, lang, seed, env)
    ratio, lang, seed, env = worst
    if ratio <= MAX_LENGTH_RATIO:
        return None
    where = "".join(f", {k}={v}" for k, v in env.items() if k in (question.data.get("params") or {}))
    return (f"the correct option is {ratio:.2f}× as long as the wrong ones on average ({lang}, draw "
            f"{seed}{where}); keep it within {MAX_LENGTH_RATIO}× (shorten it or make the distractors "
            "as specific)")


def position_problems(questions: list[Question]) -> list[str]:
    """Bank-level: the file position of single-choice keys must vary."""
    singles = [q for q in questions if q.kind == "single"]
    if len(singles) < 4:
        return []
    positions = Counter(next(i for i, o in enumerate(q.data["options"]) if o["correct"]) for q in singles)
    place, count = positions.most_common(1)[0]
    if count <= MAX_SAME_POSITION * len(singles):
        return []
    same = sorted(q.id for q in singles
                  if next(i for i, o in enumerate(q.data["options"]) if o["correct"]) == place)
    return [f"(bank): options: the key is option {place + 1} in the file in {count} of {len(singles)} "
            f"single-choice questions (at most {MAX_SAME_POSITION:.0%} may share a place); move it in "
            f"some of: {', '.join(same)}"]


def _longest_views(question: Question) -> tuple[int, int, float]:
    """(views where the key is strictly the longest option, views, expected hits by chance)."""
    hits = views = 0
    chance = 0.0
    for env in question.variants():
        for seed in draw_seeds(question):
            shown = shown_options(question, seed)
            for lang in schema.LANGS:
                lengths = [visible_length(substitute(o["text"][lang], env, lang)) for o in shown]
                key = lengths[next(i for i, o in enumerate(shown) if o["correct"])]
                hits += key == max(lengths) and lengths.count(key) == 1
                views += 1
                chance += 1 / len(shown)
    return hits, views, chance


def longest_option_problems(questions: list[Question]) -> list[str]:
    """Per question: the key is not the longest option everywhere; bank-wide: the
    "pick the longest" strategy gains at most MAX_LONGEST_GAIN over guessing."""
    problems, found, expected = [], [], []
    for question in questions:
        if question.kind != "single":
            continue
        hits, views, chance = _longest_views(question)
        if hits == views:
            problems.append(f"{question.path}: options: the key is the longest option in every variant, "
                            "draw and language; make a distractor at least as long somewhere")
        found.append(hits / views)  # each question counts once, as it does in a quiz
        expected.append(chance / views)
    if found and (sum(found) - sum(expected)) / len(found) > MAX_LONGEST_GAIN:
        problems.append(f"(bank): options: picking the longest option finds the key in "
                        f"{sum(found) / len(found):.0%} of single-choice questions against "
                        f"{sum(expected) / len(found):.0%} by chance (allowed: +{MAX_LONGEST_GAIN:.0%}); "
                        "lengthen distractors of the items the key dominates")
    return problems
