"""``attn-grader experiments``: the chapter's claims about the 1/√d_k scale, measured."""
from __future__ import annotations

import json

import click


SCALE_LABELS = {"none": "none", "1/sqrt(d_k)": "1/√d_k", "1/d_k": "1/d_k"}


def _fmt(x: float) -> str:
    """Three significant digits (Python switches to 1.23e-05 below 1e-4)."""
    return f"{x:.3g}"


def _print_tables(report) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    def table(title: str, columns: tuple[str, ...], min_width: int | None = None) -> Table:
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=title)
        for i, col in enumerate(columns):  # the first two columns are labels
            t.add_column(col, justify="right", min_width=None if i < 2 else min_width)
        return t

    console = Console()
    console.print(f"seed {report.seed}, device {report.device}, {report.dtype}; "
                  "q, k (and v) have i.i.d. N(0, 1) components")

    var = table("1. Var(q·k) grows like d_k; dividing by √d_k brings it back to 1",
                ("d_k", "pairs", "Var(q·k)", "Var(q·k)/d_k", "± 1 sd", "Var(q·k/√d_k)"))
    for r in report.variance:
        var.add_row(str(r.d_k), str(r.n_pairs), f"{r.var_unscaled:.2f}", f"{r.ratio:.3f}",
                    f"{r.ratio_sd:.3f}", f"{r.var_scaled:.3f}")
    console.print(var)

    first = report.saturation[0]
    sat = table(f"2. Softmax saturation over S = {first.seq_len} keys (uniform entropy "
                f"ln S = {first.uniform_entropy:.2f} nats), {first.rows} query rows each",
                ("d_k", "scale", "logit std", "mean max weight", "mean entropy", "max > 0.9"))
    for r in report.saturation:
        sat.add_row(str(r.d_k), SCALE_LABELS[r.scale], f"{r.logit_std:.3g}",
                    f"{r.mean_max_weight:.3f}", f"{r.mean_entropy:.3f}",
                    f"{r.share_max_over_0_9:.1%}", end_section=r.scale == "1/d_k")
    console.print(sat)

    grad = table("3. Gradient through the softmax, J = diag(p) − ppᵀ per row; "
                 "|∂L/∂s| and |∂L/∂q| for a random upstream gradient",
                 ("d_k", "scale", "‖J‖ mean", "‖J‖ median", "‖J‖<1e-3", "|∂L/∂s| mean",
                  "|∂L/∂q| mean", "|∂L/∂q| median"), min_width=8)
    for r in report.gradients:
        grad.add_row(str(r.d_k), SCALE_LABELS[r.scale], _fmt(r.jacobian_norm_mean),
                     _fmt(r.jacobian_norm_median), f"{r.share_vanished:.1%}",
                     _fmt(r.grad_scores_mean_abs), _fmt(r.grad_q_mean_abs),
                     _fmt(r.grad_q_median_abs), end_section=r.scale == "1/d_k")
    console.print(grad)


MAX_DIM = 4096


def _parse_dims(ctx, param, value: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(part) for part in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers like 16,64,256, got {value!r}")
    if any(not 1 <= d <= MAX_DIM for d in dims):
        raise click.BadParameter(f"each d_k must be between 1 and {MAX_DIM}, got {value!r}")
    return dims


@click.command("experiments")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="Where to run; the samples are drawn on the CPU either way, so a seed gives "
                   "the same data on both.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random samples.")
@click.option("--seq-len", type=click.IntRange(2, 4096), default=128, show_default=True,
              help="Number of keys S each query attends over (experiments 2 and 3).")
@click.option("--dims", default="16,64,256,1024", show_default=True, callback=_parse_dims,
              help="Comma-separated d_k values for experiments 2 and 3.")
@click.option("--json", "as_json", is_flag=True, help="Print the measurements as JSON.")
def experiments(device: str, seed: int, seq_len: int, dims: tuple[int, ...],
                as_json: bool) -> None:
    """Measure the chapter's claims: Var(q·k) = d_k, softmax saturation and vanishing
    gradients without the 1/√d_k scale, on random N(0, 1) queries and keys (float64)."""
    from .experiments import run_all

    try:
        report = run_all(seed=seed, device=device, seq_len=seq_len, dims=dims)
    except RuntimeError as exc:  # e.g. CUDA asked for on a machine without it
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        _print_tables(report)
