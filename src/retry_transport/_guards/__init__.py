"""What admits or refuses an attempt: ``seam`` (what the core asks of a guard, and the
``Guard`` base class with its defaults), then each guard beside its component:
``breaker``, ``budget``, ``cooldowns`` and ``throttle``."""
