"""Grading integrity: submissions written to cheat get nothing they did not compute honestly.

Each file in tests/integrity/ names its attack, its task and what it must get (``# expect:``):
``builtin`` (the default: built-in attention in some form) gets at most the load points and a
failing ``forbidden`` check; ``protocol`` (a forged answer) gets a report, never an exception,
with a protocol failure where the forgery reached the channel; ``notattention`` gets at most the
load and forbidden points; ``inputs``/``scale`` fail that family; ``grad`` scores nothing in the
gradient family (gradients the child made up); ``unloaded`` fails to load (score 0) with a report,
never an exception; ``full`` scores 100; ``score<=N`` at most N (a charged-once rule it tries to buy); ``any`` only must not break the grader. Every file is graded
at ``local`` (no isolation: the child can undo anything in its own process, so the parent's own
checks are what stops it) and ``auto``; a file names other levels with ``# levels:``. ``none``
differs from ``local`` only in how the child starts (a fresh interpreter whose ``__main__`` is the
harness, 2-3 s of CPU each for torch's import and disarming, against a fork of a warm process), so
the attacks that reach the harness through ``__main__`` are graded there too; a file about scoring
rather than the child (``# levels: local``) only where it says. ``static`` (a name of
torch's attention the file never calls) fails ``forbidden.static`` and loses nothing else: the run
did not confirm it.
"""
import glob
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from grader.checks import forbidden
from grader.checks.inputs import InputFactory
from grader.grading import grade_source
from grader.sandbox import Limits, answers, wire
from grader.tasks import TASKS

HERE = os.path.dirname(os.path.abspath(__file__))
ATTACKS = sorted(glob.glob(os.path.join(HERE, "integrity", "*.py")))
LEVELS = ("none", "local", "auto")
DEFAULT_LEVELS = ("local", "auto")
LOAD_POINTS = 5
# Tighter than a real run: the attacks that start programs or loop on purpose stop sooner.
LIMITS = Limits(wall_seconds=20, call_seconds=5)


def _head(path):
    with open(path, "rb") as f:
        return f.read(800).decode("utf-8", "replace")


def _meta(path):
    head = _head(path)
    task = re.search(r"^# task: (\w+)", head, re.M).group(1)
    expect = re.search(r"^# expect: ([\w<=]+)", head, re.M)
    return task, expect.group(1) if expect else "builtin"


def _levels(path):
    found = re.search(r"^# levels: (.+)$", _head(path), re.M)
    return tuple(level for level in LEVELS if level in found.group(1).split()) if found else DEFAULT_LEVELS


def _reaches(path):
    """The levels at which the forgery takes effect (``# reaches:``; default every level)."""
    found = re.search(r"^# reaches: (.+)$", _head(path), re.M)
    return set(found.group(1).split()) if found else set(LEVELS)


def _skipped(report) -> list:
    return [c["id"] for c in report["checks"] if c["details"].get("skipped")]


# The fixture grades every attack at each of its levels (about 90 gradings, two at a time) before its
# first test: minutes on two busy cores, more than pytest-timeout's default for one test.
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def reports():
    def grade(job):
        path, level = job
        with open(path, "rb") as f:
            report = grade_source(f.read(), _meta(path)[0], seed=4242, sandbox=level, limits=LIMITS)
        return job, report.to_dict()
    jobs = [(p, level) for p in ATTACKS for level in _levels(p)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(grade, jobs))


def test_every_attack_family_is_present():
    names = {os.path.basename(p)[:-3] for p in ATTACKS}
    for required in ("thread_builtin", "trace_switched_off", "patch_recorders", "edit_answer", "alias_builtin",
                     "exec_chr_builtin", "torch_ops_kernel", "mha_need_weights", "crash_after_builtin",
                     "forge_list_frame", "forge_missing_tensor", "forge_deep_json", "forge_huge_answer",
                     "empty_gradients", "hidden_mutation", "frozen_clock", "ignores_query_key", "returns_zeros",
                     "scale_probe_cheat", "fresh_interpreter", "undo_block", "coding_utf7", "bom_correct",
                     "scan_recursion", "parse_recursion", "parse_memory", "noise_where_masked",
                     "float16_inside_everywhere", "inplace_hides_no_gradients", "probe_width_cheat",
                     "numpy_finite_differences", "restore_kernel_code", "quantizable_mha",
                     "torch_pattern_import", "torch_code_rebuilt", "torch_bytecode_marshal",
                     "softmax_backward_native", "softmax_backward_decomposition", "tiled_rows_whole_keys",
                     "tiled_query_chunks"):
        assert required in names


def test_every_attack_on_the_harness_as_main_is_graded_where_it_is_main():
    """An attack that finds the harness as ``__main__`` reaches it only at ``none``: graded there."""
    for path in ATTACKS:
        with open(path, encoding="utf-8", errors="replace") as f:
            if 'modules.get("__main__")' in f.read():
                assert "none" in _levels(path), f"{os.path.basename(path)}: add '# levels: none local auto'"


@pytest.mark.parametrize("path,level", [(p, level) for p in ATTACKS for level in _levels(p)],
                         ids=[f"{os.path.basename(p)[:-3]}-{level}" for p in ATTACKS for level in _levels(p)])
def test_attack_is_withstood(reports, path, level):
    report = reports[(path, level)]
    _, expect = _meta(path)
    json.dumps(report)  # a plain JSON report, whatever the child sent
    assert report["max_score"] == 100
    internal = [c["id"] for c in report["checks"] if "internal_error" in c["details"]]
    assert not internal, f"grader errors in {internal}"
    failed = {c["id"] for c in report["checks"] if not c["passed"] and c["max_points"]}
    messages = " ".join(c["message"] for c in report["checks"]) + " " + str(report["error"])
    if expect == "builtin":
        assert report["score"] <= LOAD_POINTS, report["score"]
        assert any(i.startswith("forbidden.") for i in failed) or report["error"], sorted(failed)
    elif expect == "static":
        static = next(c for c in report["checks"] if c["id"] == "forbidden.static")
        assert not static["passed"] and static["details"].get("unconfirmed_by_run"), static["message"]
        assert report["score"] == 100 - static["max_points"], report["summary"]
        assert "did not confirm" in static["message"], static["message"]
    elif expect == "protocol":
        assert report["score"] <= 2 * LOAD_POINTS
        if level in _reaches(path):  # where the forgery reaches the channel, it is named and zeroes the grade
            assert "answer channel" in messages, messages[:400]
            assert report["score"] <= LOAD_POINTS
            assert _skipped(report), "a forged answer decides the grade: nothing more is run"
    elif expect == "notattention":
        assert report["score"] <= 2 * LOAD_POINTS, report["score"]
    elif expect in ("inputs", "scale"):
        assert any(i.startswith(expect + ".") for i in failed), sorted(failed)
    elif expect == "unloaded":
        assert report["score"] == 0 and report["error"] and failed & {"load.source", "load.import"}, report["error"]
    elif expect == "full":
        assert report["score"] == 100, {c["id"]: c["message"] for c in report["checks"] if not c["passed"]}
    elif expect.startswith("score<="):
        assert report["score"] <= int(expect[len("score<="):]), (report["score"], report["summary"])
    elif expect == "grad":  # right values no backward produced: the whole family scores nothing
        gate = next(c for c in report["checks"] if c["id"] == "grad.at_scale")
        assert not gate["passed"] and "numerical differentiation" in gate["message"], gate["message"]
        assert any(i.startswith("grad.") for i in failed), sorted(failed)
        assert all(c["points"] == 0 for c in report["checks"] if c["id"].startswith("grad.")), report["checks"]
    if os.path.basename(path) == "fresh_interpreter.py" and level != "auto":
        # the first call on fresh inputs already is the kernel's output: nothing more is run. On a
        # busy host the second interpreter's import of torch can outlast the test's 5 s calls
        # (its wait is charged to the child): then nothing answered, and the score is the same.
        timed_out = "did not finish in time" in messages
        assert timed_out or (_skipped(report) and "bit-for-bit" in messages), messages[:400]
    if os.path.basename(path) == "frozen_clock.py":
        # The parent's clock, not the frozen one: twenty times the work is slower than the reference.
        timing = next(c for c in report["checks"] if c["id"] == "speed.relative")["details"]
        assert timing["seconds"] > timing["reference_seconds"] > 0, timing


def test_forged_answer_through_the_cli_is_a_failed_check_not_a_traceback():
    path = os.path.join(HERE, "integrity", "forge_list_frame.py")
    proc = subprocess.run([sys.executable, "-m", "grader.cli", "check", path, "--task", "sdpa", "--json",
                           "--sandbox", "none", "--seed", "1"], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    assert not report["passed"] and report["score"] == 0
    assert "answer channel" in report["error"]


class _FakeSession:
    protocol_violations: list = []


class _FakeResult:
    def __init__(self, output):
        self.output = output
        self.ctx = None


class _BuiltinCtx:
    """A context whose 'submission' is torch's own kernel: the parent's fingerprint must name it."""

    def __init__(self, task_id, honest=None):
        self.task = TASKS[task_id]
        self.inputs = InputFactory(3)
        self.session = _FakeSession()
        self.blocked, self.ops, self.calls, self.tensor_calls = set(), set(), 0, 1
        self.honest, self.samples, self.fingerprint_samples = honest, [], []
        self.fingerprint_unanswered = False
        self.attention_seen, self.passed = True, set()

    def call(self, *args, during="", **kwargs):
        return self._compute(*args, **kwargs)

    def _compute(self, *args, **kwargs):
        if self.task.id == "decoder_attention":  # the kernel on (B, 1, T, D) views, masks as booleans
            target, memory, t_len, m_len = args
            T, S = target.size(1), memory.size(1)
            t_keys = (torch.arange(T)[None, :] < t_len[:, None])[:, None, None, :]
            m_keys = (torch.arange(S)[None, :] < m_len[:, None])[:, None, None, :]
            rows = t_keys[:, 0, 0, :, None].to(target.dtype)
            sdpa = torch.nn.functional.scaled_dot_product_attention
            x = target[:, None]
            self_out = sdpa(x, x, x, attn_mask=t_keys & torch.ones(T, T, dtype=torch.bool).tril())[:, 0] * rows
            cross = sdpa(self_out[:, None], memory[:, None], memory[:, None], attn_mask=m_keys)[:, 0] * rows
            return _FakeResult((self_out, cross))
        if self.task.id == "sdpa":
            if self.honest:
                q, k, v = args
                w = torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5 +
                                  (0 if "attn_mask" not in kwargs else
                                   torch.zeros_like(kwargs["attn_mask"], dtype=q.dtype)
                                   .masked_fill(~kwargs["attn_mask"], float("-inf"))), -1)
                return _FakeResult(w @ v)
            return _FakeResult(torch.nn.functional.scaled_dot_product_attention(*args, **kwargs))
        x_q, x_kv, w_q, w_k, w_v, w_o, H = args
        out, _ = torch.nn.functional.multi_head_attention_forward(
            x_q.transpose(0, 1), x_kv.transpose(0, 1), x_kv.transpose(0, 1), x_q.size(-1), H, None, None, None,
            None, False, 0.0, w_o, None, training=False, need_weights=False, use_separate_proj_weight=True,
            q_proj_weight=w_q, k_proj_weight=w_k, v_proj_weight=w_v)
        return _FakeResult(out.transpose(0, 1))


@pytest.mark.parametrize("task_id", ["sdpa", "mha", "decoder_attention"])
def test_parent_fingerprint_names_the_builtin_kernel(task_id):
    """If the block in the child were ever undone, outputs bit-identical to torch's kernel still fail."""
    with pytest.raises(forbidden.Fail) as caught:
        forbidden.runtime_check(_BuiltinCtx(task_id))
    assert caught.value.details.get("detected") and caught.value.details.get("fingerprint") == "builtin"


def test_parent_fingerprint_passes_hand_written_attention():
    assert "no built-in attention" in forbidden.runtime_check(_BuiltinCtx("sdpa", honest=True))


def test_answers_are_checked_against_the_request():
    q = torch.zeros(2, 3, 4)
    ok = {"ok": True, "output": torch.zeros(2, 3, 4), "grads": [torch.zeros(2, 3, 4)]}
    assert answers.check_call(ok, [q, q, q], {}, [0], False)["grads"][0].shape == (2, 3, 4)
    for bad in ({"ok": True, "grads": []}, {"ok": True, "grads": [torch.zeros(1)]},
                {"ok": True, "grads": [torch.zeros(2, 3, 4, dtype=torch.int64)]},
                {"ok": "yes"}, [1, 2], {"ok": True, "output": "x"}, {"ok": True, "ops": 7},
                {"ok": False, "error": [1]}, {"ok": True, "blocked": "everything"}):
        with pytest.raises(answers.ProtocolViolation):
            answers.check_call(bad, [q, q, q], {}, [0], False)
    with pytest.raises(answers.ProtocolViolation):  # the inputs were asked back and did not come
        answers.check_call({"ok": True, "output": q}, [q, q, q], {}, [], True)


def test_wire_refuses_forged_frames_without_raising_anything_else():
    import struct
    frames = [b'{"body": [1], "tensors": []}', b'{"body": {"x": {"$t": 3}}, "tensors": []}',
              ('{"body": ' + "[" * 5000 + "]" * 5000 + ', "tensors": []}').encode(),
              b'{"body": {"$f": "1e999"}, "tensors": []}', b'{"body": {}, "tensors": [[]]}',
              b'{"body": {}, "tensors": [{"dtype": "float64", "shape": [4096, 8192]}]}']
    for header in frames:
        r, w = os.pipe()
        os.write(w, b"ATN1" + struct.pack("<I", len(header)) + header)
        os.close(w)
        with pytest.raises(wire.WireError):
            wire.read_message(r, max_bytes=1 << 20)
        os.close(r)
