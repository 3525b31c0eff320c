"""A lock for the tests that prove a path takes no lock: it counts how often it is taken."""

from __future__ import annotations

import threading


class CountingLock:
    """A lock that counts how often it is taken."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.taken = 0

    def __enter__(self) -> bool:
        self.taken += 1
        return self._lock.__enter__()

    def __exit__(self, *exc_info: object) -> None:
        self._lock.__exit__(*exc_info)  # type: ignore[arg-type]
