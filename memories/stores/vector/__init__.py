"""Vector backends: the protocol, Chroma behind an outbox and a writer, any LangChain store.

Importing this package imports Chroma only when a store is first used.
"""
