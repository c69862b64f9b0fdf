"""Exports of the bank for other systems: Moodle XML, GIFT, QTI 2.1 and JSON.

Every exporter works on *instances*: one concrete variant of a question in one language,
with all texts filled in and the answer spelled out. A question that varies (parameters, or
options drawn from a pool) gives one instance (``--variants 1``, the default) or several, named
``<id>-v1``, ``<id>-v2``...; the variants are the first distinct ones that students with keys
``export-1``, ``export-2``... would get, options in the order they would see them, so an export
is reproducible.
"""
from __future__ import annotations

import functools
import threading
from decimal import Decimal

from .. import expr
from ..answers import numeric_answer
from ..model import Bank, Question
from ..variants import format_number, params_for, shown_options, substitute, variant_seed

FORMATS = ("moodle-xml", "gift", "qti", "json")
# What each format is as a download: (file suffix, content type). GIFT is plain text (Moodle's
# importer reads UTF-8); QTI is the zipped content package an LMS imports in one piece.
DOWNLOADS = {"moodle-xml": (".xml", "application/xml"), "gift": (".gift.txt", "text/plain"),
             "qti": (".qti.zip", "application/zip"), "json": (".json", "application/json")}


def varies(question: Question) -> bool:
    """Whether students get different versions: parameters, drawn matrices, or options drawn from a pool."""
    return len(question.variants()) > 1 or bool(question.data.get("show"))


def instances(question: Question, lang: str, variants: int = 1) -> list[dict]:
    """The concrete variants of ``question`` to export, as plain dicts (see module doc)."""
    if not varies(question):
        return [instance(question, variant_seed("export-1", question.id), question.variants()[0], lang,
                         question.id, "")]
    out, seen = [], []
    # walk the export students until enough distinct variants (a small space may run out)
    for k in range(1, 20 * variants + 1):
        seed = variant_seed(f"export-{k}", question.id)
        env = params_for(question, seed)
        drawn = sorted(o["id"] for o in shown_options(question, seed)) if question.kind in ("single", "multiple") else []
        if (env, drawn) in seen:
            continue
        seen.append((env, drawn))
        n = len(out) + 1
        out.append(instance(question, seed, env, lang, f"{question.id}-v{n}", f" (v{n})"))
        if len(out) == max(1, variants):
            break
    return out


def instance(question: Question, seed: int, env: dict, lang: str, ident: str, suffix: str) -> dict:
    """One variant in one language; choice options are the ones (and in the order) ``seed`` shows."""
    d = question.data

    def t(text: dict) -> str:
        return substitute(text[lang], env, lang)

    inst = {
        "id": ident, "question_id": question.id, "kind": question.kind, "lang": lang,
        "title": d["title"][lang] + suffix, "prompt": t(d["prompt"]),
        "explanation": t(d["explanation"]) if d.get("explanation") else "",
        "points": question.points, "difficulty": question.difficulty, "topics": question.topics,
        "params": {k: env[k] for k in d.get("params") or {}},
        "seed": seed,  # the public export seed of this variant: grade_answer(question, seed, ...) grades it
    }
    kind = question.kind
    if kind in ("single", "multiple"):
        inst["options"] = [{"id": o["id"], "text": t(o["text"]), "correct": o["correct"],
                            "feedback": t(o["feedback"])} for o in shown_options(question, seed)]
    elif kind == "numeric":
        tolerance = d.get("tolerance", {"rel": 1e-9})
        value = numeric_answer(question, env)
        inst["answer"] = value
        inst["answer_text"] = format_number(value, lang)
        inst["tolerance"] = absolute_tolerance(tolerance, value)
        # each common mistake keeps the bank's own tolerance around *its* value
        inst["mistakes"] = []
        for m in d.get("mistakes") or []:
            wrong = float(expr.evaluate(m["value"], env))
            inst["mistakes"].append({"value": wrong, "tolerance": absolute_tolerance(tolerance, wrong),
                                     "feedback": t(m["feedback"])})
        if d.get("unit"):
            inst["unit"] = d["unit"][lang]
    elif kind == "ordering":
        inst["items"] = [{"id": i["id"], "text": t(i["text"])} for i in d["items"]]
        inst["misplacements"] = [{"first": m["first"], "then": m["then"], "credit": m.get("credit", 0),
                                  "feedback": t(m["feedback"])} for m in d.get("misplacements") or []]
    elif kind == "matching":
        inst["pairs"] = [{"id": p["id"], "left": t(p["left"]), "right": t(p["right"])} for p in d["pairs"]]
        inst["distractors"] = [{"id": x["id"], "text": t(x["text"]),
                                "feedback": t(x["feedback"]) if x.get("feedback") else ""}
                               for x in d.get("distractors") or []]
    elif kind in ("matrix", "shape", "big_o", "expression"):
        inst.update(typed_instance(question, env, t))
    elif kind == "code":
        inst.update(function=d["function"], template=d["template"], model_solution=d["model_solution"],
                    cases=d["cases"])
    elif kind == "free_text":
        inst["rubric"] = [{"id": r["id"], "points": r["points"], "text": t(r["text"])} for r in d["rubric"]]
        inst["model_answer"] = t(d["model_answer"])
    return inst


def typed_instance(question: Question, env: dict, t) -> dict:
    """The key of a matrix, shape, big-O or expression variant as the exporters need it. A matrix entry
    (``ask: entry``) is a plain number with its mistakes, exported as a numeric question is."""
    from .. import bigo, handcalc, shapes
    d = question.data
    mistakes = d.get("mistakes") or []
    if question.kind == "matrix":
        tol = handcalc.tolerance(d)
        key = handcalc.asked(d, env, handcalc.result(d, env))
        wrongs = [handcalc.asked(d, env, handcalc.compute(handcalc.mistake_settings(d, m), env)) for m in mistakes]
        if not isinstance(key, list):
            return {"ask": "entry", "answer": key, "answer_text": format_number(key), "tolerance": tol,
                    "mistakes": [{"value": w, "tolerance": tol, "feedback": t(m["feedback"])}
                                 for w, m in zip(wrongs, mistakes)]}
        return {"ask": "matrix", "matrix": key, "tolerance": tol,
                "mistakes": [{"matrix": w, "feedback": t(m["feedback"])} for w, m in zip(wrongs, mistakes)]}
    if question.kind == "shape":
        key = shapes.shape_value(d["answer"], env)
        return {"shape": list(key), "answer_text": shapes.shape_text(key), "spellings": shapes.spellings(key),
                "mistakes": [{"spellings": shapes.spellings(shapes.shape_value(m["value"], env)),
                              "feedback": t(m["feedback"])} for m in mistakes]}
    variables = d["variables"]
    if question.kind == "expression":
        from .. import symbolic
        return {"formula": d["answer"], "answer_text": d["answer"], "variables": list(variables),
                "spellings": symbolic.spellings(d["answer"], variables),
                "mistakes": [{"spellings": symbolic.spellings(m["value"], variables), "feedback": t(m["feedback"])}
                             for m in mistakes]}
    return {"expression": d["answer"], "answer_text": f"O({d['answer']})", "variables": list(variables),
            "spellings": bigo.spellings(bigo.canonical(d["answer"], variables)),
            "mistakes": [{"spellings": bigo.spellings(bigo.canonical(m["value"], variables)),
                          "feedback": t(m["feedback"])} for m in mistakes]}


def absolute_tolerance(tolerance: dict, value: float) -> float:
    """LMS numeric questions take one absolute tolerance; use the wider of ours."""
    return max(tolerance.get("abs", 0.0), tolerance.get("rel", 0.0) * abs(value))


def plain_decimal(value: float) -> str:
    """A number in plain decimal digits, never ``1.1e-07``: gift-pegjs refuses exponents,
    pygiftparser reads 1.125e-07 as 1.125, and Moodle's own exporter writes decimals."""
    text = format(Decimal(repr(float(value))), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def all_instances(bank: Bank, lang: str, variants: int = 1) -> list[dict]:
    return [inst for q in bank for inst in instances(q, lang, variants)]


_MARKDOWN = threading.local()  # a converter per thread: building one costs more than converting


@functools.lru_cache(maxsize=8192)
def markdown_html(text: str) -> str:
    """Markdown to HTML; the same texts recur in every variant and language of an export."""
    converter = getattr(_MARKDOWN, "converter", None)
    if converter is None:
        import markdown
        converter = _MARKDOWN.converter = markdown.Markdown(extensions=["fenced_code", "tables"])
    return converter.reset().convert(text)


def export(bank: Bank, fmt: str, lang: str = "en", variants: int = 1, output: str | None = None, *,
           legacy_ordering: bool = False):
    """Run one exporter; returns text (or, for QTI, the path written). ``legacy_ordering``: Moodle
    XML writes ordering questions as matching to positions, for a Moodle before 4.4 that lacks
    the ordering question type (their credit is then by absolute position)."""
    if fmt == "moodle-xml":
        from .moodle import to_moodle_xml
        return to_moodle_xml(all_instances(bank, lang, variants), legacy_ordering=legacy_ordering)
    if fmt == "gift":
        from .gift import to_gift
        return to_gift(all_instances(bank, lang, variants))
    if fmt == "json":
        import json
        return json.dumps({"format": "attn-grader-questions", "version": 1, "lang": lang,
                           "questions": all_instances(bank, lang, variants)}, ensure_ascii=False, indent=2)
    if fmt == "qti":
        from .qti_package import write_qti
        if not output:
            raise ValueError("the QTI export writes several files: pass --output NAME.zip or a directory")
        return write_qti(all_instances(bank, lang, variants), output, lang)
    raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def export_download(bank: Bank, fmt: str, lang: str = "en", variants: int = 1) -> tuple[bytes, str, str]:
    """One export as a file to download: (content, content type, file name).

    The same exporters as ``attn-grader questions export``; QTI is built in memory as a zip.
    """
    if fmt not in DOWNLOADS:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    suffix, content_type = DOWNLOADS[fmt]
    if fmt == "qti":
        from .qti_package import qti_zip
        content = qti_zip(all_instances(bank, lang, variants), lang)
    else:
        content = export(bank, fmt, lang, variants).encode("utf-8")
    return content, content_type, f"attn-grader-questions-{lang}{suffix}"

