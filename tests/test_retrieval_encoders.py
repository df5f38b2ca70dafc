"""Text encoders: the real all-MiniLM-L6-v2 against sentence-transformers, and the DPR / E5 code paths on
tiny randomly initialised models built from a config with the MiniLM tokenizer."""

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel, DPRConfig, DPRContextEncoder, DPRQuestionEncoder

from repro.assets import MINILM_WEIGHTS
from repro.retrieval.encoders import TextEncoder, load_encoder_model

MINILM = str(MINILM_WEIGHTS.locate().parent)
TEXTS = ["The Mona Lisa is a portrait painting by Leonardo da Vinci.",
         "World War II ended in 1945.",
         "Paris is the capital and largest city of France, on the Seine."]
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-bert")
    tokenizer = AutoTokenizer.from_pretrained(MINILM)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size, **TINY)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def _tiny_dpr(path, cls):
    tokenizer = AutoTokenizer.from_pretrained(MINILM)
    torch.manual_seed(1)
    cls(DPRConfig(vocab_size=tokenizer.vocab_size, **TINY)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def test_minilm_mean_pooling_matches_sentence_transformers():
    from sentence_transformers import SentenceTransformer

    ours = TextEncoder(MINILM, pooling="mean", normalize=True, batch_size=2).encode(TEXTS, progress=False)
    reference = SentenceTransformer(MINILM, device="cpu").encode(TEXTS, normalize_embeddings=True)
    assert ours.shape == (3, 384) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, reference, atol=1e-5)


def test_batching_and_length_sorting_do_not_change_vectors(tiny_bert):
    enc = TextEncoder(tiny_bert, pooling="mean", batch_size=1)
    one_by_one = enc.encode(TEXTS, progress=False)
    enc.batch_size = 3
    np.testing.assert_allclose(enc.encode(TEXTS, progress=False), one_by_one, atol=1e-5)


def test_two_devices_encode_one_devices_batches_in_input_order(tiny_bert, tmp_path):
    """Two copies of the model ("cpu" twice here; "cuda:0", "cuda:1" on a GPU node), one thread each, are dealt
    the length-sorted batches in turn: the vectors are one device's, texts and (title, text) pairs alike."""
    texts = [TEXTS[i % 3][: 10 + 7 * i] for i in range(11)]  # 11 texts of different lengths: 6 batches of 2
    one, two = (TextEncoder(tiny_bert, pooling="mean", batch_size=2, devices=d) for d in (None, ["cpu", "cpu"]))
    assert one.devices == ["cpu"] and len(two.replicas) == 2 and two.replicas[1][1] is not two.model
    np.testing.assert_array_equal(two.encode(texts, progress=False), one.encode(texts, progress=False))
    ctx_dir = _tiny_dpr(tmp_path / "ctx", DPRContextEncoder)
    pairs = [(f"Title {i}", text) for i, text in enumerate(texts)]
    one, two = (TextEncoder(ctx_dir, pooling="pooler", normalize=False, batch_size=3, devices=d)
                for d in (None, ["cpu", "cpu"]))
    np.testing.assert_array_equal(two.encode(pairs, progress=False), one.encode(pairs, progress=False))


def test_pooling_and_prefix_change_the_vectors(tiny_bert):
    cls = TextEncoder(tiny_bert, pooling="cls", normalize=False).encode(TEXTS, progress=False)
    mean = TextEncoder(tiny_bert, pooling="mean", normalize=False)
    tokenizer, model = load_encoder_model(tiny_bert)
    with torch.inference_mode():
        hidden = model(**tokenizer(TEXTS[:1], return_tensors="pt")).last_hidden_state
    np.testing.assert_allclose(cls[0], hidden[0, 0].numpy(), atol=1e-5)
    np.testing.assert_allclose(mean.encode(TEXTS[:1], progress=False)[0], hidden[0].mean(0).numpy(), atol=1e-5)
    plain, prefixed = mean.encode(TEXTS[:1], progress=False), mean.encode(TEXTS[:1], prefix="query: ", progress=False)
    assert not np.allclose(plain, prefixed)
    normalized = TextEncoder(tiny_bert, pooling="mean", normalize=True).encode(TEXTS, progress=False)
    np.testing.assert_allclose(np.linalg.norm(normalized, axis=1), 1.0, atol=1e-5)


def test_dpr_towers_load_as_their_own_classes_and_pool_the_cls_vector(tmp_path):
    ctx_dir = _tiny_dpr(tmp_path / "ctx", DPRContextEncoder)
    q_dir = _tiny_dpr(tmp_path / "q", DPRQuestionEncoder)
    _, ctx = load_encoder_model(ctx_dir)
    _, question = load_encoder_model(q_dir)
    assert type(ctx) is DPRContextEncoder and type(question) is DPRQuestionEncoder
    encoder = TextEncoder(ctx_dir, pooling="pooler", normalize=False)
    pair = encoder.encode([("Mona Lisa", TEXTS[0])], progress=False)
    inputs = encoder.tokenizer("Mona Lisa", TEXTS[0], return_tensors="pt")
    with torch.inference_mode():
        expected = ctx(**inputs).pooler_output[0].numpy()
    np.testing.assert_allclose(pair[0], expected, atol=1e-5)
    assert inputs["token_type_ids"].max() == 1  # the (title, text) pair is one sequence pair


def test_unknown_pooling_is_rejected(tiny_bert):
    with pytest.raises(ValueError, match="pooling"):
        TextEncoder(tiny_bert, pooling="max")
