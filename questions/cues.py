"""Answer cues a guessing student can exploit without knowing the subject.

Three rules, all run by ``attn-grader questions validate``:

* **length**: in every draw a student can see, in every language, the correct option(s) may be
  at most ``MAX_LENGTH_RATIO`` times as long as the wrong ones on average. Item writers tend to
  qualify the right answer until it is the longest; shuffling does not hide that.
* **longest option**, checked in each language on its own (a Russian or Chinese student sees
  only that language's lengths, so averaging the languages hides a cue):

  - over the bank, in every language, "pick the longest option" may find the key of a
    single-choice question (and, in multiple choice, a correct option) at most
    ``MAX_LONGEST_GAIN`` more often than a blind guess, and at most ``MAX_LONGEST_DEFICIT``
    less often: a bank whose keys are never the longest teaches "never pick the longest";
  - per question: where a language has several views (variants, options drawn from a pool),
    the key may be the strictly longest in at most ``MAX_KEY_LONGEST`` of them; a question with
    one view may have a longest key in some languages (that happens by chance), but not in all
    three, where the item's own wording, not the translation, gives it away; and the correct
    options of a multiple-choice question may not be exactly its longest ones in most views.
* **position**: options are always shuffled at delivery (the schema refuses ``shuffle: false``),
  and across the bank the key of single-choice items must not sit at the same place in the
  files for more than ``MAX_SAME_POSITION`` of them, so that an export or a reader of the files
  learns nothing from "the first option is the right one".
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from . import schema
from .model import Question
from .variants import shown_options, substitute

MAX_LENGTH_RATIO = 1.25
MAX_SAME_POSITION = 0.5
MAX_LONGEST_GAIN = 0.05
MAX_LONGEST_DEFICIT = 0.12
MAX_KEY_LONGEST = 0.5
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


@dataclass
class LongestCue:
    """How often the longest option gives the answer away in one question and one language."""
    question: Question
    lang: str
    views: int = 0
    hits: int = 0          # single: the key is strictly the longest; multiple: the longest is correct
    chance: float = 0.0    # the expected hits of a blind guess, summed over views
    exposed: int = 0       # multiple: the correct options are exactly the longest ones
    ratios: list = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.hits / self.views

    @property
    def expected(self) -> float:
        return self.chance / self.views


def longest_cues(question: Question) -> dict[str, LongestCue]:
    """The longest-option figures of one choice question, per language, over every variant and draw."""
    out = {lang: LongestCue(question, lang) for lang in schema.LANGS}
    for env in question.variants():
        for seed in draw_seeds(question):
            shown = shown_options(question, seed)
            right = [o["correct"] for o in shown]
            for lang, cue in out.items():
                lengths = [visible_length(substitute(o["text"][lang], env, lang)) for o in shown]
                top = max(lengths)
                longest = [i for i, n in enumerate(lengths) if n == top]
                cue.views += 1
                cue.hits += len(longest) == 1 and right[longest[0]]
                cue.chance += sum(right) / len(shown)
                if question.kind == "multiple":
                    k = sum(right)
                    cut = sorted(lengths, reverse=True)
                    cue.exposed += cut[k - 1] > cut[k] and all(
                        ok == (n >= cut[k - 1]) for ok, n in zip(right, lengths))
                cue.ratios.append(length_ratio(shown, env, lang))
    return out


def longest_option_problems(questions: list[Question]) -> list[str]:
    """The longest-option rules (module doc), per question and language, then per language over the bank."""
    problems = []
    by_kind: dict[tuple[str, str], list[LongestCue]] = {}
    for question in questions:
        if question.kind not in ("single", "multiple"):
            continue
        cues = longest_cues(question)
        for lang, cue in cues.items():
            by_kind.setdefault((question.kind, lang), []).append(cue)
            if question.kind == "single" and cue.views > 1 and cue.share > MAX_KEY_LONGEST:
                problems.append(
                    f"{question.path}: options.{lang}: the key is the longest option in {cue.hits} of "
                    f"{cue.views} {lang} views (at most {MAX_KEY_LONGEST:.0%}); make a distractor at "
                    "least as long in that language")
            if question.kind == "multiple" and cue.exposed * 2 > cue.views:
                problems.append(
                    f"{question.path}: options.{lang}: the correct options are exactly the longest ones "
                    f"in {cue.exposed} of {cue.views} {lang} view(s); make a wrong option as long")
        if question.kind == "single" and all(c.views == 1 and c.hits for c in cues.values()):
            problems.append(f"{question.path}: options: the key is the longest option in every language; "
                            "make a distractor at least as long in some of them")
    for (kind, lang), cues in sorted(by_kind.items()):
        found = sum(c.share for c in cues) / len(cues)  # each question counts once, as in a quiz
        expected = sum(c.expected for c in cues) / len(cues)
        what = "picking the longest option finds the key" if kind == "single" else \
            "the longest option is a correct one"
        if found - expected > MAX_LONGEST_GAIN:
            problems.append(f"(bank): options.{lang}: {what} in {found:.0%} of {kind}-choice questions "
                            f"against {expected:.0%} by chance (allowed: +{MAX_LONGEST_GAIN:.0%}); "
                            "lengthen distractors of the items the key dominates")
        elif expected - found > MAX_LONGEST_DEFICIT:
            problems.append(f"(bank): options.{lang}: {what} in only {found:.0%} of {kind}-choice "
                            f"questions against {expected:.0%} by chance (allowed: −{MAX_LONGEST_DEFICIT:.0%}): "
                            "\"never pick the longest\" is a cue too; let some keys be the longest")
    return problems


def cue_report(questions: list[Question]) -> dict[str, dict]:
    """Per language: the figures the longest-option rules look at (``attn-grader questions cues``)."""
    report = {lang: {"single": [], "multiple": []} for lang in schema.LANGS}
    for question in questions:
        if question.kind in ("single", "multiple"):
            for lang, cue in longest_cues(question).items():
                report[lang][question.kind].append(cue)
    out = {}
    for lang, kinds in report.items():
        singles, multiples = kinds["single"], kinds["multiple"]
        mean = lambda values: sum(values) / len(values) if values else 0.0  # noqa: E731
        out[lang] = {
            "single_questions": len(singles),
            "single_key_longest": mean([c.share for c in singles]),
            "single_chance": mean([c.expected for c in singles]),
            "single_always_longest": sum(c.hits == c.views for c in singles),
            "single_over_half": sum(c.share > 0.5 for c in singles),
            "single_mean_ratio": mean([mean(c.ratios) for c in singles]),
            "single_max_ratio": max((max(c.ratios) for c in singles), default=0.0),
            "multiple_questions": len(multiples),
            "multiple_longest_correct": mean([c.share for c in multiples]),
            "multiple_chance": mean([c.expected for c in multiples]),
            "multiple_always_longest_correct": sum(c.hits == c.views for c in multiples),
        }
    return out
