"""An arm of the evidence experiment kept in git (issue #49, repro.studies.evidence_record): written from a finished
run, read back where the run is gone, and refused when its bytes, its key or its start's weights are not this
clone's; the placebo pairs with it; the manipulation check by hand."""

import dataclasses
import json
import shutil
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pandas as pd
import pytest

from repro.config import EvidenceConfig, load_profile
from repro.data import layout
from repro.io import InputError, read_json, read_parted, write_json, write_jsonl, write_text
from repro.studies import evidence_placebo as ep
from repro.studies import evidence_record as er
from repro.studies import evidence_seeds as es

ROOT = Path(__file__).resolve().parents[1]
ROWS = [{"id": "q1"}, {"id": "q2"}]
CI_WARMUP = load_profile("ci").train.format_warmup  # read before a test moves into its directory


def _model(path, name):
    """A directory `model_fingerprint` reads as a model: its config alone."""
    write_json(path / "config.json", {"name": name})
    return str(path)


def _items(name):
    return pd.DataFrame([{column: f"{name}-{row['id']}" if column in ("rollout", "o_e") else 0.5
                          for column in es.ITEM_COLUMNS} | {"id": row["id"]} for row in ROWS])


@pytest.fixture
def arm(tmp_path, monkeypatch):
    """A finished run of a two-seed arm in tmp_path: its start and seeds (model directories), each policy's items
    under its key, each seed's GRPO log."""
    cfg = load_profile("ci")  # from the repository's params.yaml, before the run's directory
    monkeypatch.chdir(tmp_path)
    cfg = dataclasses.replace(cfg, models=dataclasses.replace(cfg.models, extractor=_model(tmp_path / "base", "base")),
                              train=dataclasses.replace(cfg.train, format_warmup=None),
                              evidence=EvidenceConfig(seeds=[0, 1], heldout_questions=len(ROWS)))
    policies = {es.START: cfg.models.extractor}
    for seed in cfg.evidence.seeds:
        run = es.seed_run(cfg, seed)
        policies[es.seed_name(seed)] = _model(run.extractor, f"seed {seed}")
        write_jsonl(run.train_log, [{"step": step, "group_reward_std": 0.1 * step + seed, "std_clip_frac": 0.5}
                                    for step in (1, 2)])
    for name, policy in policies.items():
        write_jsonl(es.scores_path(cfg, name), _items(name).to_dict("records"))
        write_text(es.scores_path(cfg, name).with_suffix(".key"), es.score_key(cfg, policy, ROWS))
    return cfg


def test_a_record_is_written_from_the_run_and_read_back_where_the_run_is_gone(arm):
    manifest = er.write_record(arm, ROWS)
    directory = er.record_dir(arm.name)
    assert directory == Path("data/measured/ci/evidence_seeds")
    assert read_json(directory / "manifest.json") == manifest
    assert list(manifest["policies"]) == ["start", "seed-0", "seed-1"] and manifest["logs"]["seed-1"]["steps"] == 2
    assert manifest["policies"]["seed-0"]["key"] == es.scores_path(arm, "seed-0").with_suffix(".key").read_text()
    assert manifest["machine"] == er.machine() and manifest["machine"]["torch_cpu_capability"]
    for name in manifest["policies"]:
        assert (directory / "scores" / f"{name}.jsonl").read_bytes() == es.scores_path(arm, name).read_bytes()
    start = arm.models.extractor
    layout.train_run_dir(arm.name, "evidence_seeds").rename("gone")  # the run's files are gone, the start is not

    items = er.recorded_items(arm, start, ROWS)
    assert list(items) == ["start", "seed-0", "seed-1"]
    for name, frame in items.items():
        pd.testing.assert_frame_equal(frame, _items(name), check_dtype=False)
    logs = er.recorded_logs(arm)
    assert [json.loads(line)["group_reward_std"] for line in logs["seed-1"].read_text().splitlines()] == [1.1, 1.2]
    assert er.recorded_items(dataclasses.replace(arm, name="other"), start, ROWS) is None  # no record at all


def test_a_record_is_refused_unless_its_bytes_key_and_start_are_this_clones(arm, tmp_path):
    er.write_record(arm, ROWS)
    start = arm.models.extractor
    other_start = _model(tmp_path / "other-start", "other")
    with pytest.raises(InputError, match=r"policies\.start\.weights are not those of this clone's start"):
        er.recorded_items(arm, other_start, ROWS)
    assert list(er.recorded_items(arm, other_start, ROWS, same_start=False)) == ["start", "seed-0", "seed-1"]
    with pytest.raises(InputError, match=r"policies\.start\.key is not this clone's key"):
        er.recorded_items(arm, start, ROWS[:1])  # other questions
    with patch.object(es, "scoring_code", lambda: "changed"), pytest.raises(InputError, match="key is not"):
        er.recorded_items(arm, start, ROWS)  # other scoring code
    scores = er.record_dir(arm.name) / "scores" / "seed-1.jsonl"
    scores.write_bytes(scores.read_bytes().replace(b"0.5", b"0.6", 1))
    with pytest.raises(InputError, match=r"seed-1\.jsonl: its sha256 is not"):
        er.recorded_items(arm, start, ROWS)
    scores.unlink()
    with pytest.raises(FileNotFoundError, match="the file is missing"):
        er.recorded_items(arm, start, ROWS)
    manifest = er.record_dir(arm.name) / "manifest.json"
    record = read_json(manifest)
    del record["logs"]["seed-0"]
    write_json(manifest, record)
    with pytest.raises(InputError, match=r"logs\.seed-0 is missing"):
        er.recorded_logs(arm)


def test_a_record_is_written_only_from_items_scored_for_the_policies_weights(arm):
    es.seed_run(arm, 1).extractor.joinpath("config.json").write_text('{"name": "retrained"}')
    with pytest.raises(FileNotFoundError, match="no scores of seed-1 for its weights"):
        er.write_record(arm, ROWS)
    assert not er.record_dir(arm.name).exists()


def test_the_placebo_pairs_with_the_recipes_record_where_the_recipes_run_is_gone(arm):
    control = dataclasses.replace(arm, name="ci-placebo",
                                  rewards=dataclasses.replace(arm.rewards, design="eviomni_placebo"),
                                  evidence=dataclasses.replace(arm.evidence, recipe_profile=arm.name))
    start = arm.models.extractor
    with patch.object(ep, "load_profile", lambda name: arm):
        from_run = ep.recipe_arm(control, start, ROWS)  # the recipe's run in this clone
        er.write_record(arm, ROWS)
        layout.train_run_dir(arm.name, "evidence_seeds").rename("gone")
        from_record = ep.recipe_arm(control, start, ROWS)
        assert list(ep.recipe_logs(control)) == ["seed-0", "seed-1"]
        for name, frame in from_run.items():
            pd.testing.assert_frame_equal(from_record[name], frame, check_dtype=False)
        shutil.rmtree(er.record_dir(arm.name))
        with pytest.raises(FileNotFoundError, match="no scores of the recipe arm's start .* and no record of the arm"):
            ep.recipe_arm(control, start, ROWS)


def test_a_control_from_another_cpu_scores_its_own_start_beside_the_records(arm, tmp_path):
    """D245: with `evidence.recipe_start: rescored` the record's start (other weights) is kept beside the control's
    own, which the control scores; with the default the control reuses the recipe's start."""
    control = dataclasses.replace(arm, name="ci-placebo",
                                  rewards=dataclasses.replace(arm.rewards, design="eviomni_placebo"),
                                  evidence=dataclasses.replace(arm.evidence, recipe_profile=arm.name))
    rescored = dataclasses.replace(control, evidence=dataclasses.replace(control.evidence, recipe_start="rescored"))
    assert not es.reuses_recipe_start(arm) and es.reuses_recipe_start(control)
    assert not es.reuses_recipe_start(rescored) and ep.arm_differences(arm, rescored) == []
    assert list(es.scored_policies(control)) == ["seed-0", "seed-1"]
    assert list(es.scored_policies(rescored)) == ["start", "seed-0", "seed-1"]
    er.write_record(arm, ROWS)
    layout.train_run_dir(arm.name, "evidence_seeds").rename("gone")
    own_start = _model(tmp_path / "this-cpu-start", "this cpu's rounding")
    with patch.object(ep, "load_profile", lambda name: arm):
        with pytest.raises(InputError, match="evidence.recipe_start: rescored"):
            ep.recipe_arm(control, own_start, ROWS)
        recipe = ep.recipe_arm(rescored, own_start, ROWS)
    pd.testing.assert_frame_equal(recipe["start"], _items("start"), check_dtype=False)


def test_an_arm_that_fitted_its_warm_up_records_the_adapter_a_control_on_another_cpu_merges(arm):
    """D246: the record keeps the warm-up's adapter (with each file's sha256); a control arm that takes it
    (`train.format_warmup.adapter`) differs from the recipe in no setting and names it as its start's source."""
    fitted = dataclasses.replace(arm, train=dataclasses.replace(arm.train, format_warmup=CI_WARMUP))
    adapter = layout.warmup_dir(fitted.name) / er.ADAPTER
    for name in er.ADAPTER_FILES:
        write_text(adapter / name, f"{name} of the warm-up")
    with patch("repro.train.grpo.warmup.starting_policy", lambda cfg, progress: cfg.models.extractor):
        manifest = er.write_record(fitted, ROWS)
    recorded = er.record_dir(fitted.name) / er.ADAPTER
    assert manifest["adapter"] == {"source": None, "files": {name: er.file_sha256(adapter / name)
                                                             for name in er.ADAPTER_FILES}}
    assert not (recorded / er.ADAPTER_WEIGHTS).exists()  # in parts: the repository tracks no file over 2 MiB
    assert er.adapter_sha256(recorded) == manifest["adapter"]["files"]
    for name in er.ADAPTER_FILES:
        assert read_parted(recorded / name) == (adapter / name).read_bytes()

    taken = dataclasses.replace(CI_WARMUP, adapter=str(recorded))
    control = dataclasses.replace(fitted, name="ci-placebo", train=dataclasses.replace(fitted.train,
                                                                                       format_warmup=taken),
                                  rewards=dataclasses.replace(fitted.rewards, design="eviomni_placebo"),
                                  evidence=dataclasses.replace(fitted.evidence, recipe_profile=fitted.name))
    assert ep.arm_differences(fitted, control) == []
    assert er.warmup_adapter(control) == (recorded, str(recorded))
    assert er.warmup_adapter(arm) == (None, None)  # no warm-up: nothing to record


def test_the_manipulation_check_by_hand():
    log = pd.DataFrame({"group_reward_std": [0.1, 0.3], "std_clip_frac": [0.0, 1.0]}, index=[1, 2])
    table = ep.manipulation_table({"recipe": {"seed-0": log, "seed-1": log * 2},
                                   "placebo": {"seed-0": log.iloc[:1], "seed-1": log.iloc[1:]}})
    assert table["seed"].tolist() == ["seed-0", "seed-1", "mean"] * 2
    recipe_mean = table[(table["arm"] == "recipe") & (table["seed"] == "mean")].iloc[0]
    assert recipe_mean["steps"] == 4
    assert np.isclose(recipe_mean["group_reward_std"], (0.2 + 0.4) / 2)  # seed means 0.2 and 0.4
    assert np.isclose(recipe_mean["std_clip_frac"], (0.5 + 1.0) / 2)
    placebo = table[table["arm"] == "placebo"].set_index("seed")
    assert placebo.loc["seed-1", "group_reward_std"] == pytest.approx(0.3)
    assert placebo.loc["mean", "group_reward_std"] == pytest.approx(0.2)


def test_the_records_in_git_are_intact():
    """Each committed arm (data/measured/): every file the manifest lists has its sha256, each items file holds its
    questions and each log its steps. (Whether this checkout's scoring code is the record's is checked where a
    control arm reads it: `recorded_items` refuses a record whose keys it does not reproduce.)"""
    root = ROOT / er.RECORDS
    manifests = sorted(root.glob(f"*/{es.STUDY}/{er.MANIFEST}"))
    assert manifests, f"no arm recorded under {root}"
    for path in manifests:
        manifest, directory = read_json(path), path.parent
        for name, entry in manifest["policies"].items():
            scores = directory / "scores" / f"{name}.jsonl"
            assert er.file_sha256(scores) == entry["sha256"], f"{scores} changed after it was recorded"
            assert len(scores.read_text(encoding="utf-8").splitlines()) == entry["questions"]
        for name, entry in manifest["logs"].items():
            log = directory / "logs" / f"{name}.jsonl"
            assert er.file_sha256(log) == entry["sha256"], f"{log} changed after it was recorded"
            assert len(log.read_text(encoding="utf-8").splitlines()) == entry["steps"]
        adapter = manifest.get("adapter")  # records before D246 have none
        if adapter is not None:
            source = ROOT / adapter["source"] if adapter["source"] else directory / er.ADAPTER
            assert er.adapter_sha256(source) == adapter["files"], f"{source} is not the adapter recorded"
