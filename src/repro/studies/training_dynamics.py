"""Training curves: Figure 4 (answer rewards of o_f, o_r, o_e and lengths of reason/extract/answer over
steps) and the first-versus-last-steps summary of a run.

Rewards exist only on steps that generated a batch (with steps_per_generation > 1 the other steps reuse
it), so every curve is drawn over the steps where its column is logged. Curves are smoothed with a
centred rolling mean over `smooth` logged points (the paper does not say how its curves were smoothed, #38), and
drawn with a band: the rolling mean ± 1.96 standard errors of the window's values (`rolling_band`), a pointwise 95%
interval of the window mean that treats the window's steps as independent draws, cut to the quantity's bounds (F1
rewards in [0, 1], lengths >= 0): the mean cannot lie outside them, so the cut band covers it as often.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from repro.reporting import plots

ANSWER_CURVES = {"f1_full": "$o_f$ (full context)", "f1_rationale": "$o_r$ (rationale, evidence masked)",
                 "f1_evidence": "$o_e$ (evidence only)"}
LENGTH_CURVES = {"len_reason": "reason $r$", "len_extract": "extract $e$", "len_answer": "answer $o_f$"}
REWARD_BOUNDS, LENGTH_BOUNDS = (0.0, 1.0), (0.0, None)
SUMMARY_COLUMNS = ("reward_final", "reward_format", "f1_full", "f1_rationale", "f1_evidence",
                   "reward_length_rationale", "reward_length_evidence", "len_reason", "len_extract", "len_answer",
                   "kl", "clip_frac", "std_clip_frac")


def first_last(log: pd.DataFrame, columns: Sequence[str] = SUMMARY_COLUMNS, window: int = 3) -> pd.DataFrame:
    """Mean of each column over its first and last `window` logged values, and the change."""
    rows = []
    for column in columns:
        values = log[column].dropna() if column in log else pd.Series(dtype=float)
        if values.empty:
            continue
        first, last = values.iloc[:window], values.iloc[-window:]
        rows.append({"metric": column, "first_steps": f"{first.index[0]}-{first.index[-1]}", "first": first.mean(),
                     "last_steps": f"{last.index[0]}-{last.index[-1]}", "last": last.mean(),
                     "change": last.mean() - first.mean()})
    return pd.DataFrame(rows)


def curve_headline(table: pd.DataFrame, metric: str) -> dict:
    """A curve's headline line (`plots.compare`): `metric`'s mean over the last logged steps of `first_last`'s
    `table` against its mean over the first ones; null values where the run logged none."""
    rows = table[table["metric"] == metric] if "metric" in table else table
    values = {"last steps": rows["last"].iloc[0], "first steps": rows["first"].iloc[0]} if len(rows) else {}
    return plots.compare(values, metric, of="last steps", vs="first steps")


def rolling_band(values: pd.Series, window: int, bounds: tuple[float | None, float | None] = (None, None)
                 ) -> pd.DataFrame:
    """Centred rolling mean of `values` over `window` points and its band, mean ± 1.96·sd/√n of the points in the
    window (n < window at the ends; no band where a window holds a single point), clipped to `bounds` (low, high;
    None: unbounded), the range the quantity cannot leave."""
    rolling = values.rolling(window, center=True, min_periods=1)
    mean, half = rolling.mean(), 1.96 * rolling.std() / np.sqrt(rolling.count())
    return pd.DataFrame({"mean": mean, "low": (mean - half).clip(*bounds), "high": (mean + half).clip(*bounds)})


def _panel(ax, log: pd.DataFrame, curves: dict[str, str], smooth: int, ylabel: str,
           bounds: tuple[float | None, float | None]) -> None:
    for column, label in curves.items():
        values = log[column].dropna() if column in log else pd.Series(dtype=float)
        if values.empty:
            continue  # an answer outside the trained subset is never generated
        band = rolling_band(values, smooth, bounds)
        (line,) = ax.plot(values.index, band["mean"], label=label)
        ax.fill_between(values.index, band["low"], band["high"], color=line.get_color(), alpha=0.15, linewidth=0)
        ax.plot(values.index, values, color=line.get_color(), alpha=0.25, linewidth=0.8)
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    ax.legend(frameon=False)


def training_dynamics_data(log: pd.DataFrame, unit: str = "tokens") -> pd.DataFrame:
    """Figure 4's logged values, tidy (step, panel, series, value) for DVC's plots: the answer rewards and the lengths
    of `plot_training_dynamics`, unsmoothed, over the steps where each is logged."""
    panels = {"(a) answer reward (F1)": ANSWER_CURVES, f"(b) mean length ({unit})": LENGTH_CURVES}
    frames = [log[column].dropna().rename("value").rename_axis("step").reset_index()
              .assign(panel=panel, series=label.replace("$", ""))
              for panel, curves in panels.items() for column, label in curves.items() if column in log]
    columns = ["step", "panel", "series", "value"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def plot_training_dynamics(log: pd.DataFrame, smooth: int = 5, unit: str = "tokens",
                           title: str | None = None) -> plt.Figure:
    """Figure 4: (a) answer rewards (F1) of o_f, o_r, o_e; (b) lengths of the reason, extract and answer
    parts of the rollout. Faint lines are the logged values, solid lines their rolling mean with its 95% band, kept
    within [0, 1] for the rewards and above 0 for the lengths."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    _panel(left, log, ANSWER_CURVES, smooth, "answer reward (F1)", REWARD_BOUNDS)
    left.set_title("(a) answer rewards")
    _panel(right, log, LENGTH_CURVES, smooth, f"mean length ({unit})", LENGTH_BOUNDS)
    right.set_title("(b) response lengths")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
