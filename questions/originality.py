"""Bank texts must be written in our own words, not copied from the course's source texts.

The sources ("seeds": the textbook chapter and the articles the course is built on) live beside
the checkout, at ``../shared/seeds`` from the repository root; ``ATTN_GRADER_SEEDS`` or the CLI's
``--seeds`` points elsewhere. A checkout without them skips this rule (the CLI says so).

A text fails when it shares a run of ``WORD_RUN`` consecutive words (English, Russian) or
``CJK_RUN`` consecutive tokens (Chinese: each character is a token, a Latin word is one) with a
seed. Short shared phrases, terms and formulas are fine; a copied sentence is not. Seeds in
Traditional Chinese are compared after conversion to Simplified, as the bank writes Simplified.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from grader import settings

from . import schema

WORD_RUN = 8
CJK_RUN = 12
SEEDS_SETTING = settings.setting("SEEDS")
_TOKEN = re.compile(r"[\u3400-\u9fff]|[^\W\d_]+|\d+")
_CJK = re.compile(r"[\u3400-\u9fff]")
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def default_seeds_dir() -> Path:
    return Path(__file__).resolve().parents[1].parent / "shared" / "seeds"


def find_seeds(explicit: str | os.PathLike | None = None) -> Path | None:
    """The seeds folder to use, or None when there is none (the rule is then skipped)."""
    for candidate in (explicit, SEEDS_SETTING.read(), default_seeds_dir()):
        if candidate and Path(candidate).is_dir() and any(Path(candidate).glob("*.txt")):
            return Path(candidate)
    return None


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _simplified(text: str) -> str:
    if not _CJK.search(text):
        return text
    from opencc import OpenCC  # opencc-python-reimplemented: pure Python tables
    return OpenCC("t2s").convert(text)


@dataclass
class SeedIndex:
    """Every run of WORD_RUN / CJK_RUN tokens in the seeds, with the seed it comes from."""
    runs: dict[int, dict[tuple, str]]

    @classmethod
    def load(cls, folder: Path) -> "SeedIndex":
        runs: dict[int, dict[tuple, str]] = {WORD_RUN: {}, CJK_RUN: {}}
        for path in sorted(folder.glob("*.txt")):
            words = tokens(_simplified(path.read_text(encoding="utf-8", errors="replace")))
            for n, table in runs.items():
                for i in range(len(words) - n + 1):
                    table.setdefault(tuple(words[i:i + n]), path.name)
        return cls(runs)

    def shared_run(self, text: str, lang: str) -> tuple[str, str] | None:
        """(the longest copied passage, the seed's file name), or None.

        Inline code (`...`) is not prose: a quoted line of code may match a seed, and the
        words on either side of it are not one run.
        """
        hits = [hit for part in _CODE.split(text) if (hit := self._run(part, lang))]
        return max(hits, key=lambda hit: len(tokens(hit[0])), default=None)

    def _run(self, text: str, lang: str) -> tuple[str, str] | None:
        n = CJK_RUN if lang == "zh" else WORD_RUN
        table, words = self.runs[n], tokens(text)
        best: tuple[int, int, str] | None = None
        i = 0
        while i <= len(words) - n:
            seed = table.get(tuple(words[i:i + n]))
            if seed is None:
                i += 1
                continue
            j = i + 1  # extend the run while the next window is also in a seed
            while j <= len(words) - n and tuple(words[j:j + n]) in table:
                j += 1
            if best is None or j - i > best[1] - best[0]:
                best = (i, j, seed)
            i = j
        if best is None:
            return None
        start, stop, seed = best
        joiner = "" if lang == "zh" else " "
        return joiner.join(words[start:stop + n - 1]), seed


def _texts(value, field: str):
    """(field path, language, text) for every translated text in a question."""
    if isinstance(value, dict):
        if value and set(value) <= set(schema.LANGS) and all(isinstance(v, str) for v in value.values()):
            for lang, text in value.items():
                yield field, lang, text
            return
        for key, sub in value.items():
            yield from _texts(sub, f"{field}.{key}" if field else str(key))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from _texts(sub, f"{field}[{i}]")


def overlap_problems(questions, index: SeedIndex) -> list[str]:
    problems = []
    for question in questions:
        for field, lang, text in _texts(question.data, ""):
            hit = index.shared_run(text, lang)
            if hit:
                passage, seed = hit
                size = len(tokens(passage))
                problems.append(f"{question.path}: {field}.{lang}: shares {size} consecutive "
                                f"{'tokens' if lang == 'zh' else 'words'} with the seed {seed} "
                                f"({passage[:90]!r}); write it in your own words")
    return problems
