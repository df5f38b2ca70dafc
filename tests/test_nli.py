"""The NLI scorer of R_EQR (repro.nli) on the embedded stand-in: MiniLM with an untrained 3-label head."""

import pytest

from repro import assets
from repro.nli import NLI_LABELS, NLIScorer, entailment_index


def test_entailment_index_reads_the_label_map():
    assert entailment_index({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}) == 2
    assert entailment_index({"0": "entailment", "1": "not_entailment"}) == 0
    with pytest.raises(ValueError, match="exactly one entailment label"):
        entailment_index({0: "LABEL_0", 1: "LABEL_1"})


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    out = tmp_path_factory.mktemp("nli-untrained-minilm")
    assets.build_nli_standin(out)
    return out


def test_standin_runs_the_nli_code_path_with_mnli_labels(standin):
    nli = NLIScorer(str(standin), batch_size=2)
    assert nli.entailment == 2 and nli.model.config.id2label == dict(enumerate(NLI_LABELS))
    premises = ["Jupiter is the largest planet in the solar system.", "Jupiter is a planet.", ""]
    claims = ['Jupiter is the answer to the question:"What is the largest planet in the solar system?"'] * 3
    scores = nli(premises, claims)
    assert len(scores) == 3 and all(0.0 < s < 1.0 for s in scores)
    assert nli(premises[:1], claims[:1]) == pytest.approx(scores[:1], abs=1e-5)  # batching does not change a score
    with pytest.raises(ValueError, match="2 premises for 1 hypotheses"):
        nli(premises[:2], claims[:1])


def test_standin_is_an_embedded_asset_of_the_cpu_profiles():
    from repro.config import load_profile

    assert "nli-untrained-minilm" in assets.referenced_assets(load_profile("ci"))
    assert "NOT an NLI model" in assets.EMBEDDED["nli-untrained-minilm"].description


def test_training_loads_the_nli_model_only_for_designs_that_need_it(standin):
    import dataclasses

    from repro.config import load_profile
    from repro.train.grpo.run import nli_scorer

    cfg = load_profile("ci")
    assert cfg.rewards.design == "eviomni" and nli_scorer(cfg, cfg.rewards) is None
    evinote = dataclasses.replace(cfg.rewards, design="evinote", nli_model=str(standin))
    scorer = nli_scorer(cfg, evinote)
    assert isinstance(scorer, NLIScorer) and scorer.device == "cpu"  # the training process's device (PartialState)
    with pytest.raises(ValueError, match=r"profiles\.ci\.rewards\.nli_model must name an NLI model"):
        nli_scorer(cfg, dataclasses.replace(evinote, nli_model=None))
