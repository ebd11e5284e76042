"""Adapters from memories to outside systems: ONNX embeddings, Chroma, LangChain agents, LangGraph.

Installed as ``memories.integrations``; the core (``memories``) never imports them at import time.
"""
