"""Episodic memory: past answers the user liked, recalled as few-shot examples.

Every turn is stored as an example; the user's thumbs-up (``feedback``) marks
the good ones, and with ``min_feedback`` only those are shown. The same
memory is a LangChain example selector, so it plugs into
``FewShotChatMessagePromptTemplate`` as LangChain's selectors do.

Needs the ``chroma`` extra: ``pip install -e '.[chroma]'`` in the checkout.

    python examples/few_shot_examples.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from langchain_core.prompts import ChatPromptTemplate, FewShotChatMessagePromptTemplate

from memories import ExampleMemory
from memories.faces.scripts import needs

TURNS = [
    ("Summarise: the meeting moved to Friday.", "Meeting -> Friday.", 1.0),
    (
        "Summarise: the budget was cut by 10%.",
        "The budget, which had been discussed at length "
        "by the whole committee over several sessions, was in the end reduced by ten percent.",
        0.0,
    ),
    ("Summarise: Ana joins the team on Monday.", "Ana joins Monday.", 1.0),
    ("Translate 'hello' to French.", "Bonjour.", 1.0),
]


def main(workdir: Path) -> None:
    memory = ExampleMemory(
        path=str(workdir / "chroma"),  # embedded Chroma, offline MiniLM embeddings
        namespace=("agents", "summariser"),
        k=2,
        min_feedback=0.5,  # only answers the user rated well
    )
    for question, answer, rating in TURNS:
        memory.save_context({"input": question}, {"output": answer})
        memory.feedback(memory.last_turn_id, rating)  # the user's thumbs up or down

    shown = memory.load_memory_variables({"input": "Summarise: the office closes at 6."})
    print("What the prompt gets:\n" + shown["examples"])

    few_shot = FewShotChatMessagePromptTemplate(
        example_selector=memory,
        example_prompt=ChatPromptTemplate.from_messages([("human", "{input}"), ("ai", "{output}")]),
        input_variables=["input"],
    )
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Summarise tersely."), few_shot, ("human", "{input}")]
    )
    print("\nAs a few-shot chat prompt:")
    for message in prompt.invoke({"input": "Summarise: lunch is at noon."}).to_messages():
        print(f"  {message.type}: {message.content}")
    memory.close()


if __name__ == "__main__":
    with needs("chroma"), tempfile.TemporaryDirectory(prefix="memories-example-") as folder:
        main(Path(folder))
