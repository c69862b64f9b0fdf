"""Per-student variants: which parameter values, which option order, what the browser sees.

Everything here is a pure function of (question, seed) — never of the language — so a
student who switches language keeps the same numbers, the same order and the same answer.
"""
from __future__ import annotations

import hashlib
import hmac
import re

from . import schema
from .model import Question


def variant_seed(student_key: str, question_id: str, secret: bytes | None = None) -> int:
    """A reproducible 63-bit seed for one student and one question.

    The service passes its quiz secret (``web.config.quiz_secret``): the seed is then an
    HMAC-SHA256 under it, so the package a student installs cannot compute any student's
    variant or answer key. Without ``secret`` the seed is a public hash of the two keys,
    for exports, previews and tests.
    """
    message = f"attn-grader\x00{student_key}\x00{question_id}".encode()
    digest = (hmac.new(secret, message, hashlib.sha256).digest() if secret is not None
              else hashlib.sha256(message).digest())
    return int.from_bytes(digest[:8], "big") >> 1


def _draw(seed: int, label: str) -> int:
    digest = hashlib.sha256(f"{seed}\x00{label}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def params_for(question: Question, seed: int) -> dict:
    """The parameter (and derived) values of this variant."""
    variants = question.variants()
    return dict(variants[_draw(seed, "params:" + question.id) % len(variants)])


def token(seed: int, question_id: str, item_id: str) -> str:
    """An opaque id for an option or item, so the browser cannot read meaning from ids."""
    return "o" + hashlib.sha256(f"{seed}\x00{question_id}\x00{item_id}".encode()).hexdigest()[:8]


def shuffled(seq: list, seed: int, label: str) -> list:
    """A Fisher-Yates shuffle driven by hashes (stable across Python versions)."""
    out = list(seq)
    for i in range(len(out) - 1, 0, -1):
        j = _draw(seed, f"{label}:{i}") % (i + 1)
        out[i], out[j] = out[j], out[i]
    return out


def format_number(value, lang: str = "en") -> str:
    """Numbers as a person writes them: 64, 0.125, 1e-06; a decimal comma in Russian."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):  # a drawn matrix (integers): written as PyTorch writes it
        from .handcalc import matrix_text
        return matrix_text(value)
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return str(int(value))
    text = f"{value:.6g}"
    return text.replace(".", ",") if lang == "ru" else text


def substitute(text: str, env: dict, lang: str) -> str:
    """Replace ``{name}`` by the value of ``name``; other braces are left alone."""
    def repl(m: re.Match) -> str:
        name = m.group(1)
        return format_number(env[name], lang) if name in env else m.group(0)
    return schema.PLACEHOLDER_RE.sub(repl, text)


def shown_options(question: Question, seed: int) -> list[dict]:
    """The options of a choice question that this seed's student sees, in display order.

    Without ``show`` every option is shown. With ``show: n`` the file's options are a pool
    (PrairieLearn style): the seed draws the correct option(s) and n minus that many wrong ones
    from their misconception pools, so variants differ in which mistakes they confront.
    """
    options = question.data["options"]
    count = question.data.get("show")
    if count:
        right = shuffled([o for o in options if o["correct"]], seed, f"pool-right:{question.id}")
        wrong = shuffled([o for o in options if not o["correct"]], seed, f"pool-wrong:{question.id}")
        if question.kind == "single":
            k = 1
        else:  # at least one of each, as many right ones as the pool and the count allow
            low, high = max(1, count - len(wrong)), min(count - 1, len(right))
            k = low + _draw(seed, f"pool-count:{question.id}") % (high - low + 1)
        chosen = {o["id"] for o in right[:k] + wrong[:count - k]}
        options = [o for o in options if o["id"] in chosen]
    return _ordered(question, options, seed, "options")


def _ordered(question: Question, entries: list, seed: int, label: str) -> list:
    if question.kind == "ordering":  # always shuffled, and never shown already in order
        out = shuffled(entries, seed, f"{label}:{question.id}")
        return out[1:] + out[:1] if out == list(entries) else out
    if question.data.get("shuffle", question.kind in ("single", "multiple", "matching")):
        return shuffled(entries, seed, f"{label}:{question.id}")
    return list(entries)


def render(question: Question, seed: int, lang: str = "en", *, params: dict | None = None) -> dict:
    """What the browser may see for this variant: never the answer or which option is right.

    ``params`` overrides the variant's parameter values (validation and exports walk every
    variant this way); the web app leaves it out.
    """
    if lang not in schema.LANGS:
        raise ValueError(f"unknown language {lang!r}; use one of {', '.join(schema.LANGS)}")
    env = params_for(question, seed) if params is None else params
    d, qid = question.data, question.id
    out = {
        "id": qid, "kind": question.kind, "lang": lang,
        "title": d["title"][lang], "prompt": substitute(d["prompt"][lang], env, lang),
        "points": question.points, "difficulty": question.difficulty, "topics": question.topics,
        "params": {k: env[k] for k in (d.get("params") or {})},
    }
    if question.kind in ("single", "multiple"):
        out["options"] = [{"id": token(seed, qid, o["id"]), "text": substitute(o["text"][lang], env, lang)}
                          for o in shown_options(question, seed)]
    elif question.kind == "ordering":
        out["items"] = [{"id": token(seed, qid, i["id"]), "text": substitute(i["text"][lang], env, lang)}
                        for i in _ordered(question, d["items"], seed, "items")]
    elif question.kind == "matching":
        out["left"] = [{"id": token(seed, qid, "l:" + p["id"]), "text": substitute(p["left"][lang], env, lang)}
                       for p in _ordered(question, d["pairs"], seed, "left")]
        rights = [(p["id"], p["right"]) for p in d["pairs"]] + \
                 [(x["id"], x["text"]) for x in d.get("distractors") or []]
        out["right"] = [{"id": token(seed, qid, "r:" + rid), "text": substitute(text[lang], env, lang)}
                        for rid, text in _ordered(question, rights, seed, "right")]
    elif question.kind == "numeric":
        if d.get("unit"):
            out["unit"] = d["unit"][lang]
    elif question.kind == "code":
        out["function"] = d["function"]
        out["template"] = d["template"]
    elif question.kind == "matrix" and d.get("ask", "matrix") == "matrix":
        from .handcalc import result
        answer = result(d, env)  # only its size is shown: the form needs a box per entry
        out["answer_shape"] = [len(answer), len(answer[0])]
    elif question.kind == "big_o":
        out["variables"] = list(d["variables"])
    return out


def case_seed(seed: int, question_id: str, index: int) -> int:
    """The seed of the random tensors of one code test case."""
    return _draw(seed, f"case:{question_id}:{index}")


def code_cases(question: Question, seed: int) -> list[list]:
    from . import references  # late: only code grading needs torch
    return [references.build_args(case, case_seed(seed, question.id, i))
            for i, case in enumerate(question.data["cases"])]
