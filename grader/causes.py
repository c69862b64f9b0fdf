"""Root causes, charged once: one bug costs its own family's points, and nothing more.

A failing check whose output equals the reference with a named bug applied (its details
carry ``diagnosis``) is fully explained by that bug. The bug is charged to the family that
tests it (its home in the task's catalogue, ``Task.bugs``): the failing checks of that family keep their
verdict. Anywhere
else, a check explained by a bug already charged is a knock-on: it is shown as "fails
because of …" and keeps its points, since everything it checks on its own still holds.

A task may group families into concepts (``Task.concepts``, e.g. masking: padding, causal,
lengths). A bug charged to a family of a concept is charged in every family of that concept where
it shows: a decoder that fills masked scores with 1e-10 is wrong about masking in its padding, its
causal and its length checks, not in one of them. Checks of other concepts keep the knock-on refund.

Only what the parent has shown to hold may be forgiven, so a file cannot buy a knock-on:
- a bug whose own family passed (or that has none) is charged in every check where it shows:
  the family that tests it did not see it, so nothing else it breaks is vouched for;
- randomness ("nondeterministic") never explains a failure away: noise added on purpose
  would otherwise turn every failure it covers into a forgiven one;
- a check whose call raised, crashed or hung (``error_kind``), or returned no gradient
  (``no_gradient``), is charged whatever bug is named on it: a deliberate error there must not
  hide what it kept the grader from checking.
"""
from __future__ import annotations

from .i18n import N_, T, counted

NEVER_FORGIVEN = {"nondeterministic"}  # bugs that never make another check a knock-on


def unanswered(check) -> bool:
    """The check's own call raised, crashed or hung, or returned no gradient: charged whatever
    bug is named on it."""
    return bool(check.details.get("error_kind") or check.details.get("no_gradient"))


def charge_once(checks: list, families, bugs=None, concepts=None, moved=None) -> list[dict]:
    """Mark knock-ons in ``checks`` (CheckResult objects, in report order) and return the causes.
    ``bugs`` is the task's catalogue (``Task.bugs``, attention's by default): each named bug's
    sentence and home family. ``concepts`` (``Task.concepts``: name -> families) groups the families
    that test one idea: a bug is charged in every family of its home's concept where it shows.
    ``moved(rule, check, points, **why)`` is told each refund ("knock_on") and each refund the concept
    withholds ("concept", 0 points: the check stays charged)."""
    moved = moved or (lambda *args, **why: None)
    if bugs is None:
        from .checks.variants import ATTENTION as bugs
    causes: dict[str, dict] = {}
    failing = [c for c in checks if not c.passed and c.max_points > 0 and not c.details.get("skipped")]
    for c in failing:
        name = c.details.get("diagnosis")
        if name:
            causes.setdefault(name, {"diagnosis": name, "explanation": c.details.get("explanation") or bugs.explain(name),
                                     "family": bugs.home_family(name, families), "charged": [], "knock_on": []})
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
        if cause["family"] is None or not home or name in NEVER_FORGIVEN:
            # No family of its own, its family did not see it, or randomness: charged wherever it shows.
            home = explained
            if not cause["family"] or cause["family"] not in {c.id.split(".")[0] for c in home}:
                cause["family"] = explained[0].id.split(".")[0]
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
        concept = concept_of(cause["family"], concepts)
        for c in explained:
            if c in home or unanswered(c) or c.id.split(".")[0] in concept:
                cause["charged"].append(c.id)
                if c not in home and not unanswered(c) and c.id.split(".")[0] != cause["family"]:
                    moved("concept", c, 0, bug=name, family=cause["family"])
                continue
            cause["knock_on"].append(c.id)
            c.details["because_of"] = name
            moved("knock_on", c, c.max_points - c.points, bug=name)
            c.points = c.max_points
            c.message = _knock_on(c.message, name, cause["explanation"])
        cause["families"] = list(dict.fromkeys(i.split(".")[0] for i in cause["charged"]))
    return list(causes.values())


def concept_of(family: str | None, concepts) -> set:
    """The families that test the same idea as ``family`` (masking: padding, causal, lengths): one
    bug that breaks several of them is wrong about that idea in each, so it is charged in each."""
    return next((set(members) for members in (concepts or {}).values() if family in members), {family})


def _knock_on(message, name: str, explanation):
    """A knock-on's message: its own failure after the note that its bug is charged elsewhere.
    The bug is named in the note only where the message does not end by naming it ("Likely
    cause: …"); a page of knock-ons said each bug twice per row."""
    if explanation and explanation in message:
        return T("fails because of a bug already counted: {message}", message=message)
    return T("fails because of a bug already counted ({bug}): {message}", bug=_bug(name, explanation),
             message=message)


def summary(checks: list, causes: list[dict]) -> str:
    """One line for the top of the report: how many bugs, and what each explains."""
    failing = [c for c in checks if not c.passed and c.max_points > 0 and not c.details.get("skipped")]
    if not failing:
        return T("every scored check passed")
    explained = {i for cause in causes for i in cause["charged"] + cause["knock_on"]}
    # a check a failed gate took (scoring.py) held on its own: the first one named is a real failure
    others = sorted((c for c in failing if c.id not in explained), key=lambda c: bool(c.details.get("gated_by")))
    parts = []
    for cause in causes:
        n = len(cause["charged"]) + len(cause["knock_on"])
        bug = _bug(cause["diagnosis"], cause["explanation"])
        families = cause.get("families") or [cause["family"]]
        if len(families) > 1:  # charged in every check where it shows (see the module's docstring)
            parts.append(T("{bug} ({n} checks fail because of it; charged in each family where it shows: "
                           "{families})", bug=bug, n=n, families=", ".join(families)))
        else:
            parts.append(counted(n, N_("{bug} ({n} check fails because of it; charged once, to {family})"),
                                 N_("{bug} ({n} checks fail because of it; charged once, to {family})"),
                                 n=n, bug=bug, family=families[0]))
    if others and causes:
        n, first = len(others), others[0]
        parts.append(counted(n, N_("{n} other failing check, first {check}: {message}"),
                             N_("{n} other failing checks, first {check}: {message}"),
                             n=n, check=first.id, message=first.message))
    elif others:  # no bug named: nothing for them to be "other" than
        n, first = len(others), others[0]
        parts.append(counted(n, N_("{n} failing check, first {check}: {message}"),
                             N_("{n} failing checks, first {check}: {message}"),
                             n=n, check=first.id, message=first.message))
    bugs = len(causes)
    head = counted(bugs, N_("{n} bug found"), N_("{n} bugs found"), n=bugs) if bugs else T("no known bug matched")
    joined = parts[0]
    for part in parts[1:]:  # each part keeps its own template; "{first}; {second}" is an entry: zh joins with "；"
        joined = T("{first}; {second}", first=joined, second=part)
    return T("{head}: {parts}", head=head, parts=joined)


def _bug(name: str, explanation):
    """A named bug's sentence, translatable by its English text (its name where it has none)."""
    if isinstance(explanation, T) and explanation.args:  # found by grader/checks/diagnosis.py: its own template
        return explanation
    return T(explanation) if explanation else name
