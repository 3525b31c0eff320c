"""The settings of resumable bodies: :class:`Resume` (the decisions are in
``resumption.py``)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

__all__ = ["Resume"]


@dataclass(frozen=True, slots=True)
class Resume:
    """Resume a response's body after it breaks while being read (``resume=`` of either
    transport).

    A final response to a ``GET`` is resumed where HTTP allows it (and, with
    ``post_events_by_get``, a ``POST``'s event stream by a ``GET``):

    * ``ranges``: a ``200`` or ``206`` with a strong ``ETag`` (and no ``Accept-Ranges:
      none``) is asked again for the bytes not yet read, with ``Range`` and
      ``If-Range``; only a ``206`` of exactly those bytes of the same representation is
      spliced in, so the caller reads one body equal to the resource's, byte for byte.
    * ``events``: a ``200`` ``text/event-stream`` is handed on one whole event at a time
      and asked again with ``Last-Event-ID`` after a break, so each event arrives once,
      in order, none torn. A stream with no event ID cannot be resumed. The wait before
      each resumption is the stream's ``retry`` time (when it sent one, at most
      ``max_retry_after``) plus the policy's backoff, with its jitter.
    * ``post_events_by_get`` (MCP's streamable HTTP): a ``POST`` whose ``200``
      ``text/event-stream`` breaks after an event ID was set is resumed by a ``GET`` to
      the same URL with ``Last-Event-ID``, carrying the ``POST``'s headers but those of its
      body (``Content-Type``, ``Content-Length``, ``Content-Encoding``,
      ``Transfer-Encoding``) and its idempotency key; the ``POST`` is never sent again.

    A resumption after which the caller received new data (an event, or 64 KiB by
    ranges) has succeeded: its cost goes back to the retry budget at once (the breaker and
    the throttle counted its answer a success when it came), and ``max_resumes`` and the
    backoff count from zero again. So ``max_resumes`` bounds the resumptions that make no
    progress, and a long body over a link that drops every so often is read to its end,
    within the deadline and the budget.

    Attributes:
        max_resumes: the most resumptions of one response's body in a row without
            progress (every resumption attempt counts, one answered 503 included). An int
            >= 1. Default 5.
        ranges: resume by byte ranges. Default True.
        events: resume event streams by event ID (preferred when both apply). Default True.
        post_events_by_get: with ``events``, resume a ``POST``'s event stream by a ``GET``
            with ``Last-Event-ID``, as the MCP specification (2025-11-25) does. Default
            False: a ``POST`` is never resumed.
    """

    max_resumes: int = 5
    _: KW_ONLY
    ranges: bool = True
    events: bool = True
    post_events_by_get: bool = False

    def __post_init__(self) -> None:
        value = self.max_resumes
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"max_resumes must be an int >= 1, got {value!r}")
        if value < 1:
            raise ValueError(f"max_resumes must be an int >= 1, got {value!r}")
        for name in ("ranges", "events", "post_events_by_get"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
