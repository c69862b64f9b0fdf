"""Turning a check's ``details`` into what the result page shows: facts, pictures, the rest."""
from __future__ import annotations

import json
import re

from flask_babel import gettext
from flask_babel import lazy_gettext as _l

from grader.i18n import render

from ..i18n import interface_language

# details key -> label, in the order a student reads them (looked up in the page's language
# when shown; d_k and dtype are the names students write)
FACTS = (
    ("case", _l("failing case")),
    ("line", _l("line")),
    ("cell", _l("notebook cell")),
    ("offset", _l("column")),
    ("text", _l("source line")),
    ("shapes", _l("input shapes")),
    ("input", _l("input")),
    ("dtype", "dtype"),
    ("mask", _l("mask")),
    ("max_error", _l("largest error")),
    ("tolerance", _l("allowed error")),
    ("worst_index", _l("at index")),
    ("worst_value", _l("your value there")),
    ("expected_value", _l("expected value")),
    ("nonfinite", _l("NaN/inf values")),
    ("max_abs_logit", _l("largest |logit|")),
    ("d_k", "d_k"),
    ("scale_argument", _l("scale argument")),
    ("fitted_scale", _l("scale found in your weights")),
    ("r2", _l("fit R²")),
    ("row_sums", _l("row sums (first rows)")),
    ("wrong", _l("wrong outputs")),
    ("changed", _l("changed input")),
    ("max_change_elsewhere", _l("largest change elsewhere")),
    ("changed_from", _l("keys changed from position")),
    ("max_change", _l("largest change of an earlier output")),
    ("mutated", _l("inputs your function modified")),
    ("analytic", _l("your gradient along a random direction")),
    ("numerical", _l("finite differences of your forward")),
    ("inputs", _l("inputs")),
    ("findings", _l("found in your source")),
    ("ops", _l("operations seen while it ran")),
    ("protocol", _l("what was tampered with")),
    ("reproduce", _l("run this check alone")),  # the grader's command, on the student's own file
)
# a reported-only check that did not pass: neutral; a failure a bug already counted explains
# (its points kept): grey, pointing up at the bug, not a red ✗ beside full points (review 3, P14)
MARKS = {"pass": "✓", "fail": "✗", "note": "○", "explained": "↑"}
PICTURE_KEYS = {"weights_submission", "weights_reference", "variance_by_dk"}
# Shown another way or internal: the traceback has its own block (newlines kept), the
# diagnosis is already said in words in the check's message ("Likely cause: ...", and
# "fails because of a bug already counted (...)" for ``because_of``, the bug's internal name).
# ``detected``, ``tampering`` and ``fingerprint`` are flags for the grader's own bookkeeping: the
# message says what was found.
HIDDEN_KEYS = {"skipped", "traceback", "error_kind", "diagnosis", "because_of", "unverified", "no_gradient",
               "detected", "tampering", "fingerprint", "hidden",
               "gated_by"}  # the message says which gate took the points


def _show(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, dict)):
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 300 else text[:297] + "…"
    return str(value)


def _stored_case(stored, case: str):
    """The failing case's template inside a message's stored entry, found by its English text:
    the details keep the case in English, the message keeps it translatable (review 3, P4)."""
    if not isinstance(stored, dict):
        return None
    if "t" in stored and render(stored, "en") == case:
        return stored
    for value in (stored.get("a") or {}).values():
        found = _stored_case(value, case)
        if found is not None:
            return found
    return None


MASK_SHAPE = re.compile(r"^(boolean|float \(additive\)) mask of shape (\(.*\))$")


def _mask_text(text: str) -> str:
    """The grader's mask description (``grader.checks.calls._mask_kind``) in the page's language."""
    if text == "no mask":
        return gettext("no mask")
    m = MASK_SHAPE.match(text)
    if m and m.group(1) == "boolean":
        return gettext("boolean mask of shape %(shape)s", shape=m.group(2))
    if m:
        return gettext("float (additive) mask of shape %(shape)s", shape=m.group(2))
    return text  # is_causal=True: code


def _translated(details: dict, check: dict) -> dict:
    """``details`` with its case and mask in the reader's language, where they are known."""
    lang = interface_language()
    if lang == "en":
        return details
    out = dict(details)
    if isinstance(details.get("case"), str):
        found = _stored_case(check.get("message_i18n"), details["case"])
        out["case"] = render(found, lang) if found is not None else render(details["case"], lang)
    if isinstance(details.get("mask"), str):
        out["mask"] = _mask_text(details["mask"])
    return out


def describe_check(check: dict) -> dict:
    """The check plus ``facts`` [(label, text)], ``other`` [(key, text)], ``case`` (in the
    reader's language) and which plots exist."""
    details = check.get("details") or {}
    if not isinstance(details, dict):
        details = {"details": details}
    shown = _translated(details, check)
    facts = [(label, _show(shown[key])) for key, label in FACTS
             if details.get(key) is not None and not (key == "nonfinite" and not details[key])]
    known = {key for key, _ in FACTS} | PICTURE_KEYS | HIDDEN_KEYS
    other = [(key.replace("_", " "), _show(value)) for key, value in details.items()
             if key not in known and value is not None]
    traceback = details.get("traceback") if isinstance(details.get("traceback"), str) else None
    scored = bool(check.get("max_points"))
    # A reported-only check (no points) is a hint: it never shows a failure's ✗ and red row.
    state = "pass" if check.get("passed") else ("note" if not scored else
                                                "explained" if details.get("because_of") else "fail")
    return {**check, "facts": facts, "other": other, "skipped": bool(details.get("skipped")),
            "case": shown.get("case") if isinstance(shown.get("case"), str) else None,
            "scored": scored, "state": state, "mark": MARKS[state],
            "traceback": traceback,
            "has_weights": isinstance(details.get("weights_submission"), list),
            "has_variance": isinstance(details.get("variance_by_dk"), list)
            and bool(details["variance_by_dk"])}


def result_context(submission, viewer) -> dict:
    """What a result page shows of ``submission`` to ``viewer``: the student's page and the
    instructor's read this one function, so both show the same bug-first summary and checks."""
    from ..services.submissions import submission_view

    view = submission_view(submission, viewer)
    return {"view": view, "checks": describe_checks(view["checks"]),
            "summary": view.get("summary"), "scoring": view.get("scoring")}


def describe_checks(checks: list[dict], open_limit: int = 4) -> list[dict]:
    """Every check described, with ``open`` set on the failures worth unfolding first:
    the first failure, then failures that come with pictures."""
    described = [dict(describe_check(c), position=i) for i, c in enumerate(checks)]
    # a failure a counted bug explains still shows its pictures unfolded: they show the bug
    failed = [c for c in described if c["state"] in ("fail", "explained") and not c["skipped"]]
    first = next((c for c in failed if c["state"] == "fail"), failed[0] if failed else None)
    chosen = ([first] if first else []) + [c for c in failed if c is not first
                                           and (c["has_weights"] or c["has_variance"])]
    for c in chosen[:open_limit]:
        c["open"] = True
    return described

