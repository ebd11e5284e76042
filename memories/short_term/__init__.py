"""Short-term memories: what a conversation shows of itself (buffer, window, tokens, summaries)."""
