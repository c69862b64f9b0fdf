"""How a report reads on a terminal and in a pipe, without grading anything: a check's details
as tables rather than Python structures, a syntax error's caret, the piped layout, which check
the "see one failure alone" hint names, and a summary with no named bug."""
from __future__ import annotations

import io

from rich.console import Console

from grader.causes import summary
from grader.commands import first_to_reproduce
from grader.console import details_renderables, for_output, print_checks
from grader.grading import CheckResult, GradeReport
from grader.source import syntax_error_place
from grader.i18n import T, render


def _printed(renderables, width=100) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=False)
    for r in renderables:
        console.print(r)
    return out.getvalue()


def test_a_list_of_records_is_a_table_not_a_python_structure():
    details = {"variance_by_dk": [{"d_k": 8, "variance": 8.0, "expected": 1.0},
                                  {"d_k": 512, "variance": 512.0, "expected": 1.0}],
               "growth": {"heads": {"shape": "64x2x4x4x8", "growth": 1.1}}, "worst_index": [0, 3, 1],
               "reproduce": "attn-grader check FILE --task sdpa --only scale.default"}
    text = _printed(details_renderables(details, "en", skip=["reproduce"]))
    assert "{'" not in text and "[{" not in text and "reproduce" not in text
    lines = text.splitlines()
    assert any("d_k" in line and "your variance" in line and "expected variance" in line for line in lines)
    assert any(line.split() == ["512", "512", "1"] for line in lines)
    assert any(line.split()[:2] == ["heads", "64x2x4x4x8"] for line in lines)
    assert "worst_index: [0, 3, 1]" in text
    assert "ваша дисперсия" in _printed(details_renderables(details, "ru"))


def test_a_syntax_error_is_placed_with_a_caret_under_its_column():
    try:
        compile("def f(q, k, v)\n\treturn  q @ k\n", "x.py", "exec")
    except SyntaxError as exc:
        place = syntax_error_place(exc)
    assert (place["line"], place["offset"], place["text"]) == (1, 15, "def f(q, k, v)")
    code, caret = place["caret"].split("\n")
    assert code == "1 | def f(q, k, v)" and caret.index("^") == len("1 | def f(q, k, v)")
    try:
        compile("if True:\n\tx = 1 +* 2\n", "x.py", "exec")
    except SyntaxError as exc:
        place = syntax_error_place(exc)
    code, caret = place["caret"].expandtabs().split("\n")  # a tab stays a tab under it: the caret lines up
    assert code == "2 |     x = 1 +* 2" and caret.index("^") == code.index("*")


def _report():
    checks = [CheckResult("load.source", True, 2, 2, T("valid UTF-8 Python")),
              CheckResult("scale.default", False, 0, 10, "no scaling", {"reproduce": "…", "diagnosis": "no_scale"}),
              CheckResult("output.shapes", True, 8, 8, "knock-on", {"reproduce": "…", "because_of": "no_scale"}),
              CheckResult("causal.square", False, 0, 4, "numbers only", {"reproduce": "…"}),
              CheckResult("fully_masked.zeros", False, 0, 0, "NaN row", {"reproduce": "…"})]
    checks[2].passed = False
    return GradeReport(task="sdpa", checks=checks, causes=[
        {"diagnosis": "no_scale", "explanation": None, "family": "scale", "charged": ["scale.default"],
         "knock_on": ["output.shapes"]}])


def test_the_hint_names_a_failure_no_bug_explains_first():
    report = _report()
    assert first_to_reproduce(report).id == "causal.square"
    report.checks = [c for c in report.checks if c.id != "causal.square"]
    assert first_to_reproduce(report).id == "fully_masked.zeros"  # unscored, but still unexplained
    report.checks = [c for c in report.checks if c.id != "fully_masked.zeros"]
    assert first_to_reproduce(report).id == "scale.default"  # the bug's own check, last


def test_a_summary_without_a_named_bug_does_not_say_other():
    checks = [CheckResult("output.shapes", False, 0, 8, "wrong"), CheckResult("mask.bool_broadcast", False, 0, 4, "x")]
    said = render(summary(checks, []), "en")
    assert said.startswith("no known bug matched: 2 failing checks, first output.shapes") and "other" not in said


def test_piped_output_is_a_line_per_failure_and_one_for_the_passes():
    out = io.StringIO()
    console = for_output(Console(file=out, width=80, force_terminal=False))
    checks = [c.to_dict() for c in _report().checks]
    long = "x" * 200
    checks[3]["message"] = long
    print_checks(console, "f.py — task sdpa", checks, "en")
    lines = out.getvalue().splitlines()
    assert "│" not in out.getvalue() and len(lines) == 6
    assert lines[1].startswith("FAIL scale.default 0/10: no scaling")
    assert lines[2] == f"FAIL causal.square 0/4: {long}"  # never wrapped at the 80 columns
    assert lines[4].startswith("FAIL output.shapes: fail because of a bug already counted")
    assert lines[5] == "pass load.source"


def test_the_pre_check_says_when_its_torch_is_not_the_services():
    from grader import TORCH_VERSION
    from grader.commands import torch_mismatch

    assert torch_mismatch(TORCH_VERSION) is None and torch_mismatch(TORCH_VERSION + "+cpu") is None
    said = render(torch_mismatch("2.14.1"), "en")
    assert said.startswith(f"your torch is 2.14.1, the service grades with torch {TORCH_VERSION}")
    assert f"torch=={TORCH_VERSION}" in render(torch_mismatch("2.14.1"), "zh")


def test_submit_says_when_the_servers_torch_is_not_yours():
    from importlib import metadata

    from grader.client import print_result

    def printed(server_torch):
        out = io.StringIO()
        view = {"status": "done", "id": 7, "task": "sdpa", "checks": [], "feedback": "full", "score": 100,
                "max_score": 100, "passed": True, "grader_version": "2.0+x", "torch_version": server_torch,
                "timings": {"total_seconds": 0.5, "wait_seconds": 0.1}}
        print_result(view, Console(file=out, width=200, force_terminal=False), "en")
        return out.getvalue()

    mine = metadata.version("torch")
    assert "your torch is" not in printed(mine.split("+")[0])
    assert f"note: your torch is {mine}, the service grades with torch 1.0.0" in printed("1.0.0+cu121")


def test_a_reported_only_check_that_did_not_pass_is_a_note_not_a_failure():
    checks = [CheckResult("output.float64", True, 10, 10, T("matches")).to_dict(),
              CheckResult("fully_masked.zeros", False, 0, 0, T("a fully masked row gives NaN")).to_dict()]
    for terminal in (True, False):
        out = io.StringIO()
        console = for_output(Console(file=out, width=100, force_terminal=terminal, color_system=None))
        print_checks(console, "f.py — task sdpa", checks, "en")
        assert "FAIL" not in out.getvalue() and "note" in out.getvalue()


def test_a_chinese_table_on_a_terminal_folds_its_messages_instead_of_cutting_them():
    """Review 3, P3: at 80 columns a Han message (no spaces to wrap at) was cut with "…"."""
    from rich.cells import cell_len
    out = io.StringIO()
    console = for_output(Console(file=out, width=80, force_terminal=True, color_system=None))
    checks = [c.to_dict() for c in _report().checks]
    advice = ("检测到的缩放：没有缩放：分数没有除以根号下键的维度，所以软最大值饱和；可能的原因：你没有缩放"
              "点积，请在软最大值之前把分数除以根号下键的维度")
    checks[1]["message"], checks[1]["message_i18n"] = advice, None
    print_checks(console, "f.py — 任务 sdpa", checks, "zh")
    text = out.getvalue()
    assert "…" not in text
    assert all(cell_len(line) <= 80 for line in text.splitlines())
    flat = "".join(ch for ch in text if "\u4e00" <= ch <= "\u9fff" or ch in "：；，")
    assert advice in flat  # every character, in order, folded across lines
