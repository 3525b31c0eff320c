"""The retry-storm simulator: the classic animation, replayed through the real transport.

``python -m retry_transport.sim`` prints the retry-storm table as measured; the functions
here run the same scenarios from tests and notebooks::

    from retry_transport import RetryPolicy
    from retry_transport.sim import run_storm, storm_stats

    run = run_storm(RetryPolicy(max_attempts=5, max_delay=0.8), seed=21)
    run.attempts, run.succeeded, run.pattern, run.recovered_at
    stats = storm_stats(RetryPolicy(max_attempts=5, max_delay=0.8), runs=2000)
    stats.attempts_summary.median, stats.all_succeeded_share

Nothing here sleeps for real, and every scenario goes through the real
:class:`~retry_transport.AsyncRetryTransport` with its default ``sleep`` (``anyio.sleep``) and
``clock`` (``anyio.current_time``). Every scenario but the deadline chain runs on an asyncio
event loop whose clock jumps to the next timer whenever no task is ready
(``_virtual.run_jumping``: a sleep costs about a third of one under trio's ``MockClock``),
and hands each GET to the transport as an ``httpx.AsyncClient`` would (the client adds CPU
time, no wait and no decision). The deadline chain, whose services call each other through
channels, runs on trio under ``trio.testing.MockClock(autojump_threshold=0)`` (trio must be
installed) through ``httpx.AsyncClient`` instances.

The storm model (:func:`run_storm`), made precise:

* ``clients`` (6) clients each send one GET at ``t = 0``, each through its own
  transport, with its own jitter generator ``random.Random(f"storm:{seed}:{k}")`` and, if
  asked, its own retry budget.
* Every attempt takes ``call_time`` (100 ms) and occupies the service during the half-open
  interval ``[start, start + call_time)``.
* Overload: the service works on ``capacity`` (4) calls at once. "While more than 4 calls
  are in flight, every call in flight times out" means: a call is *doomed* if at any instant
  of its lifetime more than ``capacity`` calls are in flight, itself included. A doomed call
  keeps its place until its 100 ms mark and then fails with ``httpx.ReadTimeout``, which the
  transport retries. So every call in flight when a fifth one arrives fails, the fifth too,
  and so does any call that starts while the service is over capacity.
* Simultaneous events: at an instant where one call ends and another starts, the end comes
  first (half-open intervals), so a client that retries at once does not overlap its own
  failed call; calls that start at the same instant all overlap. The service decides from
  recorded times (a 1 ns tolerance absorbs float drift), never from the order in which the
  event loop wakes tasks at one instant, so a run depends on its seed alone.
* Scripted replies (step 1's blip): a client's first attempts may get fixed answers; an
  overload timeout wins over them. Step 1 turns the capacity rule off: its failures are the
  script, and six first calls at once would otherwise overload a 4-call service.
* The run lasts ``duration`` (2 s): attempts starting before it count and run to their
  end; an attempt due at or after it is not sent (the client is reported ``"cut off"``).
* Cooldown: the transports keep their default ``cooldown=True``. It cannot act here: each
  client has its own transport and sends one request, and a cooldown only holds a
  transport's *new* requests, never a retry.

The sustained-outage model (:func:`run_outage`: steady traffic through one client while the
service answers 503, with or without a retry budget and a circuit breaker; ``LONG_OUTAGE``
is the two-minute outage the command measures the breaker in) and the rate-limited API
model (:func:`run_rate_limited`: callers against a fixed-window quota, with and without
pacing by its rate-limit headers) and the fleet model (:func:`run_fleet`: workers, each with
its own transport, against one such quota, with and without a
:class:`~retry_transport.MemoryStore` sharing their cooldowns) are described in their
docstrings::

    from retry_transport import CircuitBreaker
    from retry_transport.sim import LONG_OUTAGE, run_outage

    run = run_outage(**LONG_OUTAGE, breaker=CircuitBreaker)  # budget + breaker
    run.attempts_in_outage, run.outage_load, run.failed, run.first_success_delay

    from retry_transport.sim import run_fleet

    shared, alone = run_fleet(shared=True), run_fleet(shared=False)
    shared.rejected, alone.rejected, shared.goodput.mean, alone.goodput.mean
"""

try:
    import trio as _trio
except ImportError:  # pragma: no cover - trio comes with the dev extra
    raise ImportError(
        "retry_transport.sim runs in trio's virtual time and needs trio: "
        "pip install 'retry-transport[sim]'"
    ) from None

from ._dist import storm_stats
from ._fleet import run_fleet
from ._outage import LONG_OUTAGE, BreakerFactory, run_outage
from ._plot import plot_runs
from ._ratelimit import run_rate_limited
from ._results import (
    Call,
    ClientResult,
    Distribution,
    FleetResult,
    OutageResult,
    RateLimitResult,
    Reply,
    StormResult,
    StormStats,
)
from ._steps import (
    COMPARISONS,
    REPRESENTATIVE_PATTERN,
    REPRESENTATIVE_SEED,
    STEPS,
    UNCAPPED,
    Comparison,
    Step,
    find_seed,
)
from ._storm import BudgetFactory, StormSpec, run_storm, run_storms

del _trio

__all__ = [
    "COMPARISONS",
    "LONG_OUTAGE",
    "REPRESENTATIVE_PATTERN",
    "REPRESENTATIVE_SEED",
    "STEPS",
    "UNCAPPED",
    "BreakerFactory",
    "BudgetFactory",
    "Call",
    "ClientResult",
    "Comparison",
    "Distribution",
    "FleetResult",
    "OutageResult",
    "RateLimitResult",
    "Reply",
    "Step",
    "StormResult",
    "StormSpec",
    "StormStats",
    "find_seed",
    "plot_runs",
    "run_fleet",
    "run_outage",
    "run_rate_limited",
    "run_storm",
    "run_storms",
    "storm_stats",
]
