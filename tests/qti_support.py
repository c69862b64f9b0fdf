"""A small interpreter for the QTI 2.1 response processing the exporter writes, so that tests can
check that an exported item scores an answer the way the service does (no QTI engine is
installed here). It covers the operators questions/export/qti.py uses and fails loudly on any
other, so a new construct in the exporter needs a line here, not a silent pass."""
from __future__ import annotations

from lxml import etree

NS = "{http://www.imsglobal.org/xsd/imsqti_v2p1}"


def _tag(el) -> str:
    return el.tag.replace(NS, "")


def score(item: etree._Element, responses: dict) -> dict:
    """The outcomes (SCORE, FEEDBACK...) of ``item`` for ``responses`` ({identifier: value};
    an ordered response is a list of choice identifiers)."""
    declared = {d.get("identifier"): d for d in item.findall(f"{NS}responseDeclaration")}
    outcomes = {}
    for d in item.findall(f"{NS}outcomeDeclaration"):
        default = d.find(f"{NS}defaultValue/{NS}value")
        value = None if default is None else default.text
        if d.get("baseType") == "float" and value is not None:
            value = float(value)
        outcomes[d.get("identifier")] = [] if d.get("cardinality") == "multiple" and value is None else value
    env = {"responses": responses, "declared": declared, "outcomes": outcomes}
    rp = item.find(f"{NS}responseProcessing")
    for rule in (rp if rp is not None else []):
        _rule(rule, env)
    return outcomes


def _rule(el, env) -> None:
    tag = _tag(el)
    if tag == "setOutcomeValue":
        env["outcomes"][el.get("identifier")] = _expr(el[0], env)
    elif tag == "responseCondition":
        for branch in el:
            if _tag(branch) == "responseElse" or _expr(branch[0], env):
                for rule in (branch if _tag(branch) == "responseElse" else branch[1:]):
                    _rule(rule, env)
                return
    else:
        raise AssertionError(f"unsupported rule {tag}")


def _expr(el, env):
    tag, kids = _tag(el), [k for k in el]
    if tag == "variable":
        name = el.get("identifier")
        return env["responses"].get(name) if name in env["declared"] else env["outcomes"].get(name)
    if tag == "baseValue":
        return float(el.text) if el.get("baseType") == "float" else el.text
    if tag == "correct":
        values = [v.text for v in env["declared"][el.get("identifier")].findall(f"{NS}correctResponse/{NS}value")]
        decl = env["declared"][el.get("identifier")]
        return float(values[0]) if decl.get("baseType") == "float" else values[0]
    if tag == "match":
        a, b = (_expr(k, env) for k in kids)
        return a is not None and a == b
    if tag == "equal":
        a, b = (_expr(k, env) for k in kids)
        tolerance = float(el.get("tolerance").split()[0])
        return a is not None and abs(float(a) - float(b)) <= tolerance
    if tag == "stringMatch":
        a, b = (_expr(k, env) for k in kids)
        if a is None:
            return False
        return a == b if el.get("caseSensitive") == "true" else a.lower() == b.lower()
    if tag == "index":
        seq = _expr(kids[0], env)
        n = int(el.get("n"))
        return seq[n - 1] if seq is not None and n <= len(seq) else None
    if tag == "and":
        return all(_expr(k, env) for k in kids)
    if tag == "or":
        return any(_expr(k, env) for k in kids)
    if tag == "sum":
        return sum(_expr(k, env) for k in kids)
    if tag == "min":
        return min(_expr(k, env) for k in kids)
    if tag == "multiple":
        out = []
        for k in kids:
            value = _expr(k, env)
            out.extend(value if isinstance(value, list) else [value])
        return out
    if tag == "mapResponse":
        mapping = env["declared"][el.get("identifier")].find(f"{NS}mapping")
        chosen = env["responses"].get(el.get("identifier")) or []
        table = {m.get("mapKey"): float(m.get("mappedValue")) for m in mapping}
        total = sum(table.get(c, float(mapping.get("defaultValue", 0))) for c in chosen)
        return max(float(mapping.get("lowerBound", "-inf")), min(float(mapping.get("upperBound", "inf")), total))
    raise AssertionError(f"unsupported expression {tag}")
