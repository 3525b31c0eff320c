"""Where shared state lives: ``memory`` (the store protocol and ``MemoryStore``, one
process) and ``redis`` (``RedisStore``, a fleet)."""
