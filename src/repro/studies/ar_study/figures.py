"""Figure 2: the overlap of what rational (M) and vanilla (N) evidence recall, one panel per dataset."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from repro.studies.ar_study.tables import CATEGORIES

COLORS = {"M∧N": "#4c72b0", "M∧¬N": "#55a868", "¬M∧N": "#c44e52", "¬M∧¬N": "#8c8c8c"}


def plot_overlap(overlap: pd.DataFrame, title: str = "") -> plt.Figure:
    """Horizontal bars of the four categories (percent of the evaluated items, annotated with counts); the
    paper's reported percentages, where the text gives them, as black diamonds."""
    datasets = list(dict.fromkeys(overlap["dataset"]))
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.4 * len(datasets), 3.3), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        cells = overlap[overlap["dataset"] == dataset].set_index("category").reindex(list(CATEGORIES))
        positions = range(len(cells))
        ax.barh(positions, cells["percent"], color=[COLORS[c] for c in cells.index])
        for y, (count, percent) in enumerate(zip(cells["count"], cells["percent"])):
            ax.text(percent + 1, y, f"{count} ({percent:.1f}%)", va="center", fontsize=8)
        reported = cells["paper_percent"].dropna()
        if len(reported):  # below their bar, so that they hide no count
            ys = [list(cells.index).index(c) + 0.32 for c in reported.index]
            ax.scatter(reported, ys, marker="D", s=18, color="black", zorder=3, label="paper (HotpotQA, §2.2 text)")
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.28), frameon=False)
        ax.set_yticks(list(positions), [f"{c}  ({CATEGORIES[c]})" for c in cells.index], fontsize=8)
        ax.invert_yaxis()
        ax.set(xlim=(0, 115), xlabel="% of evaluated items",
               title=f"{dataset} ({cells['role'].iloc[0]}, n = {int(cells['count'].sum())})")
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(title + "\nM: rational evidence recalls the answer; N: vanilla evidence does", fontsize=9)
    fig.tight_layout()
    return fig
