"""Test-wise strategies: ways to pick a single-choice answer without knowing the subject.

``questions validate`` plays each strategy on every single-choice question, in each language
on its own (a student reads one language), and fails if one finds the key more than
``MAX_GAIN`` more often than a blind guess. Each question counts once, as in a quiz: its share is
the mean over its views (variants, options drawn from a pool), the bank's the mean over questions.

A strategy scores the options by one surface feature and then *prefers* the options with the
highest (or the lowest) score, or *avoids* those with the highest (or the lowest), guessing among
what is left (among all of them when every option scores the same). The features:

* **length**: the visible length (longest / shortest option);
* **hedges**: +1 for a hedging word ("about", «примерно», 约), −1 for an absolute one ("only",
  «только», 只有): item writers qualify the true option and overstate the false ones;
* **stem words**: how many content words of the prompt the option repeats (in Chinese,
  character pairs), since a key written from the prompt echoes it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from . import schema
from .cues import draw_seeds, visible_length
from .model import Question
from .variants import shown_options, substitute

MAX_GAIN = 0.05

# Whole words in en and ru (ru by the word's start, so «примерно», «почти», «может» in any form);
# substrings in zh, which has no spaces.
HEDGES = {
    "en": ["about", "roughly", "approximately", "almost", "nearly", "usually", "typically", "mostly",
           "often", "may", "might", "generally", "close to", "largely", "tends to"],
    "ru": ["примерно", "около", "почти", "обычно", "может", "могут", "часто", "приблизительно",
           "как правило", "в основном", "порядка"],
    "zh": ["约", "大约", "通常", "可能", "几乎", "往往", "大致", "接近", "一般", "大多"],
}
ABSOLUTES = {
    "en": ["only", "always", "never", "all", "none", "every", "cannot", "must", "exactly",
           "impossible", "regardless", "whatever", "no matter"],
    "ru": ["только", "всегда", "никогда", "все", "всё", "всех", "всем", "лишь", "нельзя",
           "невозможно", "ровно", "любой", "любая", "любое", "любые", "при любом", "ни один", "ни одна"],
    "zh": ["只有", "总是", "从不", "所有", "一定", "永远", "只能", "仅", "必须", "绝不", "无论", "任何"],
}
_STOP = {
    "en": set("the a an of to in and or is are be it its this that with for on by as at from not no "
              "what which does do why how when each one their them they these those there have has was "
              "were been can could would should will into than then also".split()),
    "ru": set("и в на не по с со к о об от что как это для из при а но же ли то все его её их".split()),
}
_CODE = re.compile(r"`[^`]*`")


def _words(text: str, lang: str) -> list[str]:
    return re.findall(r"[a-zа-яё]+", _CODE.sub(" ", text).lower()) if lang != "zh" else []


def _has(text: str, lang: str, words: list[str]) -> bool:
    prose = _CODE.sub(" ", text).lower()
    if lang == "zh":
        return any(w in prose for w in words)
    tokens = " ".join(_words(prose, lang))
    if lang == "ru":  # the start of a word: «примерно», «почти», «может» in any form
        return any(re.search(rf"(?<![а-яёa-z]){re.escape(w)}", tokens) for w in words if " " in w or len(w) > 4) \
            or any(re.search(rf"(?<![а-яёa-z]){re.escape(w)}(?![а-яёa-z])", tokens) for w in words if len(w) <= 4)
    return any(re.search(rf"\b{re.escape(w)}\b", tokens) for w in words)


def hedge_score(text: str, lang: str) -> int:
    return int(_has(text, lang, HEDGES[lang])) - int(_has(text, lang, ABSOLUTES[lang]))


# Chinese function characters: a run of Han characters is cut at them, and the pairs left are
# mostly parts of content words (查询, 权重, 缩放) rather than 的那 or 是一
_ZH_FUNCTION = "的了是在与和及或为这那个一不也都而把被对将其所之以于就会能要有没们它该此每各从到让使给由"


def _content(text: str, lang: str) -> set[str]:
    prose = _CODE.sub(" ", text)
    if lang == "zh":
        runs = re.findall(rf"[^\W\d_a-zA-Z{_ZH_FUNCTION}]+", prose)
        return {run[i:i + 2] for run in runs for i in range(len(run) - 1)
                if all("\u4e00" <= c <= "\u9fff" for c in run[i:i + 2])}
    # a word's first four letters stand for it (query, queries; «оценки», «оценок»)
    return {w[:4] for w in _words(prose, lang) if len(w) > 3 and w not in _STOP[lang]}


def stem_score(text: str, stem: str, lang: str) -> int:
    return len(_content(text, lang) & _content(stem, lang))


FEATURES = {
    "length": lambda text, stem, lang: visible_length(text),
    "hedges": lambda text, stem, lang: hedge_score(text, lang),
    "stem words": lambda text, stem, lang: stem_score(text, stem, lang),
}
WAYS = ("prefer highest", "prefer lowest", "avoid highest", "avoid lowest")
STRATEGIES = [(feature, way) for feature in FEATURES for way in WAYS]
NAMES = {  # how a strategy reads in the validator's messages
    ("length", "prefer highest"): "pick the longest option", ("length", "prefer lowest"): "pick the shortest option",
    ("length", "avoid highest"): "never pick the longest option",
    ("length", "avoid lowest"): "never pick the shortest option",
    ("hedges", "prefer highest"): "prefer hedged options, avoid absolute ones",
    ("hedges", "prefer lowest"): "prefer absolute options, avoid hedged ones",
    ("hedges", "avoid highest"): "never pick a hedged option",
    ("hedges", "avoid lowest"): "never pick an absolute option",
    ("stem words", "prefer highest"): "pick the option that repeats the most words of the prompt",
    ("stem words", "prefer lowest"): "pick the option that repeats the fewest words of the prompt",
    ("stem words", "avoid highest"): "never pick the option that repeats the most words of the prompt",
    ("stem words", "avoid lowest"): "never pick the option that repeats the fewest words of the prompt",
}


def _success(scores: list[float], right: list[bool], way: str) -> float:
    """The chance that the strategy picks the key, guessing among the options it keeps."""
    target = max(scores) if way.endswith("highest") else min(scores)
    if way.startswith("prefer"):
        keep = [i for i, s in enumerate(scores) if s == target]
    else:
        keep = [i for i, s in enumerate(scores) if s != target] or list(range(len(scores)))
    return sum(right[i] for i in keep) / len(keep)


@dataclass
class StrategyResult:
    lang: str
    feature: str
    way: str
    found: float      # mean over questions of the share of views where the strategy finds the key
    chance: float     # the same for a blind guess
    questions: int
    worst: list       # (question id, share) of the questions it finds most often

    @property
    def name(self) -> str:
        return NAMES[(self.feature, self.way)]

    @property
    def gain(self) -> float:
        return self.found - self.chance


def play(questions: list[Question]) -> list[StrategyResult]:
    """Every strategy in every language over the single-choice questions."""
    singles = [q for q in questions if q.kind == "single"]
    shares = {(lang, f, w): {} for lang in schema.LANGS for f, w in STRATEGIES}
    chance = {}
    for q in singles:
        views = [(env, seed) for env in q.variants() for seed in draw_seeds(q)]
        for lang in schema.LANGS:
            totals = {s: 0.0 for s in STRATEGIES}
            guess = 0.0
            for env, seed in views:
                shown = shown_options(q, seed)
                texts = [substitute(o["text"][lang], env, lang) for o in shown]
                stem = substitute(q.data["prompt"][lang], env, lang)
                right = [o["correct"] for o in shown]
                guess += sum(right) / len(shown)
                for feature, way in STRATEGIES:
                    scores = [FEATURES[feature](t, stem, lang) for t in texts]
                    totals[(feature, way)] += _success(scores, right, way)
            for s, total in totals.items():
                shares[(lang, *s)][q.id] = total / len(views)
            chance[(lang, q.id)] = guess / len(views)
    out = []
    for (lang, feature, way), per_question in shares.items():
        if not per_question:
            continue
        n = len(per_question)
        expected = sum(chance[(lang, qid)] for qid in per_question) / n
        worst = sorted(per_question.items(), key=lambda kv: -(kv[1] - chance[(lang, kv[0])]))[:6]
        out.append(StrategyResult(lang, feature, way, sum(per_question.values()) / n, expected, n,
                                  [(qid, round(share, 2)) for qid, share in worst]))
    return out


def strategy_problems(questions: list[Question]) -> list[str]:
    return [f"(bank): options.{r.lang}: \"{r.name}\" finds the key of {r.found:.1%} of the single-choice "
            f"questions against {r.chance:.1%} by chance (allowed: +{MAX_GAIN:.0%}); reword options of "
            f"the questions it finds most often: {', '.join(qid for qid, _ in r.worst)}"
            for r in play(questions) if r.gain > MAX_GAIN]
