"""The faces users meet memories through: the CLI and its demo, LCEL runnables, agent turns, tools.

The agent middleware and the LangGraph pieces are adapters to outside
systems and live in :mod:`memories.integrations`.
"""
