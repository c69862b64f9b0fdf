"""Reports as strict JSON: what the grader prints and the web service stores.

One encoding for both: non-finite floats become the strings "nan", "inf" and "-inf" (strict
JSON parsers and PostgreSQL's JSON reject the bare tokens), tuples become lists, dict keys
strings, and anything else its (shortened) repr.
"""
from __future__ import annotations

import math


def json_safe(value):
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)[:200]
