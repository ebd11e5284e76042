"""Adapters from memories to outside systems: tiktoken, ONNX embeddings, Chroma, model providers."""
