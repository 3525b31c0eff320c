"""Helpers for testing code that uses the retry transports, without waiting.

Inside :func:`retry_testing`, every ``RetryTransport`` and ``AsyncRetryTransport`` in the
process records its waits instead of sleeping them, draws its jitter from a seeded random
source, and can be made to try fewer (or exactly N) times::

    from retry_transport.testing import retry_testing

    def test_client_survives_a_blip(httpx_mock):
        httpx_mock.add_response(status_code=503)
        httpx_mock.add_response(json={"ok": True})
        with retry_testing(attempts=2) as log:
            assert my_api_call() == {"ok": True}
        assert len(log.waits) == 1

With pytest, the ``retry_testing`` fixture (installed with the package) does the same for a
whole test. Deadlines and metadata see the planned waits; only the sleeping is skipped.
Since time stands still, no origin cooldown is started while testing mode is on. The retry
budget is spent as usual: a transport shared between tests shares its budget too.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from ._base.validate import check_count
from ._policy import testmode
from ._policy.testmode import TestingLog

__all__ = ["TestingLog", "retry_testing"]

TestingLog.__module__ = __name__  # documented and shown here, where users import it


@contextmanager
def retry_testing(
    attempts: int | None = None,
    *,
    cap: bool = False,
    seed: int = 0,
    breakers: Literal["on", "off", "open"] = "on",
    throttles: Literal["on", "off"] | float = "on",
) -> Iterator[TestingLog]:
    """Turn testing mode on for every retry transport until the block ends.

    Args:
        attempts: make every request try exactly this many times in all (``max_attempts``);
            ``None`` (default) keeps each policy's own limit.
        cap: with ``attempts``, only lower a policy's limit, never raise it. Default False.
        seed: the seed of the random source jitter is drawn from. Default 0.
        breakers: ``"on"`` (default: circuit breakers as usual), ``"off"`` (no breaker
            refuses or counts anything), ``"open"`` (every breaker refuses every request,
            to test fallback paths).
        throttles: ``"on"`` (default: adaptive throttles as usual), ``"off"`` (no throttle
            refuses anything), or a probability in [0, 1] for every throttle's refusals
            (1.0 refuses every attempt, to test what a caller does with ``ThrottledError``).

    Yields:
        The :class:`TestingLog` that collects the waits. Blocks nest, and may be closed in any
        order (threads, tasks): the transports use the most recently opened block still open.
    """
    if attempts is not None:
        check_count("attempts", attempts)
    if breakers not in ("on", "off", "open"):
        raise ValueError(f"breakers must be 'on', 'off' or 'open', got {breakers!r}")
    if throttles not in ("on", "off") and (
        isinstance(throttles, bool) or not isinstance(throttles, (int, float))
        or not 0.0 <= throttles <= 1.0
    ):
        raise ValueError(f"throttles must be 'on', 'off' or a probability in [0, 1], "
                         f"got {throttles!r}")
    log = TestingLog(attempts=attempts, cap=cap, rng=random.Random(seed), breakers=breakers,
                     throttles=throttles if isinstance(throttles, str) else float(throttles))
    testmode.open_block(log)
    try:
        yield log
    finally:
        testmode.close_block(log)


def __getattr__(name: str) -> object:
    """``active``: the log of the most recently opened block still open, or ``None``."""
    if name == "active":
        return testmode.active
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
