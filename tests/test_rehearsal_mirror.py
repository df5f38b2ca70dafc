"""The rehearsal's hub mirror (repro.ops.rehearsal.mirror): every repo the paper profiles name, in the hub's layout,
each model loading with its real class (the `.bin`-only ones after a `weights_only` conversion), FlashRAG's files as the
loaders read them, Search-R1's e5 index over the mirror's wiki-18, and the same bytes from a second build."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BIN_ONLY_REPOS, REHEARSAL_MIRROR

from repro.assets import MODEL_SECTIONS, _strings, is_hub_id
from repro.config import PARAMS_FILE, load_profile
from repro.ops.rehearsal.content import PARAGRAPHS, QUESTIONS
from repro.ops.rehearsal.files import commit_of
from repro.ops.rehearsal.mirror import MANIFEST, build_mirror
from repro.ops.rehearsal.repos import CAUSAL_LMS, E5_INDEX
from repro.ops.remote import LocalHub, bin_to_safetensors, needs

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(REHEARSAL_MIRROR)]
ROOT = Path(__file__).resolve().parents[1]
PAPER = ("paper-1p5b", "paper-7b")


def repo_dir(root: Path, repo: str, dataset: bool = False) -> Path:
    base = root / ("datasets" if dataset else "") / repo
    return base / "resolve" / (base / "refs" / "main").read_text()


def converted(source: Path, tmp_path: Path) -> Path:
    """A copy of a `.bin`-only repo converted as fetch converts it (`torch.load(weights_only=True)`, safetensors)."""
    assert not list(source.rglob("*.safetensors")), f"{source}: the hub repo ships no safetensors"
    target = tmp_path / source.parents[1].name  # the repo's name
    shutil.copytree(source, target)
    assert bin_to_safetensors(target, [str(p.relative_to(target)) for p in target.rglob("pytorch_model.bin")])
    return target


def paper_repos() -> set[str]:
    """Every hub id the paper profiles name (datasets included), and the AR study's local teacher that params.yaml
    offers in its `# local:` comment lines."""
    ids = set()
    for name in PAPER:
        cfg = load_profile(name)
        ids |= {s for section in MODEL_SECTIONS for s in _strings(getattr(cfg, section)) if is_hub_id(s)}
        ids |= {d.source for d in cfg.data.datasets if is_hub_id(d.source)}
    ids |= set(re.findall(r"#\s*local:\s*model:\s*(\S+)", (ROOT / PARAMS_FILE).read_text(encoding="utf-8")))
    return ids | {"PeterJinGo/wiki-18-corpus", "PeterJinGo/wiki-18-e5-index"}


def test_every_repo_the_paper_profiles_name_is_there_with_its_main_branch(rehearsal_mirror):
    root, manifest = rehearsal_mirror
    assert paper_repos() <= set(manifest["repos"])
    assert "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B" in paper_repos()
    hub = LocalHub(root)
    for repo, entry in manifest["repos"].items():
        assert hub.commit(repo, entry["repo_type"], "main") == entry["commit"]
        listing = hub.files(repo, entry["repo_type"], entry["commit"])
        assert {p: f.size for p, f in listing.items()} == {p: f["size"] for p, f in entry["files"].items()}
        assert commit_of({p: (repo_dir(root, repo, entry["repo_type"] == "dataset") / p).read_bytes()
                          for p in listing}) == entry["commit"]


def test_fetch_finds_every_file_the_paper_plans_name(rehearsal_mirror):
    root, _ = rehearsal_mirror
    hub = LocalHub(root)
    for name in PAPER:
        for row, patterns in needs(load_profile(name)):
            listing = hub.files(row.repo, row.repo_type, hub.commit(row.repo, row.repo_type, "main"))
            named = [p for p in patterns if not any(c in p for c in "*?[")]  # globs may match nothing
            assert set(named) <= set(listing), (row.repo, sorted(set(named) - set(listing)))
            assert any(any(Path(p).match(pattern) for pattern in patterns) for p in listing), row.repo


def test_the_bin_only_repos_hold_no_safetensors_and_the_others_do(rehearsal_mirror):
    root, manifest = rehearsal_mirror
    for repo, entry in manifest["repos"].items():
        if entry["repo_type"] == "model":
            has_safetensors = any(p.endswith(".safetensors") for p in entry["files"])
            assert has_safetensors == (repo not in BIN_ONLY_REPOS), repo
            assert "pytorch_model.bin" in entry["files"] or repo not in BIN_ONLY_REPOS


def test_the_chat_templates_are_the_hubs_as_trl_stores_them():
    from trl.chat_template_utils import deepseek_r1_distill_chat_template, qwen2_5_chat_template

    from repro.ops.rehearsal.templates import DEEPSEEK_R1_DISTILL_CHAT_TEMPLATE, QWEN2_5_CHAT_TEMPLATE

    assert QWEN2_5_CHAT_TEMPLATE == qwen2_5_chat_template
    assert DEEPSEEK_R1_DISTILL_CHAT_TEMPLATE == deepseek_r1_distill_chat_template


@pytest.mark.parametrize("spec", CAUSAL_LMS, ids=lambda s: s.repo.split("/")[1])
def test_each_causal_lm_loads_as_qwen2_and_applies_its_chat_template(rehearsal_mirror, spec):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = repo_dir(rehearsal_mirror[0], spec.repo)
    model = AutoModelForCausalLM.from_pretrained(path, use_safetensors=True)
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert type(model).__name__ == "Qwen2ForCausalLM" and model.dtype == torch.bfloat16
    assert model.config.hidden_size // model.config.num_attention_heads == 32  # vLLM's CPU attention (D92)
    assert len(tokenizer) <= model.config.vocab_size
    messages = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Who painted it?"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if spec.family == "r1-distill":
        assert text == "<｜begin▁of▁sentence｜>Answer briefly.<｜User｜>Who painted it?<｜Assistant｜><think>\n"
        assert tokenizer.eos_token == "<｜end▁of▁sentence｜>"
    else:
        assert text == ("<|im_start|>system\nAnswer briefly.<|im_end|>\n<|im_start|>user\nWho painted it?<|im_end|>\n"
                        "<|im_start|>assistant\n")
        assert tokenizer.convert_ids_to_tokens(model.config.eos_token_id) == tokenizer.eos_token
        assert tokenizer.decode(tokenizer(text)["input_ids"]) == text  # special tokens are single added tokens
    weights = [p for p in os.listdir(path) if p.endswith(".safetensors")]
    assert len(weights) == spec.shards
    out = model.generate(**tokenizer(text, return_tensors="pt"), max_new_tokens=2, do_sample=False)
    assert out.shape[1] == len(tokenizer(text)["input_ids"]) + 2


def test_the_encoders_load_through_the_projects_own_code(rehearsal_mirror, tmp_path):
    from sentence_transformers import SentenceTransformer

    from repro.baselines.recomp import load_encoder
    from repro.nli import NLIScorer, entailment_index
    from repro.retrieval.encoders import TextEncoder, load_encoder_model

    root = rehearsal_mirror[0]
    for repo, architecture in [("facebook/dpr-question_encoder-single-nq-base", "DPRQuestionEncoder"),
                               ("facebook/dpr-ctx_encoder-single-nq-base", "DPRContextEncoder")]:
        tokenizer, model = load_encoder_model(str(converted(repo_dir(root, repo), tmp_path / architecture)))
        assert type(model).__name__ == architecture
        assert model(**tokenizer(["who wrote it"], return_tensors="pt")).pooler_output.shape == (1, 64)
    e5 = TextEncoder(str(repo_dir(root, "intfloat/e5-base-v2")), "mean")
    assert e5.encode(["who wrote it"], "query: ", progress=False).shape == (1, 64)
    minilm = SentenceTransformer(str(repo_dir(root, "sentence-transformers/all-MiniLM-L6-v2")), device="cpu")
    assert [type(m).__name__ for m in minilm] == ["Transformer", "Pooling", "Normalize"]
    recomp = load_encoder(str(converted(repo_dir(root, "fangyuan/nq_extractive_compressor"), tmp_path / "r")), "cpu")
    assert recomp.encode(["who wrote it"]).shape == (1, 64)
    nli = NLIScorer(str(converted(repo_dir(root, "microsoft/deberta-v2-xlarge-mnli"), tmp_path / "nli")))
    assert type(nli.model).__name__ == "DebertaV2ForSequenceClassification"
    assert dict(nli.model.config.id2label) == {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}
    assert entailment_index(nli.model.config.id2label) == 2 and 0 < nli(["Paris is in France."], ["Paris."])[0] < 1


def test_gpt2_and_llmlingua2_load_with_their_real_classes(rehearsal_mirror):
    from transformers import AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer

    from repro.baselines.llmlingua2 import check_model_name

    gpt2 = repo_dir(rehearsal_mirror[0], "openai-community/gpt2")
    model, info = AutoModelForCausalLM.from_pretrained(gpt2, use_safetensors=True, output_loading_info=True)
    tokenizer = AutoTokenizer.from_pretrained(gpt2)
    assert type(model).__name__ == "GPT2LMHeadModel" and not any(info.values())  # GPT2Model's keys, as on the hub
    assert tokenizer.eos_token == "<|endoftext|>" and tokenizer.eos_token_id == len(tokenizer) - 1
    llmlingua = repo_dir(rehearsal_mirror[0], "microsoft/llmlingua-2-xlm-roberta-large-meetingbank")
    check_model_name(str(llmlingua.parents[1]))  # the repo's name makes llmlingua merge XLM-R's pieces into words
    model = AutoModelForTokenClassification.from_pretrained(llmlingua, use_safetensors=True)
    tokenizer = AutoTokenizer.from_pretrained(llmlingua)
    assert type(model).__name__ == "XLMRobertaForTokenClassification" and model.config.num_labels == 2
    assert type(tokenizer).__name__ == "XLMRobertaTokenizer" and len(tokenizer) == model.config.vocab_size
    assert model(**tokenizer(["Paris is in France."], return_tensors="pt")).logits.shape[-1] == 2


def corpus(root: Path) -> list[dict]:
    raw = gzip.decompress((repo_dir(root, "PeterJinGo/wiki-18-corpus", dataset=True) / "wiki-18.jsonl.gz").read_bytes())
    return [json.loads(line) for line in raw.decode().split("\n") if line]


def test_flashrag_files_read_as_the_profiles_datasets_and_answers_are_in_the_corpus(rehearsal_mirror):
    from repro.data.answers import has_answer
    from repro.data.corpus import split_contents
    from repro.data.loaders import distractor_passages, read_flashrag

    root = rehearsal_mirror[0]
    passages = corpus(root)
    assert [p["id"] for p in passages] == [str(i) for i in range(len(passages))]
    assert all(p["contents"].startswith('"') and '"\n' in p["contents"] for p in passages)
    texts = [split_contents(p["contents"])[1] for p in passages]
    flashrag = repo_dir(root, "RUC-NLPIR/FlashRAG_datasets", dataset=True)
    for spec in load_profile("paper-1p5b").data.datasets:
        for split in set(spec.splits.values()):
            rows = list(read_flashrag(flashrag / spec.name / f"{split}.jsonl", spec.setting))
            assert len(rows) == QUESTIONS[(spec.name, split)]
            assert all(any(has_answer(t, r["golden_answers"]) for t in texts) for r in rows), (spec.name, split)
            if spec.question_types:  # HotpotQA: bridge questions and the comparison ones the filter drops
                assert {r["metadata"]["type"] for r in rows} == {"bridge", "comparison"}
            if spec.setting == "distractor":
                for row in rows:
                    paragraphs = distractor_passages(row)
                    assert len(paragraphs) == PARAGRAPHS[spec.name]
                    assert sum(p["is_supporting"] for p in paragraphs) == 2
                    supporting = [p["contents"] for p in paragraphs if p["is_supporting"]]
                    assert any(has_answer(text, row["golden_answers"]) for text in supporting)


def test_the_e5_index_joins_into_one_search_r1_vector_per_passage(rehearsal_mirror, tmp_path):
    import faiss
    import numpy as np

    from repro.config import RetrieverConfig
    from repro.retrieval.dense import DenseRetriever

    root = rehearsal_mirror[0]
    parts = repo_dir(root, "PeterJinGo/wiki-18-e5-index", dataset=True)
    joined = tmp_path / "e5_Flat.index"
    joined.write_bytes((parts / "part_aa").read_bytes() + (parts / "part_ab").read_bytes())
    index = faiss.read_index(str(joined))
    passages = corpus(root)
    assert index.ntotal == len(passages) and index.metric_type == faiss.METRIC_INNER_PRODUCT
    cfg = RetrieverConfig(method="dense", query_encoder=str(repo_dir(root, "intfloat/e5-base-v2")), **E5_INDEX)
    retriever = DenseRetriever(cfg, cfg.query_encoder)
    expected = retriever.encode_passages([p["contents"] for p in passages[:3]], progress=False)
    np.testing.assert_allclose(index.reconstruct_n(0, 3), expected, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(index.reconstruct_n(0, len(passages)), axis=1), 1.0, atol=1e-5)


def test_a_second_build_in_another_process_is_byte_identical_and_a_rebuild_is_skipped(rehearsal_mirror, tmp_path):
    root, manifest = rehearsal_mirror
    assert build_mirror(root, seed=0, log=lambda _: None) == manifest  # up to date: nothing rebuilt
    again = tmp_path / "again"
    env = {**os.environ, "PYTHONHASHSEED": "123", "HF_HUB_OFFLINE": "1"}
    subprocess.run([sys.executable, "-m", "repro.ops.rehearsal", "mirror", str(again)], check=True, env=env, cwd=ROOT,
                   capture_output=True, timeout=600)
    assert json.loads((again / MANIFEST).read_text()) == manifest  # every file's sha256, every commit
    files = sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert all((root / f).read_bytes() == (again / f).read_bytes() for f in files)

