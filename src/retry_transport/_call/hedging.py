"""Hedged requests: a second copy of a slow request, sent before the first has answered.

Dean and Barroso ("The Tail at Scale", 2013): send another copy of a request once the first
has taken longer than most requests do (about the 95th percentile of the origin's latency),
and use whichever answers first. The tail latency falls steeply for a few percent more
requests. As in gRPC's ``hedgingPolicy``:

- only a request that may be sent again without risk is hedged: a method in
  ``retry_methods`` or an idempotency key, a body held in memory (two attempts cannot read one
  stream at once), retries enabled, and no ``retry_body_errors`` (a hedged request's body is
  left to the caller);
- the first attempt starts; while no attempt has a final outcome, another starts every
  ``delay`` seconds, up to ``Hedging.max_attempts`` in flight; a retryable outcome starts the
  next at once, if one is left; every attempt counts towards the policy's ``max_attempts``;
- each hedge is admitted by the guards as a retry is (``_guards.HEDGE``): paid from the
  budget (refunded if it wins), admitted by the breaker, never sent to an origin cooling
  down, never started with less than ``MIN_ATTEMPT`` of the deadline left;
- the first final outcome wins; the others are cancelled (their tickets settled without a
  verdict) and recorded as such; when every attempt in flight failed retryably, the ordinary
  retry rules take over, each retry a single attempt.

This module holds the settings; ``hedged_call.HedgedCall`` makes the decisions (sans-I/O,
like ``core``), and the hedging loop (``_io/_async_hedging.py``, with the races and tries of
``_io/hedge_*.py``) runs the attempts on worker threads or tasks and waits out the delays.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Final

from .._base.validate import check_count, check_seconds, is_real
from .._wire.http import origin as origin_of

if TYPE_CHECKING:
    from .._base.flavour import URL
    from .latency import LatencyTable

__all__ = ["Delays", "Hedging"]

_PERCENTILE: Final = re.compile(r"p(\d{2})(?:\.(\d))?")
#: A delay read from the latency is never shorter than this (seconds).
_FLOOR: Final = 0.001
#: Seconds a percentile delay is reused for an origin before it is read again.
_REFRESH: Final = 1.0


def _seconds(name: str, value: object, kinds: str = "a number of seconds") -> float:
    """Seconds > 0, bounded as every option's are (``check_seconds``): a worker thread waits
    them (a lock's or a queue's timeout), which refuses a time the platform cannot hold.
    ``kinds`` says what else the argument may be, for the ``TypeError``."""
    if not is_real(value):
        raise TypeError(f"{name} must be {kinds}, got {value!r}")
    return check_seconds(name, value)


@dataclass(frozen=True, slots=True)
class Hedging:
    """Hedged requests: another copy of a request that has not answered after ``delay``.

    Passed as ``hedging=`` to either transport (default ``None``: no hedging). Only requests
    that may be sent again without risk are hedged (a method in ``retry_methods`` or an
    idempotency key, a body held in memory: bytes, a form, JSON); any other request is sent
    as without hedging.

    Args:
        delay: seconds to wait for an answer before the next copy (a number > 0 and at most
            1e9), or a percentile of the origin's latency over the last minute, ``"p50"`` to
            ``"p99.9"`` (``"pNN"`` or ``"pNN.N"``). Default ``"p95"``.
        max_attempts: the most attempts of one try in flight at once, the first included:
            2 to 5 (as gRPC allows). Default 2. Every attempt also counts towards the
            policy's ``max_attempts``.
        fallback_delay: the delay, in seconds (> 0 and at most 1e9), while the origin has
            fewer than ``min_samples`` latencies recorded. Default 0.05.
        min_samples: latencies an origin needs before its percentile is used: an integer
            >= 1. Default 50.

    A percentile that reads below 1 ms is taken as 1 ms.

    Raises:
        TypeError: a value of the wrong kind (a bool or a float for a count, a number where
            nothing but a percentile string goes...); the message names the argument.
        ValueError: an invalid value (the message names the argument).
        TypeError: a ``delay`` neither seconds nor a percentile, or a ``fallback_delay``
            that is not a number.
    """

    delay: float | str = "p95"
    _: KW_ONLY
    max_attempts: int = 2
    fallback_delay: float = 0.05
    min_samples: int = 50
    #: The percentile as a quantile in (0, 1), or ``None`` for a delay in seconds.
    quantile: float | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        delay = self.delay
        quantile = None
        if isinstance(delay, str):
            match = _PERCENTILE.fullmatch(delay)
            value = float(delay[1:]) if match else math.nan
            if not 50.0 <= value <= 99.9:
                raise ValueError(f"delay must be seconds or a percentile from 'p50' to "
                                 f"'p99.9' ('pNN' or 'pNN.N'), got {delay!r}")
            quantile = value / 100.0
        else:
            object.__setattr__(self, "delay", _seconds(
                "delay", delay, "a number of seconds or a percentile such as 'p95'"))
        object.__setattr__(self, "quantile", quantile)
        check_count("max_attempts", self.max_attempts, low=2, high=5)
        object.__setattr__(self, "fallback_delay",
                           _seconds("fallback_delay", self.fallback_delay))
        check_count("min_samples", self.min_samples)

    def delay_for(self, latency: LatencyTable, origin: str) -> float:
        """Seconds to wait before the next copy of a request to ``origin``."""
        return self._read(latency, origin)[0]

    def _read(self, latency: LatencyTable, origin: str) -> tuple[float, bool]:
        """The delay, and whether it was read from the latency (not the fallback). The
        percentile is read as the top of its histogram bucket, so that a delay never falls
        short of the latency it stands for (with every call taking 10 ms, ``"p50"`` waits
        10 ms or a little more, never 9.9)."""
        quantile = self.quantile
        if quantile is None:
            return self.delay, True  # type: ignore[return-value]
        count, value = latency.quantile(origin, quantile, upper=True)
        if count < self.min_samples or value is None:
            return self.fallback_delay, False
        return max(value, _FLOOR), True


class Delays:
    """Percentile delays per origin, each reused for ``_REFRESH`` seconds (reading one
    walks the origin's histogram). Bounded as the latency table is: cleared when it holds
    more origins than that."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[str, tuple[float, float]] = {}

    def get(self, hedging: Hedging, latency: LatencyTable, url: URL,
            clock: Callable[[], float]) -> float:
        """The delay before a hedge of a request to ``url``. A fixed delay reads neither the
        URL's origin nor the ``clock``."""
        if hedging.quantile is None:
            return hedging.delay  # type: ignore[return-value]
        origin = origin_of(url)
        now = clock()
        known = self._known.get(origin)
        if known is not None and known[0] > now:
            return known[1]
        delay, measured = hedging._read(latency, origin)
        if measured:  # the fallback is not kept: the percentile takes over at once
            if len(self._known) > 2 * max(latency.origins, 512):
                self._known.clear()
            self._known[origin] = (now + _REFRESH, delay)
        return delay
