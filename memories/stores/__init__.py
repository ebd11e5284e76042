"""Where memories keep their data: chat histories, SQL, vector backends, recall, the document store.

Nothing here knows a memory class: a memory imports a store, never the reverse.
"""
