"""Pictures drawn with matplotlib as SVG: attention heatmaps, logit variance, score charts.

``matplotlib.figure.Figure`` is used directly (not pyplot), so drawing keeps no global
state and is safe in the web server's threads. Titles, axis labels and legends are the
page's language (Flask-Babel's ``gettext`` at drawing time, so a caller may draw in another
language inside ``flask_babel.force_locale``).
"""
from __future__ import annotations

import functools
import io
import json
import math

import matplotlib
from flask_babel import format_decimal, get_locale, gettext as _

matplotlib.use("Agg")
from matplotlib import font_manager  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller and crisp
matplotlib.rcParams["svg.hashsalt"] = "attn-grader"  # the same picture, the same bytes (its ids)

# Latin and Cyrillic from DejaVu, Chinese from Noto CJK (scripts/system-deps.sh installs both):
# matplotlib falls back glyph by glyph through this list when it measures the layout, and the
# SVG names the same families for the browser, which draws the text. Only installed families
# are listed (an absent one would be warned about at every drawing).
FONT_FAMILIES = ("DejaVu Sans", "Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans CJK TC",
                 "WenQuanYi Zen Hei", "Droid Sans Fallback")


def installed_font_families(wanted=FONT_FAMILIES) -> list[str]:
    present = {font.name for font in font_manager.fontManager.ttflist}
    return [family for family in wanted if family in present] + ["sans-serif"]


matplotlib.rcParams["font.family"] = installed_font_families()

PASS_COLOUR, FAIL_COLOUR, ACCENT = "#2e7d32", "#c62828", "#3559c7"
NAMED_COLOUR = "#ef9a9a"  # a failure the grader names a bug for: the lighter part of a red bar


# Drawing a picture costs 0.1-0.5 s of the web process's CPU, and the same one is asked for again
# and again: a result page in each language and on each device, the score chart on every visit to
# an assignment page. A picture is a function of its data and the language it is drawn in, so the
# last ones drawn are kept, keyed by both (a new score makes a new key; nothing goes stale).
# Measured: charts were two thirds of the web process's CPU in tests/test_browser.py (py-spy).
KEPT_PICTURES = 256  # of each kind, about 20-60 KB each


def kept(draw, size: int = KEPT_PICTURES):
    """``draw`` drawn once per data and language; later calls with the same get the same bytes.
    The data is the key, as JSON (what the pictures are drawn from: a stored report, lists of
    numbers), and is drawn from that JSON, so two calls that make one key draw one picture."""
    @functools.lru_cache(maxsize=size)
    def drawn(name: str, lang: str, data: str) -> bytes:  # the locale in force draws in ``lang``
        args, kwargs = json.loads(data)
        return draw(*args, **kwargs)

    @functools.wraps(draw)
    def picture(*args, **kwargs) -> bytes:
        return drawn(draw.__name__, str(get_locale()), json.dumps([args, kwargs], sort_keys=True, default=str))
    return picture


def _svg(fig: Figure) -> bytes:
    out = io.BytesIO()
    fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    return out.getvalue()


def _matrix(rows) -> list[list[float]]:
    """Nested lists from the grader, with None (NaN) shown as NaN."""
    return [[math.nan if v is None or isinstance(v, str) else float(v) for v in row]
            for row in rows]


NAN_COLOUR = "#d81b60"  # outside viridis, so a NaN cell cannot pass for a weight


def _integer_ticks(ax) -> None:
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


@kept
def weights_heatmaps(submission, reference=None) -> bytes:
    """The submission's attention weights beside the reference's, on one 0–1 colour scale;
    NaN cells are crossed out in a colour of their own, with a legend entry."""
    panels = [(_("your weights"), submission)] + ([(_("reference"), reference)] if reference else [])
    fig = Figure(figsize=(3.4 * len(panels) + 1.0, 3.9), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad=NAN_COLOUR)
    slice_name = _("batch 0, head 0")  # heatmap() in grader/checks/base.py: the first of each
    image, any_nan = None, False
    for i, (ax, (title, rows)) in enumerate(zip(axes, panels)):
        matrix = _matrix(rows)
        image = ax.imshow(matrix, vmin=0.0, vmax=1.0, cmap=cmap, interpolation="nearest",
                          aspect="equal")
        for r, row in enumerate(matrix):
            for c, value in enumerate(row):
                if math.isnan(value):
                    any_nan = True
                    ax.text(c, r, "×", ha="center", va="center", color="white", fontsize=8)
        ax.set_title(f"{title}\n({slice_name})", fontsize=10)
        ax.set_xlabel(_("key position"))
        if i == 0:  # one y label: the second panel's would sit on the first's picture
            ax.set_ylabel(_("query position"))
        _integer_ticks(ax)
    fig.colorbar(image, ax=list(axes), shrink=0.85, label=_("weight"))
    if any_nan:
        fig.legend(handles=[Patch(facecolor=NAN_COLOUR, label=_("× NaN (not a number)"))],
                   loc="outside lower center", frameon=False, fontsize=9)
    return _svg(fig)


@kept
def variance_plot(table: list[dict]) -> bytes:
    """Logit variance against d_k: the submission's points and the expected values."""
    rows = sorted(table, key=lambda r: r["d_k"])
    dks = [r["d_k"] for r in rows]
    yours = [r["variance"] for r in rows]
    expected = [r.get("expected", 1.0) for r in rows]
    fig = Figure(figsize=(5.2, 3.8), layout="constrained")
    ax = fig.subplots()
    if len(rows) == 1:
        # One d_k (the scale= argument check): two labelled markers, not a lone dot.
        ax.scatter([0], yours, s=60, color=FAIL_COLOUR, zorder=3)
        ax.scatter([1], expected, s=60, color=PASS_COLOUR, marker="D", zorder=3)
        for x, y in ((0, yours[0]), (1, expected[0])):
            ax.annotate(f"{y:.3g}", (x, y), textcoords="offset points", xytext=(10, 0),
                        va="center", fontsize=9)
        ax.set_xlim(-0.6, 1.8)
        ax.set_xticks([0, 1], [_("your logits"), _("expected with the scale given")])
        ax.set_xlabel(f"d_k = {dks[0]}")
    else:
        ax.plot(dks, yours, "o-", color=FAIL_COLOUR, label=_("your logits"))
        ax.plot(dks, expected, "--", color=PASS_COLOUR, label=_("expected (1/√d_k scaling)"))
        ax.set_xscale("log", base=2)
        ax.set_xticks(dks, [str(d) for d in dks])
        ax.set_xlabel("d_k")
    if max(yours) > 20 * max(expected) or min(yours) * 20 < min(expected):
        ax.set_yscale("log")
    ax.set_ylabel(_("variance of the logits"))
    ax.grid(alpha=0.3)
    if len(rows) > 1:  # one d_k: the two markers are named on the x axis, a legend would repeat them
        fig.legend(loc="outside lower center", ncols=2, frameon=False, fontsize=9)
    return _svg(fig)


@kept
def score_histogram(scores: list[float], top: float | None, title: str = "") -> bytes:
    fig = Figure(figsize=(5.2, 3.0))
    ax = fig.subplots()
    upper = top or (max(scores) if scores else 1.0) or 1.0
    bins = [upper * i / 10 for i in range(11)]
    ax.hist(scores, bins=bins, color=ACCENT, edgecolor="white")
    ax.set_xlim(0, upper)
    ax.set_xlabel(_("best score (of %(top)s)", top=format_decimal(upper)) if top else _("best score"))
    ax.set_ylabel(_("students"))
    ax.yaxis.get_major_locator().set_params(integer=True)
    if title:
        ax.set_title(title, fontsize=11)
    if not scores:
        ax.text(0.5, 0.5, _("no graded work yet"), transform=ax.transAxes, ha="center", color="#666")
        ax.set_ylim(0, 1)  # not matplotlib's empty ±0.04: no count below zero
        ax.set_yticks([0, 1])
    return _svg(fig)


@kept
def failure_bars(rates: list[dict]) -> bytes:
    """Horizontal bars: the share of students whose latest submission fails each scored check,
    split into the part a named bug explains and the rest. Reported-only checks cost nothing
    and are left out: a hint failing everywhere would be the loudest bar of the page."""
    rows = [r for r in reversed(rates) if r["failed_all"] and r.get("scored", r["max_points"])]
    fig = Figure(figsize=(7.0, 0.3 * max(len(rows), 3) + 1.2), layout="constrained")
    ax = fig.subplots()
    if not rows:
        ax.text(0.5, 0.5, _("no scored check has failed yet"), transform=ax.transAxes, ha="center",
                color="#666")
        ax.set_yticks([])  # no bars: no made-up ±0.04 scale beside the note
    labels = [r["check_id"] for r in rows]
    share = [100 / r["students"] if r["students"] else 0.0 for r in rows]
    named = [s * r.get("named_latest", 0) for s, r in zip(share, rows)]
    other = [s * (r["failed_latest"] - r.get("named_latest", 0)) for s, r in zip(share, rows)]
    ax.barh(labels, named, color=NAMED_COLOUR, label=_("a named bug explains it"))
    ax.barh(labels, other, left=named, color=FAIL_COLOUR, label=_("no named cause"))
    ax.set_xlim(0, 100)
    ax.set_xlabel(_("students whose latest submission fails it (%)"))
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(axis="x", alpha=0.3)
    if rows:
        fig.legend(loc="outside lower center", ncols=2, frameon=False, fontsize=9)
    return _svg(fig)
