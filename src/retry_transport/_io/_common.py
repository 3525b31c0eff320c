"""What the sync and async drivers share, and their loops build on: ``_Common`` (the public
properties, the calls a request starts) and the check of a request's HTTP library.

Nothing here does I/O: the loops (``_async_loop.py`` and its generated twin
``_sync_loop.py``) and the drivers (``drivers.py``) do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from .._call.core import RetryCall
from .._call.hedged_call import HedgedCall
from .._wire.http import normalise

if TYPE_CHECKING:
    from .._base.flavour import Flavour, Request
    from .._base.models import RetryStats
    from .._call.controller import Controller
    from .._call.latency import LatencySummary
    from .._call.quick import QuickPath
    from .._guards.budget import RetryBudget
    from .._policy.policy import RetryPolicy

__all__ = ["_PUBLIC", "_Common", "_check_request"]

#: Where each flavour's transports are public, by the library's import name.
_PUBLIC: dict[str, str] = {"httpx": "retry_transport", "httpx2": "retry_transport.httpx2"}


def _check_request(flavour: Flavour, request: object, *, sync: bool) -> None:
    """Refuse a request of the other HTTP library (a client of one library given the other's
    transport) with a ``TypeError`` naming the class to use: the libraries' classes do not
    mix, and the inner transport would fail with a bare ``AssertionError``. Run on a
    transport's first request, and when an attempt fails with an ``AssertionError`` or a
    ``TypeError``: never on the success path."""
    if isinstance(request, flavour.request):
        return
    library = type(request).__module__.partition(".")[0]
    name = "RetryTransport" if sync else "AsyncRetryTransport"
    ours = f"{_PUBLIC[flavour.name]}.{name}"
    if library in _PUBLIC:
        raise TypeError(
            f"{ours} serves {flavour.name} clients, but it was given an {library}.Request "
            f"(an {library}.{'Client' if sync else 'AsyncClient'}): use "
            f"{_PUBLIC[library]}.{name} with {library}"
        )
    raise TypeError(f"{ours} serves {flavour.name} clients, but it was given {request!r}, "
                    f"which is no {flavour.name}.Request")


class _Common:
    if TYPE_CHECKING:  # each driver's own (``drivers.py``)
        def _first(self, request: Request) -> None: ...

    _controller: Controller
    _transport: Any
    _pooled: bool
    _flavour: ClassVar[Flavour]
    #: Whether this is the sync driver (the errors name the transport class to use).
    _sync: ClassVar[bool]
    #: Whether no request was checked yet: the first one goes by its call, which checks
    #: its library (the quick path opens then), so the success path checks nothing.
    _untried: bool = True
    #: The controller's quick path (``_call/quick.py``).
    _quick: QuickPath
    #: The flavour's in-memory body class: a body of another is handed over streamed.
    _memory: type[Any]
    #: The clock attempts' latencies are timed with, and where they are recorded.
    _lap: Callable[[], float]
    _record: Callable[[str, float, float], None]

    @property
    def policy(self) -> RetryPolicy:
        """The transport's default policy (per-request overrides apply on top of it)."""
        return self._controller.policy

    @property
    def budget(self) -> RetryBudget | None:
        """The retry budget this transport spends, or ``None``."""
        return self._controller.budget

    @property
    def stats(self) -> RetryStats:
        """A snapshot of this transport's counters."""
        return self._controller.stats()

    def latency(self, url_or_origin: object) -> LatencySummary | None:
        """The latency of ``url_or_origin``'s attempts over the last minute (from sending
        an attempt to its response's headers, on the transport's ``clock``): ``count`` and
        the ``p50``, ``p95``, ``p99`` and ``p999`` percentiles in seconds, each within 5%;
        ``None`` for an origin with none. Accepts a URL (of either library, or a string)
        or an origin (``"https://api.example.com"``)."""
        return self._controller.latency.summary(normalise(url_or_origin))

    def _call(self, request: Request, closes: int) -> RetryCall:
        """The call that decides ``request`` from its first attempt on (a request the quick
        path does not send as it is). Before the transport's first request has been
        checked, this one is (the driver's ``_first``), and the quick path opens."""
        if self._untried:
            self._first(request)
            self._quick.opened()
        controller = self._controller
        if controller.hedging is not None:
            return HedgedCall(controller, request, controller.hedging, closes)
        return RetryCall(controller, request, closes=closes)

    def _begin(self, request: Request, stream: object, closes: int) -> RetryCall:
        """The call that takes ``request`` over after its quick first attempt (sent with the
        body ``stream``), from that attempt's error or answer on."""
        return RetryCall(self._controller, request, quick=True, stream=stream, closes=closes)

    def _check_failed(self, request: Request, exc: Exception) -> None:
        """An attempt failed for good: an ``AssertionError`` or a ``TypeError`` may mean a
        request of the other HTTP library, which is refused so (``_check_request``)."""
        if isinstance(exc, (AssertionError, TypeError)):
            _check_request(self._flavour, request, sync=self._sync)

    def _count_close(self) -> None:
        """The transport is being closed: no attempt of a request under way starts after
        this (``RetryCall.attempt_request``, ``HedgedCall.hedge``)."""
        self._controller.closes += 1
