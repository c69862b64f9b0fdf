"""Pictures drawn with matplotlib as SVG: attention heatmaps, logit variance, score charts.

``matplotlib.figure.Figure`` is used directly (not pyplot), so drawing keeps no global
state and is safe in the web server's threads.
"""
from __future__ import annotations

import io
import math

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller and crisp
matplotlib.rcParams["font.family"] = "sans-serif"

PASS_COLOUR, FAIL_COLOUR, ACCENT = "#2e7d32", "#c62828", "#3559c7"


def _svg(fig: Figure) -> bytes:
    out = io.BytesIO()
    fig.savefig(out, format="svg", bbox_inches="tight")
    return out.getvalue()


def _matrix(rows) -> list[list[float]]:
    """Nested lists from the grader, with None (NaN) shown as NaN."""
    return [[math.nan if v is None or isinstance(v, str) else float(v) for v in row]
            for row in rows]


def weights_heatmaps(submission, reference=None) -> bytes:
    """The submission's attention weights beside the reference's, on one 0–1 colour scale."""
    panels = [("your weights", submission)] + ([("reference", reference)] if reference else [])
    fig = Figure(figsize=(3.3 * len(panels) + 0.8, 3.4))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    image = None
    for ax, (title, rows) in zip(axes, panels):
        image = ax.imshow(_matrix(rows), vmin=0.0, vmax=1.0, cmap="viridis",
                          interpolation="nearest", aspect="equal")
        ax.set_title(title, fontsize=11)
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
    fig.colorbar(image, ax=list(axes), shrink=0.85, label="weight")
    return _svg(fig)


def variance_plot(table: list[dict]) -> bytes:
    """Logit variance against d_k: the submission's points and the expected 1."""
    rows = sorted(table, key=lambda r: r["d_k"])
    dks = [r["d_k"] for r in rows]
    fig = Figure(figsize=(5.2, 3.4))
    ax = fig.subplots()
    ax.plot(dks, [r["variance"] for r in rows], "o-", color=FAIL_COLOUR, label="your logits")
    ax.plot(dks, [r.get("expected", 1.0) for r in rows], "--", color=PASS_COLOUR,
            label="expected (1/√d_k scaling)")
    ax.set_xscale("log", base=2)
    if max(r["variance"] for r in rows) > 20 * max(r.get("expected", 1.0) for r in rows):
        ax.set_yscale("log")
    ax.set_xticks(dks, [str(d) for d in dks])
    ax.set_xlabel("d_k")
    ax.set_ylabel("variance of the logits")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False)
    return _svg(fig)


def score_histogram(scores: list[float], top: float | None, title: str = "") -> bytes:
    fig = Figure(figsize=(5.2, 3.0))
    ax = fig.subplots()
    upper = top or (max(scores) if scores else 1.0) or 1.0
    bins = [upper * i / 10 for i in range(11)]
    ax.hist(scores, bins=bins, color=ACCENT, edgecolor="white")
    ax.set_xlim(0, upper)
    ax.set_xlabel("best score" + (f" (of {upper:g})" if top else ""))
    ax.set_ylabel("students")
    ax.yaxis.get_major_locator().set_params(integer=True)
    if title:
        ax.set_title(title, fontsize=11)
    if not scores:
        ax.text(0.5, 0.5, "no graded work yet", transform=ax.transAxes, ha="center", color="#666")
    return _svg(fig)


def failure_bars(rates: list[dict]) -> bytes:
    """Horizontal bars: the share of students whose latest submission fails each check."""
    rows = [r for r in reversed(rates) if r["failed_all"]]
    fig = Figure(figsize=(7.0, 0.3 * max(len(rows), 3) + 0.9))
    ax = fig.subplots()
    if not rows:
        ax.text(0.5, 0.5, "no check has failed yet", transform=ax.transAxes, ha="center",
                color="#666")
    ax.barh([r["check_id"] for r in rows], [100 * r["latest_rate"] for r in rows],
            color=FAIL_COLOUR)
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of students whose latest submission fails it")
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig)
