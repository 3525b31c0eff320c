"""What a body handed over counts as progress, and what its stall says (``idle_timeout``).

A response is handed over once its headers arrive; an event stream can then stay open for
minutes with nothing in it but keep-alive comments, and the inner transport's read timeout,
which sees bytes, never fires. With the policy's ``idle_timeout``, the drivers bound the
server's silence while the caller reads (``_io/idle.py``): the time to the next *dispatched*
event of a ``text/event-stream`` (one with data, as the HTML standard dispatches it: comments,
blank lines and blocks of only ``id``/``retry`` do not count), or to the next chunk of any
other body. Decided here, sans-I/O: :meth:`IdleWatch.progress` for each chunk read, and
:meth:`IdleWatch.stalled` for the error once the silence ran past the limit.
"""

from __future__ import annotations

import weakref
from dataclasses import replace
from typing import TYPE_CHECKING

from .._base.models import IDLE_TIMEOUT, new_retry_info
from .._wire.events import EventScanner
from .._wire.http import attach, remember, retry_info
from .._wire.resumable import is_event_stream

if TYPE_CHECKING:
    from .._base.flavour import Flavour, Request, Response

__all__ = ["IdleWatch"]


class IdleWatch:
    """One streamed body's silence bound: ``timeout`` seconds without progress.

    ``record``: the stall ends the body for good (no ``Resume`` goes on after it), so the
    response's :class:`~retry_transport.RetryInfo` gets stop reason ``idle_timeout``, and the
    error the same metadata and a note. A body ``Resume`` reads is left to the resumption,
    which decides what its break comes to."""

    __slots__ = ("_response", "arrived", "flavour", "record", "request", "scanner", "timeout")

    def __init__(self, timeout: float, flavour: Flavour, request: Request, response: Response,
                 record: bool) -> None:
        self.timeout = timeout
        self.flavour = flavour
        self.request = request
        self.record = record
        #: The events dispatched (an event stream's) or the chunks read (any other body's).
        self.arrived = 0
        #: An event stream's reading, to tell its events from its keep-alives (``None``:
        #: another body, whose every chunk is progress).
        self.scanner = EventScanner() if is_event_stream(response) else None
        # Weak: the response holds its stream, which holds this (no reference cycle).
        self._response = weakref.ref(response)

    def progress(self, chunk: bytes) -> bool:
        """Whether ``chunk``, just read, is progress: it ended an event with data (an event
        stream), or it is not empty (any other body)."""
        scanner = self.scanner
        if scanner is None:
            if chunk:
                self.arrived += 1
                return True
            return False
        scanner.feed(chunk)
        dispatched = scanner.dispatched
        if dispatched != self.arrived:
            self.arrived = dispatched
            return True
        return False

    def stalled(self) -> Exception:
        """The error for a read the silence ended (the driver has closed the response):
        the flavour's ``StreamIdleTimeout``, saying what had arrived."""
        count, unit = self.arrived, "event" if self.scanner is not None else "chunk"
        what = "no event" if self.scanner is not None else "no data"
        message = (f"{what} for {self.timeout:g} s after {count} {unit}"
                   f"{'' if count == 1 else 's'} (idle_timeout)")
        error: Exception = self.flavour.idle_error(message, timeout=self.timeout,
                                                   request=self.request)
        response = self._response() if self.record else None
        info = None if response is None else retry_info(response)
        if info is not None:
            history = info.history
            if history:
                history = (*history[:-1], replace(history[-1], error=type(error).__name__))
            info = new_retry_info(info.attempts, info.retries, history, info.total_wait,
                                  IDLE_TIMEOUT, info.body_buffered, info.hedges, info.resumes)
            attach(response, info)
            remember(error, info, f"retry-transport: the server was silent for idle_timeout "
                                  f"({self.timeout:g} s) while the body was read: the response "
                                  f"was closed, its connection dropped")
        return error
