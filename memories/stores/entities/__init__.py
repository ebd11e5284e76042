"""The entity stores: what the entity memories keep, in one package.

- :mod:`.base`: what they share, a config form and one session's log in SQL;
- :mod:`.summaries`: a summary per entity name, every version kept
  (LangChain's ``BaseEntityStore`` interface; in memory, SQL, LangChain's stores);
- :mod:`.redis_summaries`: the same in Redis;
- :mod:`.triples`: knowledge-graph triples (LangChain's ``NetworkxEntityGraph``
  interface), in memory or SQL, every change logged;
- :mod:`.temporal_graph`: the temporal entity graph of ``EntityMemory``
  (entities, typed relations with the time each held) in the document store.
"""
