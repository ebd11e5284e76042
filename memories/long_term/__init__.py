"""Long-term memories: semantic (vector, profile, collection), episodic, procedural.

Each keeps its data in a store (:mod:`memories.stores`) by namespace, so it
outlives the conversation. :mod:`~memories.long_term.indexed` is what the
memories over a vector backend share; :mod:`~memories.long_term.stored` what
the memories of one versioned document per namespace share.
"""
