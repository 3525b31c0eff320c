"""What admits or refuses an attempt: ``seam`` (the protocol the core calls, and the
adapters of the breaker, budget and throttle), ``breaker``, ``budget``, ``cooldowns`` and
``throttle``."""
