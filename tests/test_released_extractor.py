"""`eviomni: released_extractor` (D132): the studies evaluate models.released_extractor as `eviomni_released`, the
released_extractor stage checks and fingerprints it, and dvc.yaml's evaluation stages then depend on no GRPO run.
The pipeline test runs the switch end to end on the ci profile (tests/test_pipeline.py)."""

import dataclasses
import json
import shutil
from pathlib import Path

import networkx as nx
import pytest
import yaml

from conftest import ROOT
from repro.assets import AssetError
from repro.config import ConfigError, Profile, _build, load_profile, profile_names, read_params
from repro.data import layout
from repro.evaluation.methods import extractor_model
from repro.io import model_fingerprint, write_jsonl
from repro.ops import preflight
from repro.stages.released_extractor import main
from repro.studies.released import (
    RECORD,
    REPORT,
    REPORT_MD,
    ReleasedCheckError,
    assess,
    check_report,
    checked_references,
    checkpoint_record,
    measure,
    paper_cr,
    refusal,
    released_dir,
    run_check,
    write_stage,
)

EVALUATION_STAGES = ["main_comparison", "latency", "distractor_setting", "noise_robustness", "case_inspection"]


def _params(tmp_path: Path, eviomni: str | None, **models) -> Path:
    """The repository's params.yaml with the top-level `eviomni` switch set (None: removed) and ci's `models`
    updated."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    if eviomni is None:
        params.pop("eviomni")
    else:
        params["eviomni"] = eviomni
    params["profiles"]["ci"]["models"].update(models)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


@pytest.fixture
def stand_in(tmp_path) -> Path:
    """A directory laid out like a released checkpoint (its bytes are only fingerprinted here)."""
    path = tmp_path / "EviOmni-stand-in"
    path.mkdir()
    (path / "config.json").write_text('{"model_type": "llama"}')
    (path / "model.safetensors").write_bytes(b"weights")
    return path


# --- the switch in the profile ---


def test_the_default_is_the_trained_extractor_and_lists_are_unchanged(tmp_path):
    cfg = load_profile("paper-1p5b", _params(tmp_path, None))
    assert cfg.eviomni == "train/eviomni" == load_profile("paper-1p5b").eviomni
    assert cfg.evaluation.methods[-2:] == ["eviomni", "eviomni_released"]


def test_released_replaces_eviomni_once_in_every_study(tmp_path):
    cfg = load_profile("paper-1p5b", _params(tmp_path, "released_extractor"))
    assert cfg.eviomni == "released_extractor"
    assert cfg.evaluation.methods == ["zero", "full", "selective_context", "llmlingua2", "recomp", "filco", "seer",
                                      "cot", "eviomni_released"]
    assert cfg.latency.methods == ["filco", "cot", "eviomni_released"]
    assert cfg.distractor.methods == ["zero", "full", "llmlingua2", "filco", "cot", "eviomni_released"]
    assert cfg.noise_robustness.methods == ["full", "filco", "eviomni_released"]
    ci = load_profile("ci", _params(tmp_path, "released_extractor", released_extractor="some/dir"))
    assert ci.evaluation.methods[-2:] == ["prompted_extractor", "eviomni_released"]  # in eviomni's place
    assert ci.distractor.methods == ["zero", "full", "eviomni_released"]
    assert ci.agentic == load_profile("ci").agentic and ci.ablation == load_profile("ci").ablation  # not rewritten


def test_the_switch_needs_a_released_checkpoint_and_a_known_value(tmp_path):
    with pytest.raises(ConfigError, match=r"profiles\.ci\.models\.released_extractor: null.*top-level `eviomni`"):
        load_profile("ci", _params(tmp_path, "released_extractor"))
    with pytest.raises(ConfigError, match=r"eviomni: 'released' is not one of"):
        load_profile("ci", _params(tmp_path, "released"))
    params = yaml.safe_load(_params(tmp_path, None).read_text())
    params["profiles"]["ci"]["eviomni"] = "released_extractor"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(ConfigError, match=r"profiles\.ci\.eviomni: .* top-level `eviomni` key"):
        load_profile("ci", tmp_path / "params.yaml")


def test_eviomni_released_runs_the_named_checkpoint(tmp_path, stand_in):
    cfg = load_profile("ci", _params(tmp_path, "released_extractor", released_extractor=str(stand_in)))
    assert extractor_model("eviomni_released", cfg) == str(stand_in)


def test_a_missing_trained_extractor_points_to_the_switch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="eviomni: released_extractor"):
        extractor_model("eviomni", load_profile("ci", ROOT / "params.yaml"))


# --- the released_extractor stage ---


def test_the_record_names_reference_and_fingerprint_of_a_local_checkpoint(tmp_path, stand_in):
    cfg = load_profile("ci", _params(tmp_path, "released_extractor", released_extractor=str(stand_in)))
    record = checkpoint_record(cfg)
    assert record == {"reference": str(stand_in), "fingerprint": model_fingerprint(str(stand_in))}
    (stand_in / "model.safetensors").write_bytes(b"other weights")  # another checkpoint: another record
    assert checkpoint_record(cfg)["fingerprint"] != record["fingerprint"]


def test_a_profile_without_released_checkpoint_records_none_and_checks_nothing(tmp_path, monkeypatch):
    cfg = load_profile("ci", _params(tmp_path, None))
    assert checkpoint_record(cfg) == {"reference": None} and checked_references(cfg) == {}
    monkeypatch.chdir(tmp_path)
    stale = released_dir("ci") / REPORT  # the report of a checkpoint the profile no longer names
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    monkeypatch.setattr(preflight, "require", lambda cfg, stage: None)  # the stage's own check, not the preflight's
    main(["--profile", "ci"])
    assert json.loads((released_dir("ci") / RECORD).read_text()) == {"reference": None}
    assert sorted(p.name for p in released_dir("ci").iterdir()) == [RECORD]


def test_an_unfetched_hub_checkpoint_names_the_key_and_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no data/external here
    cfg = load_profile("paper-1p5b", ROOT / "params.yaml")
    with pytest.raises(AssetError, match=r"profiles\.paper-1p5b\.models\.released_extractor: "
                                         r"'HIT-TMG/EviOmni-nq_train-1\.5B' is not a directory.*"
                                         r"repro\.ops\.remote fetch"):
        checkpoint_record(cfg)


def test_a_checkpoint_without_safetensors_is_refused(tmp_path, stand_in):
    (stand_in / "model.safetensors").unlink()
    (stand_in / "pytorch_model.bin").write_bytes(b"pickle")
    cfg = load_profile("ci", _params(tmp_path, None, released_extractor=str(stand_in)))
    with pytest.raises(AssetError, match=r"has no \*\.safetensors"):
        checkpoint_record(cfg)


# --- the check before use (D179) ---

ONE_POINT_FIVE, SEVEN = "HIT-TMG/EviOmni-nq_train-1.5B", "HIT-TMG/EviOmni-nq_train-7B"


@pytest.fixture(scope="module")
def word_tokenizer():
    """A real `tokenizers` tokenizer with one token per whitespace word, so that lengths can be counted by hand."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tokenizer


def _rows(n: int) -> list[dict]:
    """Contexts rows whose document, `Passage 1 (Title: T): w ... w`, is 4 + 36 = 40 words."""
    return [{"id": f"q{i}", "question": f"question {i}?", "golden_answers": ["w"], "metadata": {},
             "passages": [{"id": f"p{i}", "contents": '"T"\n' + " ".join(["w"] * 36)}]} for i in range(n)]


# Four outputs of Table 14 stopped at </extract>: (strict, lenient) format, evidence tokens, CR = 40 / evidence
MIXED_OUTPUTS = [
    "<reason>r</reason>\n<extract>w w w w</extract>",  # (yes, yes), 4, 10
    "Sure. <reason>r</reason><extract>w w</extract>",  # (no, yes): text before the tags, 2, 20
    "no tags at all",  # (no, no): the whole text is the evidence (D9), 4, 10
    "<reason>cut off",  # (no, no): cut inside the reasoning, empty evidence counted as 1 token (D14), 0, 40
]
COPYING_OUTPUTS = ["<reason>r</reason><extract>" + " ".join(["w"] * 36) + "</extract>"] * 4  # CR 40/36 each


def test_the_measures_are_counted_as_table_2_counts_them(word_tokenizer):
    measured = measure(_rows(4), MIXED_OUTPUTS, word_tokenizer)
    assert measured == {
        "questions": 4,
        "well_formatted": {"strict": 1, "lenient": 2},
        "format_rate": {"strict": 0.25, "lenient": 0.5},
        "evidence_tokens": {"mean": 2.5, "median": 3.0},  # (4 + 2 + 4 + 0) / 4; median of 0, 2, 4, 4
        "evidence_words": {"mean": 2.5, "median": 3.0},
        "passage_tokens": {"mean": 40.0, "median": 40.0},
        "empty_evidence": 1,
        "cr": {"mean_per_item": 20.0, "ratio_of_sums": 160 / 11},  # (10 + 20 + 10 + 40) / 4; 4 x 40 / (4+2+4+1)
    }
    with pytest.raises(ValueError, match="4 rows but 3 outputs"):
        measure(_rows(4), MIXED_OUTPUTS[:3], word_tokenizer)


def test_the_paper_cr_is_table_2s_eviomni_cell_at_the_checkpoints_size():
    cfg = load_profile("paper-1p5b")
    assert paper_cr(cfg, ONE_POINT_FIVE).value == 38.1 and paper_cr(cfg, SEVEN).value == 17.9
    assert paper_cr(cfg, ONE_POINT_FIVE).cell == \
        "Table 2, NQ, 1.5B, EviOmni, CR = 38.1x (data/paper/table02_main.csv, line 28)"
    assert "line 109" in paper_cr(cfg, SEVEN).cell
    assert paper_cr(cfg, "some/other-checkpoint") is None


def test_every_released_checkpoint_a_profile_uses_is_checked():
    assert checked_references(load_profile("paper-1p5b")) == {  # its agents use the 7B extractor (D143)
        ONE_POINT_FIVE: "models.released_extractor", SEVEN: "agentic.extractor"}
    assert checked_references(load_profile("paper-7b")) == {SEVEN: "models.released_extractor"}
    assert checked_references(load_profile("gpu-smoke")) == {ONE_POINT_FIVE: "models.released_extractor"}
    assert checked_references(load_profile("tiny")) == {}


def test_the_paper_profiles_refuse_below_the_floors_and_the_cpu_profiles_only_report():
    for name in profile_names():
        check = load_profile(name).released_check
        if name.startswith(("paper-", "gpu-smoke", "released-")):
            assert (check.dataset, check.split, check.questions) == ("nq", "dev", 100), name
            assert (check.min_format_rate, check.cr_factor) == (0.8, 4.0), name
            assert check.paper_sizes == {ONE_POINT_FIVE: "1.5B", SEVEN: "7B"}, name
        else:  # random or untrained stand-ins fail any real floor
            assert check.min_format_rate is None and check.cr_factor is None, name


def test_a_check_below_its_floors_refuses_with_the_numbers_and_the_keys(word_tokenizer, tmp_path, monkeypatch):
    cfg = load_profile("paper-1p5b")
    papers = {ref: paper_cr(cfg, ref) for ref in (ONE_POINT_FIVE, SEVEN)}
    below_format = assess(cfg, ONE_POINT_FIVE, "models.released_extractor", _rows(4), MIXED_OUTPUTS, word_tokenizer,
                          papers[ONE_POINT_FIVE])
    assert below_format["floors"] == {"format_check": "lenient", "min_format_rate": 0.8,
                                      "cr_band": [38.1 / 4, 38.1 * 4]}
    assert below_format["failures"] == [  # CR 20.0x lies in [9.5x, 152.4x]: only the format rate fails
        "format rate 0.50 (2/4 outputs pass the lenient check of repro.formulas.tags) is below "
        "params.yaml: profiles.paper-1p5b.released_check.min_format_rate = 0.8"]
    copying = assess(cfg, SEVEN, "agentic.extractor", _rows(4), COPYING_OUTPUTS, word_tokenizer, papers[SEVEN])
    assert copying["format_rate"]["lenient"] == 1.0
    assert copying["failures"] == [  # Table 2's 17.9x / 4 = 4.475x: a copy of the passages is below it
        "CR 1.1x (mean per item, Table 2's column; ratio of sums 1.1x) is outside [4.5x, 71.6x], the paper's CR "
        "divided and multiplied by params.yaml: profiles.paper-1p5b.released_check.cr_factor"]
    report = check_report(cfg, 4, [below_format, copying])
    assert not report["passed"]

    monkeypatch.chdir(tmp_path)
    record = released_dir(cfg.name) / RECORD
    record.parent.mkdir(parents=True)
    record.write_text('{"reference": "HIT-TMG/EviOmni-nq_train-1.5B", "fingerprint": "an earlier run"}')
    with pytest.raises(ReleasedCheckError) as refused:
        write_stage(cfg, {"reference": ONE_POINT_FIVE, "fingerprint": "f"}, report)
    assert not record.exists(), "a failed check leaves no passing record"
    message = str(refused.value)
    assert message == refusal(report, released_dir(cfg.name) / REPORT_MD)
    assert message.startswith(f"released_check: {ONE_POINT_FIVE} (models.released_extractor) on 4 nq dev questions: "
                              "format rate 0.50")
    assert f"{SEVEN} (agentic.extractor) on 4 nq dev questions: CR 1.1x" in message
    assert "not published" in message and "digest ambiguity 53" in message
    assert json.loads((released_dir(cfg.name) / REPORT).read_text()) == report
    markdown = (released_dir(cfg.name) / REPORT_MD).read_text()
    assert markdown.startswith("# Released checkpoints checked before use: REFUSED")
    assert "| format rate (lenient) | 0.50 (2/4) | >= 0.8 |" in markdown
    assert "| CR (mean per item, Table 2's column) | 20.0x | in [9.5x, 152.4x] |" in markdown
    assert "Table 2, NQ, 1.5B, EviOmni, CR = 38.1x" in markdown


def test_null_floors_report_and_write_the_record_beside_the_report(word_tokenizer, tmp_path, monkeypatch):
    cfg = load_profile("ci")
    entry = assess(cfg, "a/stand-in", "models.released_extractor", _rows(4), MIXED_OUTPUTS, word_tokenizer, None)
    assert entry["passed"] and entry["failures"] == [] and entry["paper"] is None
    assert entry["floors"] == {"format_check": "lenient", "min_format_rate": None, "cr_band": None}
    assert entry["cr"]["mean_per_item"] == 20.0  # measured all the same
    monkeypatch.chdir(tmp_path)
    record = {"reference": "a/stand-in", "fingerprint": "f"}
    path = write_stage(cfg, record, check_report(cfg, 4, [entry]))
    assert path == released_dir("ci") / RECORD and json.loads(path.read_text()) == record  # the record's shape
    assert json.loads((released_dir("ci") / REPORT).read_text())["passed"] is True
    markdown = (released_dir("ci") / REPORT_MD).read_text()
    assert markdown.startswith("# Released checkpoints checked before use: reported only")  # not "passed"
    assert "no Table 2 cell for this checkpoint" in markdown and "| format rate (lenient) | 0.50 (2/4) |  |" in markdown


def test_the_stage_runs_the_check_through_the_evaluation_backend(tmp_path, tiny_llama_dir, monkeypatch):
    """The stage on ci with the random Llama standing in for the released checkpoint: Table 14 on ci's two seeded dev
    questions, decoded by the transformers backend; report only, then refused under a real floor."""
    model = str(tiny_llama_dir)  # ci's extractor (whose tokenizer counts the lengths) and the released stand-in
    params = _params(tmp_path, "released_extractor", extractor=model, released_extractor=model)
    cfg = load_profile("ci", params)
    monkeypatch.chdir(tmp_path)  # the stage reads ./params.yaml and ./data/ci/retrieval, writes under ./data
    write_jsonl(layout.contexts_path(cfg, "fanoutqa", "dev"), _rows(3))
    monkeypatch.setattr(preflight, "require", lambda cfg, stage: None)  # the stage's own check, not the preflight's
    main(["--profile", "ci"])
    record = json.loads((released_dir("ci") / RECORD).read_text())
    assert record == checkpoint_record(cfg)
    report = json.loads((released_dir("ci") / REPORT).read_text())
    (checked,) = report["checkpoints"]
    assert report["passed"] and report["questions"] == checked["questions"] == 2  # released_check.questions
    assert checked["model"] == f"{record['fingerprint']}@float32"  # the id eviomni_released's records carry
    assert checked["format_rate"]["lenient"] == 0.0  # 8 new tokens cannot hold the tags
    assert checked["passage_tokens"]["mean"] > 40  # SmolLM2's tokenizer, not words

    edited = yaml.safe_load(params.read_text())
    edited["profiles"]["ci"]["released_check"]["min_format_rate"] = 0.8
    params.write_text(yaml.safe_dump(edited, sort_keys=False))
    with pytest.raises(SystemExit, match=r"format rate 0\.00 \(0/2 outputs .*profiles\.ci\.released_check\."
                                         r"min_format_rate = 0\.8"):
        main(["--profile", "ci"])
    assert not (released_dir("ci") / RECORD).exists()
    assert json.loads((released_dir("ci") / REPORT).read_text())["passed"] is False


def test_settings_that_cannot_be_checked_fail_before_any_model_loads(tmp_path, stand_in):
    cfg = load_profile("ci", _params(tmp_path, None, released_extractor=str(stand_in)))
    refs = checked_references(cfg)
    check = dataclasses.replace(cfg.released_check, cr_factor=4.0)
    with pytest.raises(ConfigError, match=r"profiles\.ci\.released_check\.paper_sizes: no Table 2 size for "
                                          r".*EviOmni-stand-in.*cr_factor: null"):
        run_check(dataclasses.replace(cfg, released_check=check), refs)
    check = dataclasses.replace(check, paper_sizes={str(stand_in): "1.5B"})
    with pytest.raises(ConfigError, match=r"released_check\.dataset: Table 2 has no EviOmni CR for FanOutQA"):
        run_check(dataclasses.replace(cfg, released_check=check), refs)
    with pytest.raises(ConfigError, match=r"profiles\.ci\.released_check: missing, but models\.released_extractor"):
        run_check(dataclasses.replace(cfg, released_check=None), refs)


@pytest.mark.parametrize("change, message", [
    ({"min_format_rate": 1.5}, r"released_check: need questions >= 1, 0 < min_format_rate <= 1 and cr_factor > 1"),
    ({"cr_factor": 1}, r"released_check: need questions >= 1"),
    ({"paper_sizes": {"a/b": "3B"}}, r"profiles\.ci\.released_check\.paper_sizes\.a/b: '3B' is not one of"),
    ({"floor": 0.8}, r"profiles\.ci\.released_check: unknown key\(s\) \['floor'\]"),
])
def test_the_check_settings_are_validated_with_their_key(change, message):
    params = read_params()
    params["profiles"]["ci"]["released_check"].update(change)
    with pytest.raises(ConfigError, match=message):
        _build(Profile, {"name": "ci", **params["profiles"]["ci"]}, "profiles.ci")


# --- dvc.yaml: what each evaluation stage needs ---


def _upstream(tmp_path: Path, eviomni: str) -> dict[str, set[str]]:
    """For each evaluation stage and Table 3's, the stages `dvc repro <stage>` runs before it (DVC's own graph, ci
    profile)."""
    from dvc.repo import Repo

    repo_dir = tmp_path / eviomni.replace("/", "_")
    repo_dir.mkdir()
    params = yaml.safe_load(_params(tmp_path, eviomni, released_extractor="some/dir").read_text())
    (repo_dir / "params.yaml").write_text(yaml.safe_dump({**params, "profile": "ci"}, sort_keys=False))
    shutil.copy(ROOT / "dvc.yaml", repo_dir / "dvc.yaml")
    Repo.init(str(repo_dir), no_scm=True)
    with Repo(str(repo_dir)) as repo:
        graph = repo.index.graph
        by_name = {stage.name: stage for stage in graph}
        return {name: {stage.name for stage in nx.descendants(graph, by_name[name])}
                for name in [*EVALUATION_STAGES, "ablation_answer_rewards"]}


def test_under_the_switch_no_evaluation_stage_needs_the_grpo_run(tmp_path):
    released = _upstream(tmp_path, "released_extractor")
    trained = _upstream(tmp_path, "train/eviomni")
    for stage in EVALUATION_STAGES:
        assert "released_extractor" in released[stage], stage
        assert not {"train_eviomni", "format_warmup"} & released[stage], (stage, released[stage])
        assert {"train_eviomni", "format_warmup"} <= trained[stage], (stage, trained[stage])
        assert "released_extractor" in trained[stage], stage  # its check runs first either way (D179)
    for upstream in (released, trained):  # Table 3 trains under either switch; its reference row may be the main run
        assert "train_eviomni" in upstream["ablation_answer_rewards"]  # (D165)
        assert "released_extractor" not in upstream["ablation_answer_rewards"]
