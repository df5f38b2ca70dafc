"""The `released_extractor` stage: the authors' EviOmni checkpoint (models.released_extractor), checked and
fingerprinted, so that the evaluation stages can depend on it in place of a GRPO run (D132).

    python -m repro.stages.released_extractor --profile paper-1p5b

writes data/<profile>/released_extractor/extractor.json: the reference and the fingerprint
(repro.io.model_fingerprint) of the local directory it resolves to (an embedded asset, a repo that
`python -m repro.ops.remote fetch` downloaded at its pinned revision, or a local path). The record names no path, so it
is the same on every machine holding the same weights; a profile that names no released checkpoint records
`{"reference": null}`. With `eviomni: released_extractor` at the top of params.yaml, dvc.yaml makes Tables 2, 4, 9-10
and Figure 5 depend on this directory instead of data/<profile>/train/eviomni, and the studies evaluate the
checkpoint as method `eviomni_released` (repro.config.with_released_eviomni): `dvc repro main_comparison` then never
runs train_eviomni.

Before the record is written, every released checkpoint the profile uses (models.released_extractor, and
agentic.extractor when it names another hub checkpoint) is checked (D179): Table 14 on `released_check.questions`
seeded questions of `released_check.dataset`/`split`, decoded as `eviomni_released` is evaluated (the `evaluation`
section's backend, options, dtype and evidence budget; RationalExtractor), lengths in tokens of models.extractor's
tokenizer as in Table 2 (D13). The report, check.json and check.md beside the record, gives the format rate
(repro.formulas.tags, strict and lenient, D147), the evidence length, and the CR (Eq. 9, both aggregates of D14) against
Table 2's EviOmni CR. Below `released_check.min_format_rate`, or with a CR outside [paper / cr_factor, paper x
cr_factor], the stage refuses: it writes the report, leaves no extractor.json, and exits with the numbers and the keys.
Null floors only report (the CPU profiles, whose stand-ins are random or untrained models).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from pathlib import Path

from repro.assets import AssetError, is_hub_id, references, resolve
from repro.config import ConfigError, Profile, ReleasedCheckConfig
from repro.data.layout import profile_dir
from repro.evaluation.methods import released_decoding
from repro.evaluation.refiners import RationalExtractor
from repro.evaluation.runner import lengths
from repro.formulas.metrics import corpus_compression_ratio
from repro.formulas.prompts import passages_document
from repro.formulas.tags import FORMAT_CHECKS, extract_evidence, is_well_formatted
from repro.generation import GenerationParams
from repro.generation.pool import ModelPool
from repro.io import model_fingerprint, write_json, write_text
from repro.reporting.paper import PAPER_DIR, TABLE_FILES, load_paper_tables
from repro.studies.comparison import evaluation_rows, length_tokenizer

RECORD = "extractor.json"
REPORT, REPORT_MD = "check.json", "check.md"
EXAMPLES = 3  # outputs shown in the report, cut at EXAMPLE_CHARS
EXAMPLE_CHARS = 600


class ReleasedCheckError(RuntimeError):
    """A released checkpoint below a floor of `released_check`."""


def released_dir(profile: str) -> Path:
    return profile_dir(profile) / "released_extractor"


def checkpoint_dir(cfg: Profile, ref: str, key: str) -> Path:
    """The local directory of checkpoint `ref` (named by `key`, e.g. models.released_extractor); an AssetError naming
    the key when it is not a directory holding a config.json and safetensors weights."""
    where = f"params.yaml: profiles.{cfg.name}.{key}"
    path = Path(resolve(ref, cfg.name))
    if not path.is_dir():
        hint = (f"run `HF_HUB_OFFLINE=0 python -m repro.ops.remote fetch --profile {cfg.name}` (it downloads the repo "
                f"at its pinned revision)" if is_hub_id(ref) else "give a checkpoint directory")
        raise AssetError(f"{where}: '{ref}' is not a directory on this machine; {hint}")
    missing = [name for name, present in (("config.json", (path / "config.json").is_file()),
                                          ("*.safetensors", any(path.glob("*.safetensors")))) if not present]
    if missing:
        raise AssetError(f"{where}: {path} has no {' and no '.join(missing)} (a causal LM saved with safetensors)")
    return path


def checkpoint_record(cfg: Profile) -> dict:
    """What the stage records for models.released_extractor; an AssetError naming the key when the checkpoint is not
    a local directory holding a config.json and safetensors weights."""
    ref = cfg.models.released_extractor
    if ref is None:
        return {"reference": None}
    path = checkpoint_dir(cfg, ref, "models.released_extractor")
    return {"reference": ref, "fingerprint": model_fingerprint(str(path))}


def checked_references(cfg: Profile) -> dict[str, str]:
    """The released checkpoints the profile's studies use, each with the key that names it: models.released_extractor,
    and agentic.extractor when it is a hub checkpoint of its own (paper-1p5b's agents use the 7B one). A hub checkpoint
    no stage reads (repro.assets.references) is neither fetched nor checked; a local directory in
    models.released_extractor stands in for one (the tests), while one in agentic.extractor is this project's run."""
    used = references(cfg)
    refs = {}
    released = cfg.models.released_extractor
    if released is not None and (not is_hub_id(released) or released in used):
        refs[released] = "models.released_extractor"
    agentic = cfg.agentic.extractor if cfg.agentic is not None else None
    if agentic is not None and is_hub_id(agentic):
        refs.setdefault(agentic, "agentic.extractor")
    return refs


@dataclasses.dataclass(frozen=True)
class PaperCR:
    """The paper's CR for a checkpoint: Table 2's EviOmni column, and where the cell is."""

    value: float
    cell: str


def paper_cr(cfg: Profile, ref: str) -> PaperCR | None:
    """Table 2's EviOmni CR on released_check.dataset at the model size `released_check.paper_sizes` gives `ref`;
    None if it gives none."""
    check = cfg.released_check
    size = check.paper_sizes.get(ref)
    if size is None:
        return None
    label = next(d.label for d in cfg.data.datasets if d.name == check.dataset)
    table = load_paper_tables(2)
    cells = table[(table["dataset"] == label) & (table["model_size"] == size) & (table["method"] == "EviOmni")
                  & (table["metric"] == "CR")]
    if cells.empty:
        raise ConfigError(f"params.yaml: profiles.{cfg.name}.released_check.dataset: Table 2 has no EviOmni CR for "
                          f"{label} ({check.dataset}) at {size}; it has {sorted(set(table['dataset']))}")
    (line,), (value,), (display,) = cells.index + 2, cells["value"], cells["display"]  # +2: header, 1-based
    return PaperCR(float(value), f"Table 2, {label}, {size}, EviOmni, CR = {display} "
                                 f"({PAPER_DIR / TABLE_FILES[2]}, line {line})")


def measure(rows: Sequence[dict], outputs: Sequence[str], tokenizer) -> dict:
    """Format rates, evidence and passage lengths and CR of one checkpoint's outputs (Table 14, stopped at
    `</extract>`) on `rows`. The evidence is what the evaluation reads (extract_evidence, D9); lengths are counted as in
    the prediction records (repro.evaluation.runner.lengths), CR as Table 2's two columns (D14)."""
    if len(rows) != len(outputs) or not rows:
        raise ValueError(f"{len(rows)} rows but {len(outputs)} outputs (need one output per row, and some rows)")
    passages = [lengths(passages_document(row), tokenizer) for row in rows]
    evidence = [lengths(extract_evidence(output), tokenizer) for output in outputs]
    well_formatted = {check: sum(is_well_formatted(o, with_answer=False, check=check) for o in outputs)
                      for check in FORMAT_CHECKS}
    cr = corpus_compression_ratio([[tokens] for tokens, _ in passages], [tokens for tokens, _ in evidence])
    return {
        "questions": len(rows),
        "well_formatted": well_formatted,
        "format_rate": {check: count / len(rows) for check, count in well_formatted.items()},
        "evidence_tokens": _spread([tokens for tokens, _ in evidence]),
        "evidence_words": _spread([words for _, words in evidence]),
        "passage_tokens": _spread([tokens for tokens, _ in passages]),
        "empty_evidence": cr.n_empty_evidence,
        "cr": {"mean_per_item": cr.mean_per_item, "ratio_of_sums": cr.ratio_of_sums},
    }


def _spread(values: list[int]) -> dict:
    return {"mean": statistics.fmean(values), "median": statistics.median(values)}


def floors(check: ReleasedCheckConfig, paper: PaperCR | None) -> dict:
    """The floors a checkpoint must meet: the format rate, and the CR band around the paper's (None: report only)."""
    band = None
    if check.cr_factor is not None and paper is not None:
        band = [paper.value / check.cr_factor, paper.value * check.cr_factor]
    return {"format_check": check.format_check, "min_format_rate": check.min_format_rate, "cr_band": band}


def failures(measured: dict, limits: dict, where: str) -> list[str]:
    """One sentence per floor the measures miss, with the numbers and the key (`where`: the section's key path)."""
    missed = []
    check, floor = limits["format_check"], limits["min_format_rate"]
    rate = measured["format_rate"][check]
    if floor is not None and rate < floor:
        missed.append(f"format rate {rate:.2f} ({measured['well_formatted'][check]}/{measured['questions']} outputs "
                      f"pass the {check} check of repro.formulas.tags) is below {where}.min_format_rate = {floor}")
    if limits["cr_band"] is not None:
        low, high = limits["cr_band"]
        cr = measured["cr"]["mean_per_item"]
        if not low <= cr <= high:
            missed.append(f"CR {cr:.1f}x (mean per item, Table 2's column; ratio of sums "
                          f"{measured['cr']['ratio_of_sums']:.1f}x) is outside [{low:.1f}x, {high:.1f}x], the paper's "
                          f"CR divided and multiplied by {where}.cr_factor")
    return missed


def assess(cfg: Profile, ref: str, key: str, rows: Sequence[dict], outputs: Sequence[str], tokenizer,
           paper: PaperCR | None) -> dict:
    """The report entry of checkpoint `ref` (named by `key`): its measures, the paper's CR, the floors, what it
    misses, and the first outputs."""
    measured = measure(rows, outputs, tokenizer)
    limits = floors(cfg.released_check, paper)
    missed = failures(measured, limits, f"params.yaml: profiles.{cfg.name}.released_check")
    examples = [{"question": row["question"], "output": output[:EXAMPLE_CHARS]}
                for row, output in zip(rows[:EXAMPLES], outputs)]
    return {"reference": ref, "key": key, **measured, "paper": dataclasses.asdict(paper) if paper else None,
            "floors": limits, "failures": missed, "passed": not missed, "examples": examples}


def generate(cfg: Profile, pool: ModelPool, path: Path, rows: Sequence[dict]) -> tuple[str, list[str]]:
    """(model id, outputs) of the checkpoint at `path` on `rows`, as method `eviomni_released` produces them: Table 14,
    greedy, with `released_check`'s stop strings and budget (`released_decoding`) and the `evaluation` section's
    batch. The model id is the one its prediction files record (weights fingerprint @ dtype)."""
    generator, model_id = pool.get(str(path))
    params, stop = released_decoding(cfg, GenerationParams(batch_size=cfg.evaluation.batch_size))
    extractor = RationalExtractor(generator, model_id, params, stop)
    return model_id, [r.raw if r.raw is not None else r.evidence for r in extractor.refine(rows)]


def run_check(cfg: Profile, refs: dict[str, str]) -> dict:
    """The check of every checkpoint of `refs` (reference -> key) on the profile's questions: the report."""
    where = f"params.yaml: profiles.{cfg.name}"
    check, ev = cfg.released_check, cfg.evaluation
    if check is None:
        raise ConfigError(f"{where}.released_check: missing, but {', '.join(refs.values())} name(s) a released "
                          f"checkpoint, which is checked before use (D179); add the section (paper-1p5b has one)")
    if ev is None:
        raise ConfigError(f"{where}.evaluation: missing; the check decodes as the evaluation does")
    if check.dataset not in {d.name for d in cfg.data.datasets}:
        raise ConfigError(f"{where}.released_check.dataset: '{check.dataset}' is not a data.datasets entry")
    papers = {ref: paper_cr(cfg, ref) for ref in refs}  # configuration errors before any model loads
    unmatched = [ref for ref, paper in papers.items() if paper is None]
    if check.cr_factor is not None and unmatched:
        raise ConfigError(f"{where}.released_check.paper_sizes: no Table 2 size for {unmatched}, but cr_factor is set; "
                          f"give each checkpoint its size (1.5B or 7B) or set cr_factor: null")
    paths = {ref: checkpoint_dir(cfg, ref, key) for ref, key in refs.items()}
    rows = evaluation_rows(cfg, check.dataset, check.split, check.questions)
    if not rows:
        raise ConfigError(f"{where}.released_check: {check.dataset}/{check.split} has no questions")
    tokenizer = length_tokenizer(cfg)
    checkpoints = []
    with ModelPool(ev.backend, cfg.models.inference, progress=False, options=ev.options) as pool:
        for ref, key in refs.items():
            model_id, outputs = generate(cfg, pool, paths[ref], rows)
            pool.release(str(paths[ref]))  # one checkpoint's engine at a time
            checkpoints.append({**assess(cfg, ref, key, rows, outputs, tokenizer, papers[ref]), "model": model_id})
    return check_report(cfg, len(rows), checkpoints)


def check_report(cfg: Profile, questions: int, checkpoints: list[dict]) -> dict:
    """check.json: the settings of the check and one `assess` entry per checkpoint; passed if every one passed."""
    check, ev = cfg.released_check, cfg.evaluation
    return {"profile": cfg.name, "passed": all(c["passed"] for c in checkpoints), "dataset": check.dataset,
            "split": check.split, "questions": questions, "length_tokenizer": cfg.models.extractor,
            "decoding": {"backend": ev.backend, "options": ev.options, "dtype": cfg.models.inference,
                         "max_new_tokens": check.max_new_tokens or ev.evidence_max_new_tokens, "stop": check.stop,
                         "template": "Table 14 (repro.formulas.prompts)"},
            "checkpoints": checkpoints}


def refusal(report: dict, report_path: Path) -> str:
    """The error of a failed check: each failing checkpoint's numbers and keys, and what a mismatch likely means."""
    lines = [f"released_check: {c['reference']} ({c['key']}) on {report['questions']} {report['dataset']} "
             f"{report['split']} questions: " + "; ".join(c['failures'])
             for c in report["checkpoints"] if not c["passed"]]
    return "\n".join([
        *lines,
        f"The report is {report_path}. A checkpoint this far from the paper most likely does not follow the prompt as "
        "this project sends it: Table 14 as repro.formulas.prompts assembles it "
        "(system turn \"You are a helpful assistant.\", "
        f"D3; `Passage i (Title: t): text` lines, D1; generation stopped at "
        f"{' or '.join(repr(x) for x in report['decoding']['stop'])} within {report['decoding']['max_new_tokens']} "
        "new tokens, released_check.stop and .max_new_tokens, D216). The prompt the released models "
        "were trained with is not published, only the weights are (digest ambiguity 53), so the tables would measure "
        "that mismatch, not EviOmni. A wrong or damaged download, or an engine that decodes differently (backend, "
        "dtype), gives the same picture. To use the checkpoint anyway, lower or null the floors named above and say "
        "so with the results.",
    ])


def verdict(checkpoint: dict) -> str:
    """REFUSED, passed, or "reported only" when the profile sets no floor (null floors always pass)."""
    if not checkpoint["passed"]:
        return "REFUSED"
    limits = checkpoint["floors"]
    return "passed" if limits["min_format_rate"] is not None or limits["cr_band"] is not None else "reported only"


def report_markdown(report: dict) -> str:
    """check.md: the report for people."""
    decoding = report["decoding"]
    verdicts = {verdict(c) for c in report["checkpoints"]}
    overall = next(v for v in ("REFUSED", "passed", "reported only") if v in verdicts)
    out = [f"# Released checkpoints checked before use: {overall}", "",
           f"Profile `{report['profile']}`: {decoding['template']} on {report['questions']} seeded questions of "
           f"`{report['dataset']}/{report['split']}`, decoded as `eviomni_released` ({decoding['backend']}, "
           f"{decoding['dtype']}, greedy, at most {decoding['max_new_tokens']} new tokens, stopped at "
           f"{' or '.join(repr(s) for s in decoding['stop'])}); "
           f"lengths in tokens of `{report['length_tokenizer']}`'s tokenizer (D13). Floors: `released_check` (D179).",
           ""]
    for c in report["checkpoints"]:
        limits, n = c["floors"], c["questions"]
        rate_floor = "" if limits["min_format_rate"] is None else f">= {limits['min_format_rate']}"
        band = "" if limits["cr_band"] is None else "in [{:.1f}x, {:.1f}x]".format(*limits["cr_band"])
        rows = [("measure", "value", "floor"), ("---", "---", "---")]
        for check in FORMAT_CHECKS:
            floor = rate_floor if check == limits["format_check"] else ""
            rows.append((f"format rate ({check})",
                         f"{c['format_rate'][check]:.2f} ({c['well_formatted'][check]}/{n})", floor))
        rows += [("evidence tokens (mean / median)", "{mean:.1f} / {median:g}".format(**c["evidence_tokens"]), ""),
                 ("evidence words (mean / median)", "{mean:.1f} / {median:g}".format(**c["evidence_words"]), ""),
                 ("passage tokens (mean)", f"{c['passage_tokens']['mean']:.1f}", ""),
                 ("empty evidence", f"{c['empty_evidence']}/{n}", ""),
                 ("CR (mean per item, Table 2's column)", f"{c['cr']['mean_per_item']:.1f}x", band),
                 ("CR (ratio of sums)", f"{c['cr']['ratio_of_sums']:.1f}x", ""),
                 ("paper", c["paper"]["cell"] if c["paper"] else "no Table 2 cell for this checkpoint", "")]
        out += [f"## `{c['reference']}` (`{c['key']}`): {verdict(c)}", "",
                *("| " + " | ".join(row) + " |" for row in rows), ""]
        out += [f"- {failure}" for failure in c["failures"]] + ([""] if c["failures"] else [])
        out += ["First outputs:", ""]
        for example in c["examples"]:
            out += [f"- {example['question']}", "", "```text", example["output"].strip() or "(whitespace only)",
                    "```", ""]
    return "\n".join(out)


def record_released_extractor(cfg: Profile) -> Path:
    """Check the profile's released checkpoints, then write the report and the stage's record (atomically); the
    record's path, or a ReleasedCheckError (and no record) when a floor is missed."""
    (released_dir(cfg.name) / RECORD).unlink(missing_ok=True)  # no earlier record outlives a check that fails
    record = checkpoint_record(cfg)
    refs = checked_references(cfg)
    return write_stage(cfg, record, run_check(cfg, refs) if refs else None)


def write_stage(cfg: Profile, record: dict, check: dict | None) -> Path:
    """Write the check's report (None: no checkpoint to check, an earlier report is removed), then the record, and
    return its path; after a failed check, a ReleasedCheckError and no record."""
    out = released_dir(cfg.name)
    if check is None:
        for name in (REPORT, REPORT_MD):
            (out / name).unlink(missing_ok=True)
    else:
        write_json(out / REPORT, check)
        write_text(out / REPORT_MD, report_markdown(check))
        if not check["passed"]:
            (out / RECORD).unlink(missing_ok=True)
            raise ReleasedCheckError(refusal(check, out / REPORT_MD))
    write_json(out / RECORD, record)
    return out / RECORD
