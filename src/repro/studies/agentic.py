"""The agentic study of §4.7-4.8 on one profile: every agent of `models.agents` on `n_items` sampled items of
each dataset, in each condition of `agentic.conditions`: without and with the evidence extractor, and prompted
zero-shot with Eval-RAR's template (`eval_rar`, issue #18); per-item trajectories, then Tables 5 and 6.

    summary = run_study(cfg, out_dir)                  # writes trajectories/<agent>/<condition>/<dataset>.jsonl
    table5 = table5_layout(summary, cfg)               # EM and CR per dataset, the paper's rows beside
    table6 = table6_layout(summary, cfg)               # average number of searches
    tests = compare_conditions(summary, out_dir)       # every pair of conditions, paired per item, Holm

The Eval-RAR condition differs from `without` only in the prompt (App. A.1) and the `<evaluate>` block it asks for
after each search (D155, D156); its summary adds the share of searches followed by an evaluation and the
evaluation answer-recall (a golden answer contained in y_eval, Eq. 4's indicator).

CR of one trajectory is Σ L(retrieved) / Σ L(evidence) over its searches (see repro.agentic.trajectory);
a dataset's CR is the mean over trajectories that searched at least once (the ratio of the summed lengths is
reported beside it, D14); the condition without the extractor has CR 1 by definition.

The study resumes: each trajectories file is a `repro.evaluation.records.RecordFile` written chunk by chunk
(`CHUNK_BATCHES` agent batches of items at a time), so a killed run continues with the items it had not finished,
and a rerun of the same configuration reuses finished files without loading the agent or the extractor (D103).
The models live in one `ModelPool` (one engine per model on vLLM): the extractor for the whole study, each agent
until its runs are done; leaving the study ends them all (D94).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random
import typing
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from repro.agentic.actions import SEARCH_R1, AgentProtocol, eval_rar_protocol
from repro.agentic.extractor import EvidenceExtractor
from repro.agentic.loop import AgentSettings, run_agent
from repro.agentic.search import Search, open_search
from repro.agentic.trajectory import Trajectory, compression
from repro.assets import resolve
from repro.config import AgenticCondition, AgenticConfig, ConfigError, Profile
from repro.data import layout
from repro.data.qa import read_qa
from repro.evaluation.records import RecordFile, process_resumably, read_records
from repro.formulas.metrics import corpus_compression_ratio, text_length
from repro.generation import Generator
from repro.generation.pool import ModelPool
from repro.io import fingerprint
from repro.reporting import stats
from repro.reporting.paper import PAPER_DIR, TABLE_FILES, load_paper_tables

CONDITIONS = typing.get_args(AgenticCondition)  # the agent alone; with the extractor (Algorithm 2); Eval-RAR's prompt
TRAJECTORIES_DIR = "trajectories"
TRAJECTORY_FIELDS = ("question", "golden_answers", "prediction", "em", "searches", "done", "prompt", "turns",
                     "retrieved_length", "evidence_length")
CHUNK_BATCHES = 8  # items written to the trajectories file at a time, in agent batches (agentic.batch_size)


def agentic_config(cfg: Profile) -> AgenticConfig:
    if cfg.agentic is None:
        raise ConfigError(f"profile {cfg.name} has no agentic section")
    known = {d.name for d in cfg.data.datasets}
    if unknown := [d for d in cfg.agentic.datasets if d not in known]:
        raise ConfigError(f"agentic.datasets: {unknown} are not data.datasets entries ({sorted(known)})")
    a = cfg.agentic
    if extractor_ref(cfg) in cfg.models.agents and a.agent_options != a.extractor_options:
        raise ConfigError(f"agentic: {extractor_ref(cfg)} is both an agent and the extractor, loaded once (D94), so "
                          f"agentic.agent_options {a.agent_options} and extractor_options {a.extractor_options} "
                          f"must be equal")
    return a


def extractor_ref(cfg: Profile) -> str:
    """agentic.extractor if set (a trained checkpoint, or the paper's EviOmni-7B); else the released EviOmni
    checkpoint if the profile names one; else the profile's extractor model, prompted with Table 14."""
    return cfg.agentic.extractor or cfg.models.released_extractor or cfg.models.extractor


def model_name(ref: str) -> str:
    """The embedded asset's name, or the last component of a path or hub id."""
    return ref.removeprefix("embedded:") if ref.startswith("embedded:") else Path(ref.rstrip("/")).name


def model_label(ref: str) -> str:
    """The name for tables; an embedded model is marked as such (it stands in for the paper's model)."""
    return f"{model_name(ref)} (embedded)" if ref.startswith("embedded:") else model_name(ref)


def condition_protocol(cfg: Profile, condition: str) -> AgentProtocol:
    """Eval-RAR's prompt and evaluation step for `eval_rar`, Search-R1's for the two extractor conditions."""
    return eval_rar_protocol(cfg.agentic.evaluate_step) if condition == "eval_rar" else SEARCH_R1


def agent_settings(cfg: Profile) -> AgentSettings:
    a = cfg.agentic
    return AgentSettings(max_actions=a.max_actions, topk=a.topk, max_new_tokens=a.max_new_tokens,
                         max_obs_tokens=a.max_obs_tokens, batch_size=a.batch_size)


def sample_items(cfg: Profile, dataset: str) -> list[dict]:
    """`n_items` items of the dataset's split drawn without replacement with `seed`, in file order (all if
    the split is smaller)."""
    a = agentic_config(cfg)
    items = list(read_qa(layout.qa_path(cfg.name, dataset, a.split)))
    if a.n_items is None or a.n_items >= len(items):
        return items
    return [items[i] for i in sorted(random.Random(a.seed).sample(range(len(items)), a.n_items))]


def study_pool(cfg: Profile, progress: bool) -> ModelPool:
    """The pool the study's models live in: `agentic.backend` with `models.dtype` (D94, D140)."""
    return ModelPool(cfg.agentic.backend, cfg.models.dtype, progress=progress)


def agent_generator(cfg: Profile, pool: ModelPool, ref: str) -> Generator:
    """An agent of `models.agents` with `agentic.agent_options` (which may set its dtype, vLLM's memory share...)."""
    return pool.get(resolve(ref, cfg.name), options=cfg.agentic.agent_options)[0]


def extractor_generator(cfg: Profile, pool: ModelPool) -> Generator:
    return pool.get(resolve(extractor_ref(cfg), cfg.name), options=cfg.agentic.extractor_options)[0]


def trajectory_path(out_dir: str | Path, agent: str, condition: str, dataset: str) -> Path:
    return Path(out_dir) / TRAJECTORIES_DIR / model_name(agent) / condition / f"{dataset}.jsonl"


def length_function(cfg: Profile, extractor: Generator):
    """L(·) of the CR: tokens of the extractor's tokenizer, or words (`rewards.length_unit`, D13)."""
    unit = cfg.rewards.length_unit
    tokenizer = extractor.tokenizer if unit == "tokens" else None
    return lambda text: text_length(text, unit, tokenizer)


def run_config(cfg: Profile, agent: str, condition: str, items: Sequence[dict]) -> dict:
    """Everything the trajectories of one agent × condition × dataset depend on (their file's fingerprint). The
    other conditions do not count, and the evaluation step only for `eval_rar`: adding a condition reruns only it."""
    a = cfg.agentic
    other = ("datasets", "n_items", "seed", "conditions", "evaluate_step")
    config = {"agent": agent, "condition": condition, "items": fingerprint(list(items)), "dtype": cfg.models.dtype,
              "agentic": {k: v for k, v in dataclasses.asdict(a).items() if k not in other},
              "extractor": extractor_ref(cfg) if condition == "with" else None,
              "length_unit": cfg.rewards.length_unit if condition == "with" else None,
              "retrieval": None if a.search_url else dataclasses.asdict(cfg.retrieval)}
    if condition == "eval_rar":
        config["evaluate_step"] = a.evaluate_step
    return config


def trajectory_records(items: list[dict], *, cfg: Profile, pool: ModelPool, agent_ref: str, condition: str,
                       search: Search, progress: bool) -> list[dict]:
    """The trajectory records of `items` run by one agent in one condition (one batch per turn); the models are
    loaded from `pool` when a chunk first needs them (a finished study loads none)."""
    extractor, length = None, None
    agent = agent_generator(cfg, pool, agent_ref)
    if condition == "with":
        generator = extractor_generator(cfg, pool)
        extractor = EvidenceExtractor(generator, cfg.agentic.extractor_max_new_tokens, cfg.agentic.batch_size)
        length = length_function(cfg, generator)
    trajectories = run_agent(items, agent, agent.tokenizer, search, agent_settings(cfg), extractor, progress,
                             desc=f"{model_name(agent_ref)} {condition}", protocol=condition_protocol(cfg, condition))
    return [_record(trajectory, length) for trajectory in trajectories]


def run_study(cfg: Profile, out_dir: str | Path, progress: bool = True) -> pd.DataFrame:
    """Run every agent × condition × dataset on the same sampled items, write the trajectories, return one summary
    row per run; finished trajectories of the same configuration are reused, an interrupted run resumes."""
    a = agentic_config(cfg)
    items = {d: sample_items(cfg, d) for d in a.datasets}
    rows = []
    with study_pool(cfg, progress) as pool, open_search(cfg) as search:
        for agent_ref in cfg.models.agents:
            for condition in a.conditions:
                process = functools.partial(trajectory_records, cfg=cfg, pool=pool, agent_ref=agent_ref,
                                            condition=condition, search=search, progress=progress)
                for dataset in a.datasets:
                    store = RecordFile(trajectory_path(out_dir, agent_ref, condition, dataset),
                                       run_config(cfg, agent_ref, condition, items[dataset]), TRAJECTORY_FIELDS)
                    records = process_resumably(items[dataset], store, process, CHUNK_BATCHES * a.batch_size,
                                                progress, desc=f"{model_name(agent_ref)} {condition} {dataset}")
                    rows.append({"agent": agent_ref, "condition": condition, "dataset": dataset,
                                 **summarize(records, evaluates=condition == "eval_rar")})
            if agent_ref != extractor_ref(cfg):
                pool.release(resolve(agent_ref, cfg.name))  # an agent's engine ends before the next one starts
    return pd.DataFrame(rows).assign(extractor=extractor_ref(cfg))


def _record(trajectory: Trajectory, length) -> dict:
    lengths = compression(trajectory, length) if length is not None else None
    retrieved, evidence = lengths if lengths is not None else (None, None)
    return {**trajectory.to_record(), "retrieved_length": retrieved, "evidence_length": evidence}


def summarize(records: list[dict], evaluates: bool = False) -> dict:
    """EM (%), average searches, share answered, invalid actions per item, with the extractor the CR and, for a
    protocol with an evaluation step (`evaluates`), the share of searches followed by an `<evaluate>` block and
    the evaluation answer-recall (% of items whose y_eval contains a golden answer); NaN where they do not apply."""
    turns = [t for r in records for t in r["turns"]]
    summary = {"items": len(records), "em": 100 * float(np.mean([r["em"] for r in records])),
               "avg_searches": float(np.mean([r["searches"] for r in records])),
               "answered": float(np.mean([r["prediction"] is not None for r in records])),
               "invalid_per_item": sum(t["action"] is None for t in turns) / len(records),
               "cr": np.nan, "cr_ratio_of_sums": np.nan, "cr_items": 0, "empty_evidence": 0,
               "evaluated_searches": np.nan, "evaluation_recall": np.nan}
    if evaluates:
        trajectories = [Trajectory.from_record(r) for r in records]
        searches = sum(t.searches for t in trajectories)
        summary["evaluation_recall"] = 100 * float(np.mean([t.evaluation_recall for t in trajectories]))
        if searches:
            summary["evaluated_searches"] = sum(t.evaluated_searches for t in trajectories) / searches
    measured = [r for r in records if r["evidence_length"] is not None]
    if measured:
        cr = corpus_compression_ratio([[r["retrieved_length"]] for r in measured],
                                      [r["evidence_length"] for r in measured])
        summary.update(cr=cr.mean_per_item, cr_ratio_of_sums=cr.ratio_of_sums, cr_items=cr.n_items,
                       empty_evidence=cr.n_empty_evidence)
    return summary


def read_trajectories(out_dir: str | Path, agent: str, condition: str, dataset: str) -> list[Trajectory]:
    return [Trajectory.from_record(r)
            for r in read_records(trajectory_path(out_dir, agent, condition, dataset), TRAJECTORY_FIELDS)]


def paired_item_scores(baseline: list[dict], condition: list[dict]) -> tuple[dict, dict]:
    """Per-item EM and number of searches of two conditions, aligned by item id (in the order of `baseline`)."""
    by_id = {r["id"]: r for r in condition}
    if set(by_id) != {r["id"] for r in baseline}:
        raise ValueError("the two conditions were run on different items")
    pairs = [(r, by_id[r["id"]]) for r in baseline]
    return tuple({"em": [float(p[k]["em"]) for p in pairs], "searches": [float(p[k]["searches"]) for p in pairs]}
                 for k in (0, 1))


def condition_pairs(conditions: Sequence[str]) -> list[tuple[str, str]]:
    """Every pair (baseline, condition) of the conditions run, in CONDITIONS order: with vs without, eval_rar vs
    without, eval_rar vs with."""
    ordered = [c for c in CONDITIONS if c in set(conditions)]
    return list(itertools.combinations(ordered, 2))


def compare_conditions(summary: pd.DataFrame, out_dir: str | Path, n_resamples: int = 10_000,
                       seed: int = 0) -> pd.DataFrame:
    """Every pair of conditions on the same items of each agent × dataset: approximate randomization on EM and on the
    number of searches, exact McNemar on EM with its exact 95% interval, a paired bootstrap 95% interval (BCa) on the
    searches (`repro.reporting.stats.compare_per_item`, D21). `effect` is
    condition − baseline (EM in points); `p_holm` is Holm-corrected (statsmodels) across all rows of the table, so
    across the pairs, metrics, tests, agents and datasets."""
    rows = []
    for (agent, dataset), runs in summary.groupby(["agent", "dataset"], sort=False):
        pairs = condition_pairs(list(runs["condition"]))
        records = {c: read_records(trajectory_path(out_dir, agent, c, dataset), ("em", "searches"))
                   for c in dict.fromkeys(c for pair in pairs for c in pair)}
        for baseline, condition in pairs:
            scores_baseline, scores_condition = paired_item_scores(records[baseline], records[condition])
            tests = stats.compare_per_item(scores_condition, scores_baseline, n_resamples=n_resamples, seed=seed)
            rows.append(tests.assign(agent=agent, dataset=dataset, condition=condition, baseline=baseline))
    if not rows:
        raise ValueError("no agent × dataset was run in two conditions: nothing to compare")
    table = pd.concat(rows, ignore_index=True)
    em = table["metric"] == "em"
    table.loc[em, ["effect", "ci_low", "ci_high"]] *= 100
    table["p_holm"] = stats.holm(table["p_value"])[0]
    return table[["agent", "dataset", "condition", "baseline", "metric", "test", "n", "effect", "ci_low", "ci_high",
                  "p_value", "p_holm"]]


# ---- Tables 5 and 6 -------------------------------------------------------------------------------------------


CONDITION_SUFFIXES = {"without": "", "with": " w/ {extractor}", "eval_rar": " + Eval-RAR prompt"}


def run_label(agent: str, condition: str, extractor: str) -> str:
    """A row of Tables 5-6: the agent, with the extractor, or prompted with Eval-RAR's template."""
    return model_label(agent) + CONDITION_SUFFIXES[condition].format(extractor=model_label(extractor))


def _our_rows(summary: pd.DataFrame, cfg: Profile, metrics: dict[str, str]) -> pd.DataFrame:
    labels = {d.name: d.label for d in cfg.data.datasets}
    frame = summary.assign(
        source=f"this run ({cfg.name})", dataset=summary["dataset"].map(labels),
        model=[run_label(a, c, e) for a, c, e in zip(summary["agent"], summary["condition"], summary["extractor"])])
    frame = frame.assign(cr=frame["cr"].where(frame["condition"] == "with", 1.0))
    return frame.melt(id_vars=["source", "model", "dataset"], value_vars=list(metrics), var_name="metric") \
        .replace({"metric": metrics})


def _paper_rows(table: int) -> pd.DataFrame:
    if not (PAPER_DIR / TABLE_FILES[table]).exists():
        return pd.DataFrame(columns=["source", "model", "dataset", "metric", "value"])
    paper = load_paper_tables(table)
    paper = paper[paper["dataset"] != "Average"]  # recomputed like ours (equal to the printed averages)
    model = [f"Search-R1-{size}" + (" w/ EviOmni" if "EviOmni" in method else "")
             for size, method in zip(paper["model_size"], paper["method"])]
    return paper.assign(source="paper", model=model)[["source", "model", "dataset", "metric", "value"]]


def _layout(tidy: pd.DataFrame, metrics: list[str], formats: dict[str, str], average: bool) -> pd.DataFrame:
    """One row per (source, model); per dataset one column per metric, in first-seen order; the average of
    each metric over the row's datasets last (as Table 5's "Average")."""
    datasets = list(dict.fromkeys(tidy["dataset"]))
    keys = list(dict.fromkeys(map(tuple, tidy[["source", "model"]].itertuples(index=False))))
    wide = tidy.pivot_table(index=["source", "model"], columns=["dataset", "metric"], values="value", aggfunc="first")
    columns = [(d, m) for d in datasets for m in metrics if (d, m) in wide.columns]
    wide = wide.reindex(index=pd.MultiIndex.from_tuples(keys, names=["source", "model"]), columns=columns)
    out = pd.DataFrame({"source": [k[0] for k in keys], "model": [k[1] for k in keys]})
    for d, m in columns:
        out[f"{d} {m}"] = [_fmt(v, formats[m]) for v in wide[(d, m)]]
    if average:
        for m in metrics:
            values = wide[[c for c in columns if c[1] == m]].mean(axis=1, skipna=True)
            out[f"Average {m}"] = [_fmt(v, formats[m]) for v in values]
    return out


def _fmt(value: float, fmt: str) -> str:
    return "" if pd.isna(value) else fmt.format(value)


def table5_tidy(summary: pd.DataFrame, cfg: Profile) -> pd.DataFrame:
    return pd.concat([_our_rows(summary, cfg, {"em": "EM", "cr": "CR"}), _paper_rows(5)], ignore_index=True)


def table6_tidy(summary: pd.DataFrame, cfg: Profile) -> pd.DataFrame:
    ours = _our_rows(summary, cfg, {"avg_searches": "avg_searches"})
    return pd.concat([ours, _paper_rows(6)], ignore_index=True)


def table5_layout(summary: pd.DataFrame, cfg: Profile) -> pd.DataFrame:
    """Table 5: EM and CR per dataset and their averages; our rows, then the paper's."""
    return _layout(table5_tidy(summary, cfg), ["EM", "CR"], {"EM": "{:.2f}", "CR": "{:.2f}x"}, average=True)


def table6_layout(summary: pd.DataFrame, cfg: Profile) -> pd.DataFrame:
    """Table 6: the average number of searches per dataset; our rows, then the paper's."""
    return _layout(table6_tidy(summary, cfg), ["avg_searches"], {"avg_searches": "{:.2f}"}, average=False) \
        .rename(columns=lambda c: c.replace(" avg_searches", ""))


def plot_study(summary: pd.DataFrame, cfg: Profile) -> plt.Figure:
    """EM, CR and average searches per dataset, for each agent in each condition."""
    labels = {d.name: d.label for d in cfg.data.datasets}
    data = summary.assign(dataset=summary["dataset"].map(labels),
                          run=[run_label(a, c, e) for a, c, e in
                               zip(summary["agent"], summary["condition"], summary["extractor"])],
                          cr=summary["cr"].where(summary["condition"] == "with", 1.0))
    panels = [("em", "EM (%)"), ("cr", "CR (x)"), ("avg_searches", "average number of searches")]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for ax, (column, title) in zip(axes, panels):
        sns.barplot(data=data, x="dataset", y=column, hue="run", ax=ax, palette="Paired")
        ax.set(title=title, xlabel="", ylabel="", ylim=(0, max(1.0, 1.15 * data[column].max())))
        ax.tick_params(axis="x", labelrotation=15)
        ax.get_legend().remove()
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=min(3, len(names)), fontsize=8, bbox_to_anchor=(0.5, -0.08))
    fig.tight_layout()
    return fig


def evaluation_examples(out_dir: str | Path, agent: str, datasets: Sequence[str], n: int = 2) -> pd.DataFrame:
    """Up to `n` items per dataset of the agent's Eval-RAR run, those that searched first: the `<evaluate>` blocks
    it wrote (joined by " | "), the searches followed by one, its answer and EM."""
    rows = []
    for dataset in datasets:
        trajectories = sorted(read_trajectories(out_dir, agent, "eval_rar", dataset), key=lambda t: not t.searches)
        rows += [{"dataset": dataset, "id": t.id, "question": t.question, "searches": t.searches,
                  "evaluated_searches": t.evaluated_searches, "evaluations": " | ".join(t.evaluations),
                  "evaluation_recall": t.evaluation_recall, "prediction": t.prediction, "em": t.em}
                 for t in trajectories[:n]]
    return pd.DataFrame(rows)
