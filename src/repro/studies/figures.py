"""Plots of Table 2 (scores and compression per method and dataset; also Tables 9-10) and its reading check,
Table 3 (the answer-reward ablation), Table 4 (latency and evidence length), Figure 5 (noise robustness) and the
reward-design study (differences from EviOmni's reward with their intervals)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns


def plot_main_comparison(summary: pd.DataFrame, title: str = "") -> plt.Figure:
    """EM, F1 (×100) and CR (mean per item, log scale) of each method, one bar group per dataset."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, metric in zip(axes, ("EM", "F1", "CR")):
        sns.barplot(data=summary, x="dataset", y=metric, hue="method", ax=ax)
        ax.set(xlabel="", ylabel=metric if metric != "CR" else "CR (×, log scale)", title=metric)
        if metric == "CR":
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
        if ax is not axes[-1]:
            ax.get_legend().remove()
    axes[-1].legend(title="method", fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def _nothing_to_plot(note: str, title: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(5, 1.6))
    ax.text(0.5, 0.5, note, ha="center", va="center")
    ax.set_axis_off()
    fig.suptitle(title)
    return fig


def plot_latency(ours: pd.DataFrame, paper: pd.DataFrame | None = None, title: str = "") -> plt.Figure:
    """Seconds per query of each method per dataset (ours, and the paper's A800 numbers in their own panel:
    the hardware differs, so only the order of the methods is comparable) and our evidence length ± std; a note alone
    when this run timed nothing (not requested)."""
    if ours.empty:
        return _nothing_to_plot("Table 4: not requested by this profile", title)
    panels = 3 if paper is not None else 2
    fig, axes = plt.subplots(1, panels, figsize=(4.3 * panels, 3.6))
    sns.barplot(data=ours, x="dataset", y="seconds per query", hue="method", ax=axes[0])
    axes[0].set(title="this run", xlabel="")
    lengths = ours.set_index(["dataset", "method"])[["evidence tokens mean", "evidence tokens std"]].unstack("method")
    lengths["evidence tokens mean"].plot.bar(yerr=lengths["evidence tokens std"], ax=axes[1], capsize=3, rot=0)
    axes[1].set(title="evidence length (mean ± std)", xlabel="", ylabel="tokens")
    if paper is not None:
        sns.barplot(data=paper, x="dataset", y="value", hue="method", ax=axes[2])
        axes[2].set(title="paper (1.5B, A800)", xlabel="", ylabel="seconds per query")
    for ax in axes:
        ax.grid(axis="y", alpha=0.3)
        ax.legend(title="method", fontsize=7, title_fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_ablation(table: pd.DataFrame, title: str = "") -> plt.Figure:
    """Table 3 as bars: the Average EM of each answer subset, one panel per source (this run, the paper), each
    subset's bar in the same colour, so the ranking of the subsets can be compared across panels."""
    sources = list(dict.fromkeys(table["source"]))
    fig, axes = plt.subplots(1, len(sources), figsize=(4.6 * len(sources), 3.8), squeeze=False)
    palette = dict(zip(dict.fromkeys(table["answers"]), sns.color_palette("colorblind")))
    for ax, source in zip(axes[0], sources):
        rows = table[table["source"] == source]
        sns.barplot(data=rows, x="answers", y="Average", hue="answers", palette=palette, ax=ax, legend=False)
        ax.set(title=source, xlabel="answers averaged into R^ans", ylabel="average EM")
        low = max(0.0, rows["Average"].min() - 2)  # the differences are a few points: zoom in
        ax.set_ylim(low, max(low + 1, rows["Average"].max() + 1))
        ax.tick_params(axis="x", labelrotation=35, labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_noise_robustness(summary: pd.DataFrame, title: str = "") -> plt.Figure:
    """Figure 5: EM and F1 (×100) of each method against the number of irrelevant passages added, and the EM drop
    from the noise-free level (the paper's y-axis is unlabelled, D57); one row of panels per dataset; a note alone
    when nothing was evaluated (not requested)."""
    if summary.empty:
        return _nothing_to_plot("Figure 5: not requested by this profile", title)
    datasets = list(dict.fromkeys(summary["dataset"]))
    fig, axes = plt.subplots(len(datasets), 3, figsize=(13, 3.4 * len(datasets)), squeeze=False)
    for row, dataset in zip(axes, datasets):
        data = summary[summary["dataset"] == dataset]
        noise_free = data[data["noise"] == data["noise"].min()].set_index("method")["EM"]
        data = data.assign(**{"EM drop": data["method"].map(noise_free) - data["EM"]})
        for ax, metric in zip(row, ("EM", "F1", "EM drop")):
            sns.lineplot(data=data, x="noise", y=metric, hue="method", marker="o", ax=ax)
            ax.set(title=f"{dataset}: {metric}", xlabel="irrelevant passages added",
                   xticks=sorted(data["noise"].unique()))
            ax.grid(alpha=0.3)
            if ax is not row[-1]:
                ax.get_legend().remove()
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_reading_check(summary: pd.DataFrame, title: str = "") -> plt.Figure:
    """EM and F1 (×100) of Zero and Full on the questions whose passages hold an answer, one bar group per dataset."""
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    for ax, metric in zip(axes, ("EM", "F1")):
        sns.barplot(data=summary, x="dataset", y=metric, hue="method", ax=ax)
        ax.set(xlabel="", ylabel=metric, title=metric)
        ax.grid(axis="y", alpha=0.3)
    axes[0].get_legend().remove()
    fig.suptitle(title)
    fig.tight_layout()
    return fig


DESIGN_METRICS = {"em": "EM", "f1": "F1", "ar_evidence": "evidence AR", "nli_support": "NLI support"}
# the rows of repro.reporting.stats.compare_per_item with an interval
INTERVAL_TESTS = ("McNemar (exact)", "paired bootstrap")


def plot_reward_designs(tests: pd.DataFrame, title: str = "") -> plt.Figure:
    """Each design's difference from the reference design in points with its 95% interval (the rows of
    repro.studies.reward_designs.compare_designs that carry one: exact McNemar's for the 0/1 metrics, a paired
    bootstrap's for F1), one panel per metric, one colour per dataset; the dotted line is no difference."""
    intervals = tests[tests["test"].isin(INTERVAL_TESTS)]
    metrics = [m for m in DESIGN_METRICS if m in set(intervals["metric"])]
    designs, datasets = list(dict.fromkeys(intervals["design"])), list(dict.fromkeys(intervals["dataset"]))
    fig, axes = plt.subplots(1, max(len(metrics), 1), figsize=(3.3 * max(len(metrics), 1), 0.45 * len(designs) + 1.9),
                             sharey=True, squeeze=False)
    if intervals.empty:
        axes[0][0].text(0.5, 0.5, "no design to compare with the reference", ha="center", va="center")
        axes[0][0].set_axis_off()
    palette = dict(zip(datasets, sns.color_palette("colorblind")))
    offsets = np.linspace(-0.2, 0.2, len(datasets)) if len(datasets) > 1 else [0.0]
    for ax, metric in zip(axes[0], metrics):
        for offset, dataset in zip(offsets, datasets):
            rows = intervals[(intervals["metric"] == metric) & (intervals["dataset"] == dataset)]
            errors = np.clip([rows["effect"] - rows["ci_low"], rows["ci_high"] - rows["effect"]], 0, None)
            ax.errorbar(rows["effect"], [designs.index(d) + offset for d in rows["design"]], xerr=errors, fmt="o",
                        capsize=3, color=palette[dataset], label=dataset)
        ax.axvline(0, color="grey", ls=":")
        ax.set(title=DESIGN_METRICS[metric], xlabel=f"minus {intervals['reference'].iloc[0]} (points)")
        ax.grid(axis="x", alpha=0.3)
    if metrics:
        axes[0][0].set_yticks(range(len(designs)), designs)
        axes[0][0].invert_yaxis()
        axes[0][-1].legend(title="dataset", fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    fig.suptitle(title)
    fig.tight_layout()
    return fig
