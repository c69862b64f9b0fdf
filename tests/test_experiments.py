"""The chapter's claims about the 1/√d_k scale hold in the measurements, and the CLI reports them.

Everything runs from fixed seeds, so the assertions are deterministic; the bands are still wide
enough (several sampling standard deviations) that any seed passes, see
``test_variance_claim_holds_for_other_seeds``.
"""
import json
import math
import sys

import pytest
import torch
from click.testing import CliRunner

from grader.cli import main
from reference_impl import scaled_dot_product_attention
from reference_impl.experiments import (SCALES, ExperimentReport, attention_gradients,
                                        gradient_flow, score_variance, softmax_jacobian_norm,
                                        softmax_saturation)


@pytest.fixture(scope="module")
def cli_json():
    """``attn-grader experiments --json`` with the defaults, run once for the whole module."""
    result = CliRunner().invoke(main, ["experiments", "--json", "--seed", "0"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.fixture(scope="module")
def report(cli_json):
    return ExperimentReport.from_dict(cli_json)


def _by_scale(rows):
    table = {}
    for r in rows:
        table.setdefault(r.d_k, {})[r.scale] = r
    return table


def test_variance_of_dot_product_is_d_k_and_one_after_scaling(report):
    assert [r.d_k for r in report.variance] == [8, 16, 32, 64, 128, 256, 512]
    for r in report.variance:
        # ±0.15 is the grading-methodology study's band; 5 sd is the sampling band.
        assert abs(r.ratio - 1) <= min(0.15, 5 * r.ratio_sd), r
        assert abs(r.var_scaled - 1) <= min(0.15, 5 * r.ratio_sd), r
        assert abs(r.mean_unscaled) <= 5 * math.sqrt(r.d_k / r.n_pairs), r


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_variance_claim_holds_for_other_seeds(seed):
    for r in score_variance(dims=(8, 64), n_pairs=4096, seed=seed):
        assert abs(r.ratio - 1) <= 0.15


def test_softmax_saturates_without_scaling(report):
    table = _by_scale(report.saturation)
    assert sorted(table) == [16, 64, 256, 1024]
    ln_s = math.log(128)
    for d_k, rows in table.items():
        none, good, big = rows["none"], rows["1/sqrt(d_k)"], rows["1/d_k"]
        assert none.uniform_entropy == pytest.approx(ln_s)
        assert none.mean_max_weight > good.mean_max_weight > big.mean_max_weight > 1 / 128
        assert none.mean_entropy < good.mean_entropy < big.mean_entropy < ln_s
        assert none.share_max_over_0_9 > good.share_max_over_0_9 == 0.0
        # Logit std is scale·√d_k, and a softmax of unit-variance logits has entropy ≈ ln S − 1/2.
        assert none.logit_std == pytest.approx(math.sqrt(d_k), rel=0.1)
        assert good.logit_std == pytest.approx(1.0, rel=0.1)
        assert good.mean_entropy == pytest.approx(ln_s - 0.5, abs=0.1)
        assert big.mean_entropy == pytest.approx(ln_s, abs=0.05)
    # Without the scale it gets worse as d_k grows; with it, nothing depends on d_k.
    none = [table[d]["none"] for d in sorted(table)]
    assert all(a.mean_entropy > b.mean_entropy for a, b in zip(none, none[1:]))
    assert all(a.share_max_over_0_9 < b.share_max_over_0_9 for a, b in zip(none, none[1:]))
    assert none[1].mean_max_weight > 0.6 and none[1].share_max_over_0_9 > 0.25  # d_k = 64
    goods = [table[d]["1/sqrt(d_k)"].mean_entropy for d in table]
    assert max(goods) - min(goods) < 0.05


def test_gradients_vanish_through_a_saturated_softmax(report):
    table = _by_scale(report.gradients)
    for d_k, rows in table.items():
        none, good, big = rows["none"], rows["1/sqrt(d_k)"], rows["1/d_k"]
        # The gradient reaching the scores is smaller without the scale at every d_k ...
        assert none.grad_scores_mean_abs < good.grad_scores_mean_abs
        # ... because rows lock onto one key: their Jacobian, and so their gradient, is ~0.
        assert good.share_vanished == big.share_vanished == 0
        assert none.share_vanished > 0 or d_k < 64  # at d_k = 16 it is 0-1% of rows
        # Dividing by d_k keeps the softmax soft but shrinks ∂L/∂q by a further ~1/√d_k.
        assert big.grad_q_mean_abs < good.grad_q_mean_abs / 2
    none = [table[d]["none"] for d in sorted(table)]
    assert all(a.share_vanished < b.share_vanished for a, b in zip(none, none[1:]))
    assert all(a.grad_scores_mean_abs > b.grad_scores_mean_abs for a, b in zip(none, none[1:]))
    big_dk = table[1024]
    assert big_dk["none"].share_vanished > 0.4
    assert big_dk["none"].jacobian_norm_median < big_dk["1/sqrt(d_k)"].jacobian_norm_median / 10
    assert big_dk["none"].grad_q_median_abs < big_dk["1/sqrt(d_k)"].grad_q_median_abs / 10


def test_unscaled_query_gradients_are_heavy_tailed(report):
    # The mean |∂L/∂q| is *larger* without scaling: a few rows with near-tied keys get huge
    # gradients while most get none. Mean/median exposes the tail.
    for d_k, rows in _by_scale(report.gradients).items():
        none, good = rows["none"], rows["1/sqrt(d_k)"]
        assert none.grad_q_mean_abs > good.grad_q_mean_abs
        tail = lambda r: r.grad_q_mean_abs / r.grad_q_median_abs
        if d_k >= 64:  # at d_k = 16 the logits (std 4) are not yet peaked enough
            assert tail(none) > 1.5 * tail(good)


def test_jacobian_norm_matches_the_explicit_matrix():
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(6, 9, generator=g, dtype=torch.float64) * 3, -1)
    explicit = torch.linalg.matrix_norm(torch.diag_embed(p) - p[:, :, None] * p[:, None, :])
    torch.testing.assert_close(softmax_jacobian_norm(p), explicit)
    one_hot = torch.zeros(2, 5, dtype=torch.float64)
    one_hot[:, 1] = 1
    assert torch.equal(softmax_jacobian_norm(one_hot), torch.zeros(2, dtype=torch.float64))
    uniform = torch.full((1, 4), 0.25, dtype=torch.float64)
    # ‖diag(p) − ppᵀ‖_F for p = 1/S is √((S − 1)/S²)
    assert softmax_jacobian_norm(uniform).item() == pytest.approx(math.sqrt(3) / 4)


def test_hand_written_gradients_match_autograd_through_the_reference():
    d_k, S, L = 16, 8, 5
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, L, d_k, generator=g, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(2, S, d_k, generator=g, dtype=torch.float64) for _ in range(2))
    upstream = torch.randn(2, L, d_k, generator=g, dtype=torch.float64)
    for scale in (1.0, 0.25, 1 / 16):
        scores = (q.detach() @ k.transpose(-2, -1) * scale).requires_grad_()
        (torch.softmax(scores, -1) @ v).backward(upstream)
        (grad_q,) = torch.autograd.grad(
            scaled_dot_product_attention(q, k, v, scale=scale), q, upstream)
        p, grad_scores, ours_q = attention_gradients(q.detach(), k, v, upstream, scale)
        torch.testing.assert_close(p, torch.softmax(scores.detach(), -1))
        torch.testing.assert_close(grad_scores, scores.grad)
        torch.testing.assert_close(ours_q, grad_q)


def test_runs_are_reproducible_from_the_seed():
    a = softmax_saturation(dims=(32,), seq_len=16, batch=2, queries=8, seed=11)
    b = softmax_saturation(dims=(32,), seq_len=16, batch=2, queries=8, seed=11)
    c = softmax_saturation(dims=(32,), seq_len=16, batch=2, queries=8, seed=12)
    assert a == b and a != c
    assert gradient_flow(dims=(8,), seq_len=4, batch=1, queries=4, seed=3) == \
        gradient_flow(dims=(8,), seq_len=4, batch=1, queries=4, seed=3)


@pytest.mark.parametrize("call, message", [
    (lambda: score_variance(dims=(0,)), "positive integers"),
    (lambda: score_variance(dims=()), "positive integers"),
    (lambda: score_variance(n_pairs=1), "n_pairs"),
    (lambda: softmax_saturation(seq_len=1), "seq_len"),
    (lambda: gradient_flow(dims=(8.0,)), "positive integers"),
])
def test_bad_arguments_are_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_cli_json_parses_and_matches_the_functions(cli_json, report):
    assert report.to_dict() == cli_json
    assert cli_json["seed"] == 0 and cli_json["device"] == "cpu"
    assert cli_json["dtype"] == "float64" and cli_json["seq_len"] == 128
    assert {r["scale"] for r in cli_json["saturation"]} == set(SCALES)
    # The first d_k draws the first samples, so a run of it alone gives the same rows.
    assert report.saturation[:3] == softmax_saturation(dims=(16,), seed=0)
    assert report.gradients[:3] == gradient_flow(dims=(16,), seed=0)


def test_cli_prints_tables_and_respects_seq_len():
    result = CliRunner().invoke(main, ["experiments", "--seq-len", "16", "--seed", "4",
                                       "--dims", "8,32"])
    assert result.exit_code == 0, result.output
    assert "Var(q·k)" in result.output and "ln S = 2.77" in result.output
    assert "1/√d_k" in result.output and "|∂L/∂q|" in result.output


def test_cli_dims_choose_the_softmax_experiments():
    result = CliRunner().invoke(main, ["experiments", "--json", "--dims", "32,8", "--seq-len", "4"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [r["d_k"] for r in data["saturation"]] == [32, 32, 32, 8, 8, 8]
    assert {r["d_k"] for r in data["gradients"]} == {8, 32}
    assert len(data["variance"]) == 7


@pytest.mark.parametrize("args, message", [
    (["--seq-len", "1"], "1 is not in the range"),
    (["--device", "tpu"], "'tpu' is not one of"),
    (["--seed", "x"], "'x' is not a valid integer"),
    (["--dims", "16,x"], "comma-separated integers"),
    (["--dims", "0,16"], "between 1 and 4096"),
])
def test_cli_rejects_bad_options(args, message):
    result = CliRunner().invoke(main, ["experiments", *args])
    assert result.exit_code == 2 and message in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is present")
def test_cli_says_cuda_is_absent():
    result = CliRunner().invoke(main, ["experiments", "--device", "cuda"])
    assert result.exit_code == 1
    assert "no CUDA device is available" in result.output


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_gives_the_cpu_numbers():
    cpu = softmax_saturation(dims=(64,), seed=0, device="cpu")
    cuda = softmax_saturation(dims=(64,), seed=0, device="cuda")
    for a, b in zip(cpu, cuda):
        assert b.mean_entropy == pytest.approx(a.mean_entropy, rel=1e-9)
        assert b.share_max_over_0_9 == a.share_max_over_0_9


# --- benchmarks/gpu_check.py: its checks run on the CPU here (CUDA steps say they are skipped) ---

def _gpu_check_module():
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks", "gpu_check.py")
    spec = importlib.util.spec_from_file_location("gpu_check_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it is executed
    spec.loader.exec_module(module)
    return module


def test_gpu_check_passes_on_this_machine_and_writes_json(tmp_path, capsys):
    gc = _gpu_check_module()
    steps = "environment,accuracy,fully-masked,experiments"
    assert gc.main(["--quick", "--steps", steps, "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert report["passed"] and report["counts"]["fail"] == 0
    accuracy = [c for c in report["checks"] if c["step"] == "accuracy"]
    assert len(accuracy) == 6 * 3 * 4  # cases x dtypes x (out, dq, dk, dv)
    assert {c["data"]["dtype"] for c in accuracy} == {"fp32", "fp16", "bf16"}
    if not torch.cuda.is_available():
        assert "CUDA absent" in capsys.readouterr().out


def test_gpu_check_fails_on_a_wrong_reference(tmp_path, monkeypatch):
    gc = _gpu_check_module()
    right = gc.scaled_dot_product_attention
    monkeypatch.setattr(gc, "scaled_dot_product_attention",
                        lambda q, k, v, **kw: right(q, k, v, scale=1.0, **kw))  # 1/√d_k dropped
    assert gc.main(["--quick", "--steps", "accuracy", "--out", str(tmp_path)]) == 1
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    failed = {c["name"] for c in report["checks"] if c["status"] == "fail"}
    assert "no mask out" in failed and "causal dq" in failed
