"""Every analysis of a student's text ends within fixed bounds, in a limited process of its own
(grader/bounded.py), and says so clearly when a file is past them.

The sources here are generated to be pathological for an alias resolver or an AST walk: long alias
chains in either order, a name rebound from itself, rings of names, deep nesting, huge files and
many names. Each must end with the right verdict or with the documented failure, never hang.
"""
import os

import pytest

from grader import bounded
from grader.checks import autograd_ban, forbidden
from grader.grading import grade_source

HERE = os.path.dirname(os.path.abspath(__file__))
THREE_LINES = "import torch\nx = torch\nx = x.nn\n"  # once rebound the autograd scan's alias loop for ever
SDPA_USE = "q = k = v = None\n{name}.scaled_dot_product_attention(q, k, v)\n"
AUTOGRAD_USE = "y = None\n{name}.grad(y, [y])\n"


def _findings(source, kind):
    return " | ".join(f["what"] for f in bounded.scan(source, kind))


def _forward_chain(n, first="torch.nn.functional"):
    return "import torch\na0 = " + first + "\n" + "".join(f"a{i + 1} = a{i}\n" for i in range(n))


def _reverse_chain(n, last="torch.nn.functional"):
    """a0 = a1, a1 = a2, …: each alias refers to one assigned further down (quadratic passes before)."""
    return "import torch\n" + "".join(f"a{i} = a{i + 1}\n" for i in range(n)) + f"a{n} = {last}\n"


@pytest.mark.parametrize("n", [10, 30_000])
@pytest.mark.parametrize("chain", [_forward_chain, _reverse_chain])
def test_long_alias_chains_resolve_in_either_order(chain, n):
    end = f"a{n}" if chain is _forward_chain else "a0"
    assert "torch.nn.functional.scaled_dot_product_attention" in \
        _findings(chain(n) + SDPA_USE.format(name=end), "forbidden").replace(end, "torch.nn.functional")
    assert "uses torch.autograd.grad" in _findings(chain(n, "torch.autograd") + AUTOGRAD_USE.format(name=end),
                                                   "autograd")


def test_an_alias_chain_past_the_size_bound_is_a_clear_failure():
    source = _reverse_chain(100_000) + SDPA_USE.format(name="a0")
    assert len(source.encode()) > bounded.MAX_SOURCE_BYTES
    for kind in ("forbidden", "autograd"):
        with pytest.raises(bounded.BoundExceeded) as caught:
            bounded.scan(source, kind)
        assert caught.value.what == "size"
    assert bounded.parse(source)["error"] == "size"


@pytest.mark.parametrize("source, autograd", [
    (THREE_LINES, ""),
    ("import torch\nx = torch\nx = x.autograd\n" + AUTOGRAD_USE.format(name="x"), "uses torch.autograd.grad"),
    ("import torch as x\nx = x.nn\n", ""),
    ("import torch\nx = torch\n" + "x = x.nn\n" * 20_000 + "x.autograd.grad(1)\n", ""),  # torch.nn.nn….autograd
    ("import torch\nx = torch.autograd\n" + "x = x\n" * 20_000 + AUTOGRAD_USE.format(name="x"),
     "uses torch.autograd.grad"),
    ("x = torch.autograd\ny = x.functional\nx = y.jacobian\nimport torch\n", "torch.autograd"),
])
def test_a_name_rebound_from_itself_ends(source, autograd):
    found = _findings(source, "autograd")
    assert (autograd in found) if autograd else not found
    assert _findings(source, "forbidden") == ""


def test_rings_of_names_end_with_a_verdict():
    ring = "import torch as n0\n" + "".join(f"n{i + 1} = n{i}.nn\n" for i in range(5_000)) + "n0 = n5000\n"
    assert _findings(ring, "forbidden") == "" and _findings(ring, "autograd") == ""
    pairs = "import torch\n" + "".join(f"a{i} = b{i}.x\nb{i} = a{i}.y\n" for i in range(10_000))
    pairs += "a1 = torch.nn.functional\nb1.scaled_dot_product_attention(1)\n"
    assert "scaled_dot_product_attention" in _findings(pairs, "forbidden")
    assert _findings(pairs, "autograd") == ""


def test_many_names_and_many_lookups():
    names = "import torch\n" + "".join(f"n{i} = torch\n" for i in range(30_000))
    assert "uses torch.autograd.grad" in _findings(names + AUTOGRAD_USE.format(name="n29999.autograd"),
                                                   "autograd")
    # thousands of lookups by a computed name, thousands of strings: each file-wide search done once
    lookups = "import torch\n" + "".join(f"s{i} = 'part{i}'\ngetattr(torch, s{i})\n" for i in range(5_000))
    assert _findings(lookups, "autograd") == "" and _findings(lookups, "forbidden") == ""
    assert "'scaled_dot'" in _findings(lookups + "t = 'scaled_dot_product'\n", "forbidden")


def test_findings_stop_at_their_limit():
    uses = "import torch\n" + "x = torch.nn.functional.scaled_dot_product_attention\n" * 2_000
    assert len(bounded.scan(uses, "forbidden")) == forbidden.FINDINGS_LIMIT
    chain = "import torch\nx = torch" + ".scaled_dot_product_attention" * 800 + "\n"  # one chain, walked once
    assert bounded.scan(chain, "forbidden")[0]["what"].startswith("uses torch.scaled_dot_product_attention")
    many = "import torch\n" + "torch.autograd.grad(1)\n" * 2_000
    assert len(bounded.scan(many, "autograd")) == forbidden.FINDINGS_LIMIT


@pytest.mark.parametrize("source, error", [
    ("x = " + "(" * 5_000 + ")" * 5_000 + "\n", ("deep", "syntax")),
    ("x = " + "-" * 100_000 + "1\n", ("deep", "syntax")),
    ("import torch\nx = torch" + ".a" * 50_000 + "\n", ("deep", "syntax")),
    ("".join(f"v{i} = {i}\n" for i in range(70_000)), ("nodes",)),
    ("# " + "x" * 3_000_000 + "\n", ("size",)),
])
def test_deep_and_huge_files_are_refused_with_a_reason(source, error):
    assert bounded.parse(source)["error"] in error


def test_deep_but_parseable_nesting_and_a_large_file_get_a_verdict():
    blocks = "import torch\n" + "".join(" " * i + "if x:\n" for i in range(90)) + " " * 90 + \
        "torch.nn.functional.scaled_dot_product_attention(1)\n"
    assert "scaled_dot_product_attention" in _findings(blocks, "forbidden")
    expression = "import torch\ny = " + "(" * 150 + "+".join(["1"] * 500) + ")" * 150 + \
        "\nf = torch.nn.functional\n" + SDPA_USE.format(name="f")
    assert "scaled_dot_product_attention" in _findings(expression, "forbidden")
    text = '"""' + "documentation line\n" * 40_000 + '"""\nimport torch\n'  # 760 KB, a few nodes
    assert bounded.parse(text) is None and _findings(text, "forbidden") == ""


def test_a_child_past_its_cpu_or_memory_bound_is_a_clear_failure(monkeypatch):
    source = _reverse_chain(30_000) + SDPA_USE.format(name="a0")
    monkeypatch.setattr(bounded, "MEMORY_BYTES", 48 * 2**20)
    with pytest.raises(bounded.BoundExceeded) as caught:
        bounded.scan(source, "forbidden")
    assert caught.value.what in ("memory", "crash")
    monkeypatch.setattr(bounded, "MEMORY_BYTES", 768 * 2**20)
    monkeypatch.setattr(bounded, "CPU_SECONDS", 0)  # RLIMIT_CPU 0 s: the first tick ends it
    with pytest.raises(bounded.BoundExceeded) as caught:
        bounded.scan(source, "autograd")
    assert caught.value.what == "cpu"


def test_a_scan_past_its_bounds_fails_its_check_with_a_message(monkeypatch):
    from types import SimpleNamespace

    from grader.checks.base import Context, Fail
    from grader.tasks import TASKS

    def past(source, stages):  # the limited process stopped after the parse
        return {"parse": None, "_stopped": ("cpu", "over 10 s of CPU time")}

    monkeypatch.setattr(bounded, "_run", past)
    session = SimpleNamespace(source=THREE_LINES, charged=0.0)
    # the grading's one analysis, and a check's own scan where a context has none
    for analysis in (bounded.analyse(THREE_LINES, bounded.SCANS), None):
        ctx = Context(session, TASKS["sdpa_backward"], 1, "cpu", 1.0, analysis=analysis)
        for check in (forbidden.static_check, autograd_ban.static_check):
            with pytest.raises(Fail) as caught:
                check(ctx)
            assert "within its limits (over 10 s of CPU time)" in caught.value.message
            assert caught.value.details["detected"] and caught.value.details["bound"] == "cpu"


def test_a_grading_parses_and_scans_in_one_limited_process(monkeypatch):
    stages = []
    run = bounded._run

    def counted(source, asked):
        stages.append(asked)
        return run(source, asked)

    monkeypatch.setattr(bounded, "_run", counted)
    with open(os.path.join(os.path.dirname(HERE), "grader", "tasks", "sdpa_backward", "corpus", "correct",
                           "matmul_chain_rule.py")) as f:
        report = grade_source(f.read(), "sdpa_backward", seed=1, only="forbidden.autograd_source")
    assert report.checks[0].passed and stages == [["parse", "forbidden", "autograd"]], stages


def test_the_three_lines_end_with_a_verdict():
    with open(os.path.join(os.path.dirname(HERE), "grader", "tasks", "sdpa_backward", "corpus", "correct", "matmul_chain_rule.py")) as f:
        correct = f.read()
    report = grade_source(THREE_LINES + correct, "sdpa_backward", seed=1, only="forbidden.autograd_source")
    verdicts = {c.id: c.passed for c in report.checks}
    assert verdicts["forbidden.autograd_source"] and verdicts["forbidden.static"], report.to_dict()
    alone = grade_source(THREE_LINES, "sdpa_backward", seed=1)
    assert alone.score == 0 and "does not define" in alone.error


def test_the_web_check_for_the_function_reads_the_file_in_the_limited_process():
    assert bounded.defined("def f():\n    pass\n", ["f", "g"]) == {"f": True, "g": False}
    assert bounded.defined("def f(:\n", ["f"]) == {"f": None}
    assert bounded.defined("# " + "x" * 3_000_000, ["f"]) == {"f": None}


def test_the_limited_process_imports_no_torch():
    """What it imports (the scans, the parser, the web's check) must start in milliseconds."""
    import subprocess
    import sys

    code = ("import sys; sys.path.insert(0, sys.argv[1]); import grader.bounded, grader.checks.forbidden, "
            "grader.checks.autograd_ban; assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-I", "-c", code, bounded._ROOT], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_notebook_passes_read_cells_in_the_limited_process():
    assert bounded.parses(["x = 1", "%time f()", "a = 5 % 2"]) == [True, False, True]
    assert bounded.parses(["# " + "x" * 3_000_000]) == [None]
    assert bounded.top_level_defs("def f():\n    pass\nx = 1\ndef f():\n    pass\n", "f") == [1, 4]
    assert bounded.top_level_defs(_reverse_chain(100_000), "f") == []  # past the size bound: no cell named

