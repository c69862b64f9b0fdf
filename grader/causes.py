"""Root causes, charged once: one bug costs its own family's points, and nothing more.

A failing check whose output equals the reference with a named bug applied (its details
carry ``diagnosis``) is fully explained by that bug. The bug is charged to the family that
tests it (``variants.HOME``): the failing checks of that family keep their verdict. Anywhere
else, a check explained by a bug already charged is a knock-on: it is shown as "fails
because of …" and keeps its points, since everything it checks on its own still holds.
A bug whose own family did not fail (or that has none) is charged where it first shows.
"""
from __future__ import annotations

from .checks.variants import explain, home_family


def charge_once(checks: list, families) -> list[dict]:
    """Mark knock-ons in ``checks`` (CheckResult objects, in report order) and return the causes."""
    causes: dict[str, dict] = {}
    failing = [c for c in checks if not c.passed and c.max_points > 0 and not c.details.get("skipped")]
    for c in failing:
        name = c.details.get("diagnosis")
        if name:
            causes.setdefault(name, {"diagnosis": name, "explanation": explain(name),
                                     "family": home_family(name, families), "charged": [], "knock_on": []})
    failed_families = {c.id.split(".")[0] for c in failing}
    for name, cause in list(causes.items()):
        explained = [c for c in failing if c.details.get("diagnosis") == name]
        home = [c for c in explained if c.id.split(".")[0] == cause["family"]]
        if not home and cause["family"] in failed_families:
            # Its family failed under another name (1/d_k and a hard-coded 1/8 coincide at d_k = 8):
            # one bug of that family, already charged there; these checks are its knock-ons.
            owner = next((other for other in causes.values() if other is not cause
                          and other["family"] == cause["family"]), None)
            if owner is not None:
                for c in explained:
                    c.details["diagnosis"] = owner["diagnosis"]
                del causes[name]
                continue
        if cause["family"] is None:  # a bug this grader has no home family for: every check it
            home = explained            # breaks is charged, as without this rule
            cause["family"] = explained[0].id.split(".")[0]
        elif not home:  # its family passed: charge it where it first shows
            home = explained[:1]
            cause["family"] = home[0].id.split(".")[0]
        cause["_home"], cause["_explained"] = home, explained
    # Two names charged to one family (attn_mask ignored, and the float mask ignored) are one bug
    # there: the family is charged once either way; the first name speaks for both.
    by_family: dict[str, dict] = {}
    for name in list(causes):
        cause = causes[name]
        first = by_family.setdefault(cause["family"], cause)
        if first is not cause:
            first["_home"] += cause["_home"]
            first.setdefault("also", []).append(cause["explanation"] or name)
            for c in cause["_explained"]:
                c.details["diagnosis"] = first["diagnosis"]
            del causes[name]
    for name, cause in causes.items():
        home, explained = cause.pop("_home"), cause.pop("_explained")
        explained = [c for c in failing if c.details.get("diagnosis") == name]
        for c in explained:
            if c in home:
                cause["charged"].append(c.id)
                continue
            cause["knock_on"].append(c.id)
            c.details["because_of"] = name
            c.points = c.max_points
            c.message = f"fails because of a bug already counted ({explain(name) or name}): {c.message}"
    return list(causes.values())


def summary(checks: list, causes: list[dict]) -> str:
    """One line for the top of the report: how many bugs, and what each explains."""
    failing = [c for c in checks if not c.passed and c.max_points > 0 and not c.details.get("skipped")]
    if not failing:
        return "every scored check passed"
    explained = {i for cause in causes for i in cause["charged"] + cause["knock_on"]}
    others = [c for c in failing if c.id not in explained]
    parts = []
    for cause in causes:
        n = len(cause["charged"]) + len(cause["knock_on"])
        parts.append(f"{cause['explanation'] or cause['diagnosis']} ({n} check{'s fail' if n != 1 else ' fails'} "
                     f"because of it; charged once, to {cause['family']})")
    if others:
        parts.append(f"{len(others)} other failing check{'s' if len(others) != 1 else ''}, first "
                     f"{others[0].id}: {others[0].message}")
    bugs = len(causes)
    head = f"{bugs} bug{'s' if bugs != 1 else ''} found" if bugs else "no known bug matched"
    return f"{head}: " + "; ".join(parts)
