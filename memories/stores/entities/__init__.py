"""The entity stores: what the entity memories keep (summaries, triples, the temporal graph)."""
