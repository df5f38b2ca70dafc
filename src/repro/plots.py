"""Figures and tables that people look at: writers (csv + markdown, png + pdf, atomically) and plots.

    >>> save_table(frame, out_dir, "table2_sign_tests")      # table2_sign_tests.csv and .md
    >>> save_figure(fig, out_dir, "figure7_length_rewards")  # .png and .pdf
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from repro import rewards
from repro.io import atomic_path, write_text


def save_table(frame: pd.DataFrame, out_dir: str | Path, name: str, float_format: str = "%.4g") -> list[Path]:
    """Write `frame` as <name>.csv and <name>.md (a pipe table) into `out_dir`; return both paths."""
    out_dir = Path(out_dir)
    csv_path, md_path = out_dir / f"{name}.csv", out_dir / f"{name}.md"
    write_text(csv_path, frame.to_csv(index=False, float_format=float_format))
    write_text(md_path, frame.to_markdown(index=False, floatfmt=float_format.lstrip("%")) + "\n")
    return [csv_path, md_path]


def save_figure(fig: plt.Figure, out_dir: str | Path, name: str, dpi: int = 150) -> list[Path]:
    """Write `fig` as <name>.png and <name>.pdf into `out_dir`; return both paths."""
    paths = []
    for suffix in ("png", "pdf"):
        path = Path(out_dir) / f"{name}.{suffix}"
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=suffix, dpi=dpi, bbox_inches="tight")
        paths.append(path)
    return paths


def length_reward_curves(
    taus: Sequence[float] = rewards.TAU_GRID,
    gammas: Sequence[float] = rewards.GAMMA_GRID,
    x_rationale: Sequence[float] = tuple(np.linspace(-3, 3, 241)),
    x_evidence: Sequence[float] = tuple(np.linspace(0, 1, 201)),
) -> pd.DataFrame:
    """Figure 7's basic functions, computed through the reward functions themselves (tidy rows: panel, x,
    parameter, value, reward). Panel (a): R_r^len against x = L_r/L_e − 1 (x ≥ 0) or 1 − L_e/L_r (x < 0),
    i.e. σ(x/τ). Panel (b): R_e^len against x = 1 − L_e/L_P in [0, 1] with ω = 1 (no threshold), i.e. x^γ."""
    if any(x < 0 or x > 1 for x in x_evidence):
        raise ValueError("x_evidence = 1 − L_e/L_P must lie in [0, 1]")
    rows = []
    L_e = L_P = 1.0
    for tau in taus:
        for x in x_rationale:
            L_r = L_e * (1 + x) if x >= 0 else L_e / (1 - x)  # inverts the two branches of Eq. 10
            rows.append(("a", float(x), "tau", tau, rewards.rationale_length_reward(L_r, L_e, tau)))
    for gamma in gammas:
        for x in x_evidence:
            rows.append(("b", float(x), "gamma", gamma, rewards.evidence_length_reward(L_P * (1 - x), L_P, gamma, 1.0)))
    return pd.DataFrame(rows, columns=["panel", "x", "parameter", "value", "reward"])


def plot_length_rewards(curves: pd.DataFrame, chosen: dict[str, float] | None = None) -> plt.Figure:
    """Figure 7: (a) the rationale length reward for each τ, (b) the evidence length reward for each γ.
    `chosen` ({"tau": …, "gamma": …}) draws the profile's values with a thicker line."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    titles = {"a": "(a) rationale: $\\sigma(x/\\tau)$", "b": "(b) evidence: $x^{\\gamma}$"}
    xlabels = {"a": "$x = L_r/L_e - 1$ (x ≥ 0) or $1 - L_e/L_r$ (x < 0)", "b": "$x = 1 - L_e/L_P$"}
    for ax, panel in zip(axes, ("a", "b")):
        data = curves[curves["panel"] == panel]
        parameter = data["parameter"].iloc[0]
        symbol = {"tau": "τ", "gamma": "γ"}[parameter]
        data = data.assign(**{symbol: data["value"].map(lambda v: f"{v:g}")})
        sns.lineplot(data=data, x="x", y="reward", hue=symbol, ax=ax, palette="viridis")
        if chosen and parameter in chosen:
            picked = data[np.isclose(data["value"], chosen[parameter])]
            ax.plot(picked["x"], picked["reward"], color="black", lw=2.5, ls="--", label=f"profile {symbol}")
            ax.legend(title=symbol)
        ax.set(title=titles[panel], xlabel=xlabels[panel], ylabel="length reward", ylim=(-0.02, 1.02))
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_cell_comparison(table: pd.DataFrame, target: str, title: str) -> plt.Figure:
    """Wins / ties / losses of `target` against each baseline across table cells (the output of
    repro.stats.compare_across_cells), annotated with the Holm-corrected sign-test p-value."""
    counts = table.set_index("baseline")[["wins", "ties", "losses"]]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(counts) + 1.5))
    counts.plot.barh(stacked=True, ax=ax, color=sns.color_palette("RdYlGn_r", 3), width=0.7)
    for i, (_, row) in enumerate(table.iterrows()):
        label = f"p_Holm = {row['sign_p_holm']:.3g}"
        ax.text(row["n_cells"] + 0.02 * counts.sum(axis=1).max(), i, label, va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set(xlabel=f"cells ({target} vs baseline)", ylabel="", title=title)
    ax.set_xlim(0, counts.sum(axis=1).max() * 1.45)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 1.0 / (len(counts) + 3)), ncol=3, fontsize=8)
    fig.tight_layout()
    return fig
