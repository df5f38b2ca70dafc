"""Figures and tables that people look at: writers (csv + markdown, png + pdf, atomically) and plots.

    >>> save_table(frame, out_dir, "table2_sign_tests")      # table2_sign_tests.csv and .md
    >>> save_figure(fig, out_dir, "figure7_length_rewards")  # .png and .pdf

and what DVC compares across profiles and experiments (D134), at paths shared by every profile:

    >>> save_metrics(headline_line(summary, "method", "EM", of="EviOmni"),  # metrics/main_comparison.json
    ...              headline(summary, ["method"], ["EM", "CR"]), "main_comparison")  # and metrics/full/
    >>> save_plot_data(curve, "figure5_noise_robustness", x="noise", y="EM", series="method", panel="dataset")

`dvc plots show` draws them into a page of the template `.dvc/plots/offline.html` (`.dvc/config`), which carries Vega,
Vega-Lite and vega-embed inline so that the page renders with no network (D200): `python -m repro.reporting.plots`
writes it (`make setup` does).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from repro.formulas import rewards
from repro.io import atomic_path, write_json, write_text

METRICS_DIR = Path("metrics")  # metrics/<stage>.json: a study's headline line (dvc.yaml `metrics:`, D241)
FULL_METRICS_DIR = METRICS_DIR / "full"  # metrics/full/<stage>.json: its headline numbers (an `outs:`)
HEADLINE_KEYS = ("metric", "of", "value", "vs", "vs value")  # every headline line's keys: one short table
NAME_WIDTH = 18  # the longest row name a headline line shows ("EviOmni (released)")
PLOT_DATA_DIR = Path("plots")  # plots/<figure>.csv: a figure's data (dvc.yaml `plots:`, template `series`)
PLOTS_TEMPLATE = Path(".dvc/plots/offline.html")  # `dvc plots show`'s page (.dvc/config `plots.html_template`)


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


def metric_value(value) -> float | int | None:
    """A JSON number for DVC: NaN (a metric with no item to average) becomes null."""
    if value is None or pd.isna(value):
        return None
    return int(value) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else float(value)


def metrics_tree(frame: pd.DataFrame, keys: Sequence[str], values: Sequence[str]) -> dict:
    """{row[keys[0]]: {row[keys[1]]: ... {value: number}}} for every row of `frame`, the nesting `dvc metrics`
    flattens into `key0.key1.value`; a key given twice is an error."""
    tree: dict = {}
    for row in frame.to_dict("records"):
        node = tree
        for key in keys:
            node = node.setdefault(str(row[key]), {})
        if node:
            raise ValueError(f"two rows of the metrics table have {dict((k, row[k]) for k in keys)}")
        node.update({value: metric_value(row[value]) for value in values})
    return tree


def headline(frame: pd.DataFrame, keys: Sequence[str], values: Sequence[str]) -> dict:
    """A study's headline numbers, metrics/full/<stage>.json (`save_metrics`): `values` averaged over the rows that
    share `keys` (the datasets, as the paper's "Average" rows), nested under "Average" (`metrics_tree`); the full
    tables stay in csv and markdown (D201)."""
    means = frame.groupby(list(keys), sort=False)[list(values)].mean().reset_index()
    return {"Average": metrics_tree(means, keys, values)}


def short_name(name: str, width: int = NAME_WIDTH) -> str:
    """`name`, or, when longer than `width`, its longest run of whole words that fits with "…" after it (its first
    `width` - 1 characters when the first word is longer): `dvc metrics show` keeps a column as wide as its longest
    value."""
    if len(name) <= width:
        return name
    kept = ""
    for word in name.split(" "):
        if len(longer := f"{kept} {word}".lstrip()) > width - 1:
            break
        kept = longer
    return f"{kept or name[:width - 1]}…"


def compare(values: Mapping, metric: str, of: str, vs: str | None = None, lower_is_better: bool = False,
            names: Mapping[str, str] | None = None) -> dict:
    """A study's headline line, the one row `dvc metrics show` prints for it: {"metric", "of", "value", "vs",
    "vs value"}. `values` maps each row's name to its number (NaN or None: not measured); `of` is the row the study is
    about (its value null where the study has no such row), `vs` the row it is compared with, by default the best of
    the others (the highest, or the lowest with `lower_is_better`; null where no other has a number). `names` gives a
    row a shorter name to show; any name is cut to NAME_WIDTH characters (`short_name`)."""
    numbers = {str(row): metric_value(value) for row, value in dict(values).items()}
    if vs is None:
        others = {row: value for row, value in numbers.items() if row != of and value is not None}
        vs = (min if lower_is_better else max)(others, key=others.get) if others else None
    shown = names or {}
    return {"metric": metric, "of": short_name(shown.get(of, of)), "value": numbers.get(of),
            "vs": None if vs is None else short_name(shown.get(vs, vs)), "vs value": numbers.get(vs)}


def headline_line(frame: pd.DataFrame, key: str, metric: str, of: str, vs: str | None = None,
                  lower_is_better: bool = False, label: str | None = None,
                  names: Mapping[str, str] | None = None) -> dict:
    """`compare` of the rows of `frame` by their `key`: `metric` averaged over the rows that share a `key` (the
    datasets, as `headline`), shown as `label` (default: `metric`)."""
    means = frame.groupby(key, sort=False)[metric].mean()
    return compare(means, label or metric, of, vs, lower_is_better, names)


def save_metrics(line: dict, full: dict, name: str) -> list[Path]:
    """Write metrics/<name>.json, the stage's `metrics:` in dvc.yaml, holding the headline line `line` (`compare`),
    and metrics/full/<name>.json, one of its `outs:`, holding its headline numbers `full` (`headline`,
    `metrics_tree`), shown by `dvc metrics show metrics/full/<name>.json` (D241); both atomically."""
    if tuple(line) != HEADLINE_KEYS:
        raise ValueError(f"metrics/{name}.json: a headline line has the keys {list(HEADLINE_KEYS)}, got {list(line)}")
    paths = [METRICS_DIR / f"{name}.json", FULL_METRICS_DIR / f"{name}.json"]
    write_json(paths[0], line)
    write_json(paths[1], full)
    return paths


def save_plot_data(frame: pd.DataFrame, name: str, x: str, y: str, series: str, panel: str | None = None) -> Path:
    """Write plots/<name>.csv: the columns panel, series, `x` and `y` that dvc.yaml's top-level `plots:` draw with
    the `series` template (.dvc/plots/series.json): one line per series, one panel per value of `panel`."""
    data = pd.DataFrame({"panel": frame[panel] if panel else "", "series": frame[series], x: frame[x], y: frame[y]})
    path = PLOT_DATA_DIR / f"{name}.csv"
    write_text(path, data.to_csv(index=False, float_format="%.6g"))
    return path


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


def length_reward_plot_data(curves: pd.DataFrame) -> pd.DataFrame:
    """Figure 7's curves (`length_reward_curves`) with a panel and a series name each, for `save_plot_data`."""
    panels = {"a": "(a) rationale: sigmoid(x/tau)", "b": "(b) evidence: x^gamma"}
    return curves.assign(panel=curves["panel"].map(panels),
                         series=[f"{p}={v:g}" for p, v in zip(curves["parameter"], curves["value"])])


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
    repro.reporting.stats.compare_across_cells), annotated with the Holm-corrected sign-test p-value."""
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


def offline_plots_template() -> str:
    """An HTML page for `dvc plots show` (its `{plot_divs}` placeholder) with Vega, Vega-Lite and vega-embed inline,
    from vl-convert's bundle, in place of DVC's default page, which loads them from a CDN and stays blank offline."""
    import vl_convert

    bundle = vl_convert.javascript_bundle().replace("</script", "<\\/script")  # a literal cannot end the tag
    if any(f"{{{name}}}" in bundle for name in ("plot_divs", "scripts", "refresh_tag")):
        raise ValueError("the JavaScript bundle holds a placeholder of DVC's page template")
    head = '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n<title>DVC plots</title>\n'
    style = "<style>table { border-spacing: 15px; }</style>\n"
    script = f"<script>\n(() => {{\n{bundle}\n}})();\n</script>\n"  # its names stay its own: DVC's divs declare `spec`
    return f"{head}{script}{style}</head>\n<body>\n{{plot_divs}}\n</body>\n</html>\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the page template `dvc plots show` renders offline.")
    parser.add_argument("--out", type=Path, default=PLOTS_TEMPLATE, help="where to write it")
    write_text(parser.parse_args(argv).out, offline_plots_template())


if __name__ == "__main__":
    main()
