"""The per-token int8 rewrite on a tiny hand-made graph, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from memories.integrations._onnx_int8 import quantize_activations_per_token

from tests import needs

onnx = pytest.importorskip("onnx", reason=needs.extra("onnx"))
ort = pytest.importorskip("onnxruntime", reason=needs.extra("onnxruntime"))


def two_layer_model(w1: np.ndarray, w2_q: np.ndarray, w2_scale: np.ndarray) -> bytes:
    """y = (x @ w1) @ (w2_q * w2_scale), gram = y @ yᵀ: an fp32 and an int8-stored weight."""
    h, tp, nh = onnx.helper, onnx.TensorProto, onnx.numpy_helper
    graph = h.make_graph(
        [
            h.make_node("MatMul", ["x", "w1"], ["hidden"]),
            h.make_node("Cast", ["w2_q"], ["w2_f"], to=tp.FLOAT),
            h.make_node("Mul", ["w2_f", "w2_scale"], ["w2"]),
            h.make_node("MatMul", ["hidden", "w2"], ["y"]),
            h.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1]),
            # A product of two activations, which must stay in fp32.
            h.make_node("MatMul", ["y", "yt"], ["gram"]),
        ],
        "tiny",
        [h.make_tensor_value_info("x", tp.FLOAT, ["batch", "seq", w1.shape[0]])],
        [
            h.make_tensor_value_info("y", tp.FLOAT, None),
            h.make_tensor_value_info("gram", tp.FLOAT, None),
        ],
        [nh.from_array(w1, "w1"), nh.from_array(w2_q, "w2_q"), nh.from_array(w2_scale, "w2_scale")],
    )
    # ir_version 8: onnxruntime may not read the newest IR the onnx package writes.
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    return bytes(model.SerializeToString())


def session(model: bytes, tensors: dict[str, np.ndarray] | None = None) -> ort.InferenceSession:
    """A session of ``model``, given the tensors the rewrite left out of it to read in place."""
    options = ort.SessionOptions()
    tensors = tensors or {}
    values = [ort.OrtValue.ortvalue_from_numpy(t) for t in tensors.values()]
    options.add_external_initializers(list(tensors), values)
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def run(
    model: bytes, x: np.ndarray, tensors: dict[str, np.ndarray] | None = None
) -> list[np.ndarray]:
    return list(session(model, tensors).run(None, {"x": x}))


def random_model(rng: np.random.Generator) -> bytes:
    """The two-layer model with random weights, its int8 ones over the whole range."""
    return two_layer_model(
        rng.normal(size=(16, 32)).astype(np.float32),
        rng.integers(-127, 128, size=(32, 8)).astype(np.int8),
        rng.uniform(0.001, 0.01, size=(1, 8)).astype(np.float32),
    )


def test_weight_matmuls_become_int8_and_match_fp32_closely() -> None:
    rng = np.random.default_rng(0)
    model = random_model(rng)
    x = rng.normal(size=(3, 5, 16)).astype(np.float32)

    rewritten, count, tensors = quantize_activations_per_token(onnx, model)

    assert count == 2
    ops = [node.op_type for node in onnx.load_from_string(rewritten).graph.node]
    assert ops.count("MatMulInteger") == 2
    assert ops.count("MatMul") == 1, "the activation x activation product stays fp32"
    initializers = {i.name for i in onnx.load_from_string(rewritten).graph.initializer}
    # int8-stored weights are halved to 7 bits: a CPU without VNNI saturates on 8 (see the module)
    assert "int8act/w2_q/q7" in initializers and "w2_q" not in initializers
    graph = onnx.load_from_string(rewritten).graph
    (stored,) = [i for i in graph.initializer if i.name.endswith("/q7")]
    assert np.abs(tensors[stored.name]).max() <= 64
    assert "w1" not in initializers, "fp32 weights are replaced by int8 ones"
    for fp32, int8 in zip(run(model, x), run(rewritten, x, tensors), strict=True):
        assert np.linalg.norm(int8 - fp32) / np.linalg.norm(fp32) < 0.02


def test_a_row_gives_the_same_result_whatever_else_is_in_the_batch() -> None:
    rng = np.random.default_rng(1)
    model = two_layer_model(
        rng.normal(size=(16, 32)).astype(np.float32),
        rng.integers(-127, 128, size=(32, 8)).astype(np.int8),
        np.full((1, 8), 0.005, dtype=np.float32),
    )
    rewritten, _, tensors = quantize_activations_per_token(onnx, model)
    row = rng.normal(size=(1, 5, 16)).astype(np.float32)
    loud_neighbour = 100 * rng.normal(size=(1, 5, 16)).astype(np.float32)
    alone = run(rewritten, row, tensors)[0]
    together = run(rewritten, np.concatenate([row, loud_neighbour]), tensors)[0][:1]
    np.testing.assert_array_equal(alone, together)


def test_an_int8_lookup_table_is_read_in_int8_and_only_its_rows_dequantized() -> None:
    # MiniLM's word embeddings: Gather(Cast(int8 table) * scale). Folded at load, the fp32
    # table cost every session 47 MB and 0.08 s; the rewrite must give the very same rows.
    h, tp, nh = onnx.helper, onnx.TensorProto, onnx.numpy_helper
    rng = np.random.default_rng(2)
    table = rng.integers(-127, 128, size=(50, 6)).astype(np.int8)
    per_row = rng.uniform(0.001, 0.01, size=(50, 1)).astype(np.float32)
    per_column = rng.uniform(0.001, 0.01, size=(1, 6)).astype(np.float32)
    nodes = [h.make_node("Cast", ["table"], ["table_f"], to=tp.FLOAT)]
    for name in ("per_row", "per_column"):
        nodes += [
            h.make_node("Mul", ["table_f", name], [name + "_table"]),
            h.make_node("Gather", [name + "_table", "ids"], [name + "_rows"]),
        ]
    graph = h.make_graph(
        nodes,
        "lookup",
        [h.make_tensor_value_info("ids", tp.INT64, ["batch", "seq"])],
        [h.make_tensor_value_info(n + "_rows", tp.FLOAT, None) for n in ("per_row", "per_column")],
        [
            nh.from_array(v, n)
            for n, v in [("table", table), ("per_row", per_row), ("per_column", per_column)]
        ],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    original = model.SerializeToString()

    rewritten, _, tensors = quantize_activations_per_token(onnx, original)

    gathered = [
        n.input[0] for n in onnx.load_from_string(rewritten).graph.node if n.op_type == "Gather"
    ]
    # Rows of int8 and their scales; a table scaled per column is left as it was.
    assert sorted(gathered) == ["per_column_table", "per_row", "table"]
    ids = rng.integers(0, 50, size=(3, 7)).astype(np.int64)
    before = session(original).run(None, {"ids": ids})
    after = session(rewritten, tensors).run(None, {"ids": ids})
    for old, new in zip(before, after, strict=True):
        np.testing.assert_array_equal(old, new)


def test_int8_weights_are_halved_rounding_half_to_even_for_every_value() -> None:
    # The halving runs in int8 arithmetic; it must give what np.round(w / 2) gives.
    every = np.arange(-128, 128, dtype=np.int8).reshape(32, 8)
    model = two_layer_model(np.eye(16, 32, dtype=np.float32), every, np.ones((1, 8), np.float32))
    _, _, tensors = quantize_activations_per_token(onnx, model)
    np.testing.assert_array_equal(tensors["int8act/w2_q/q7"], np.round(every / 2).astype(np.int8))
    np.testing.assert_array_equal(tensors["int8act/w2_scale/x2"], np.full((1, 8), 2.0))


def test_weights_stored_as_typed_fields_are_rewritten_like_raw_bytes() -> None:
    # The rewrite reads tensors itself (no onnx.numpy_helper): float_data and int32_data too.
    rng = np.random.default_rng(3)
    raw = random_model(rng)
    typed = onnx.load_from_string(raw)
    for init in typed.graph.initializer:
        value = onnx.numpy_helper.to_array(init)
        init.ClearField("raw_data")
        if value.dtype == np.float32:
            init.float_data.extend(value.ravel().tolist())
        else:
            init.int32_data.extend(value.ravel().tolist())
    x = rng.normal(size=(2, 5, 16)).astype(np.float32)

    from_raw = quantize_activations_per_token(onnx, raw)
    from_typed = quantize_activations_per_token(onnx, typed.SerializeToString())

    assert from_raw[1] == from_typed[1] == 2
    for a, b in zip(
        run(from_raw[0], x, from_raw[2]), run(from_typed[0], x, from_typed[2]), strict=True
    ):
        np.testing.assert_array_equal(a, b)
