"""The settings of resumable bodies: :class:`Resume` (the decisions are in
``resumption.py``)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

__all__ = ["Resume"]


@dataclass(frozen=True, slots=True)
class Resume:
    """Resume a response's body after it breaks while being read (``resume=`` of either
    transport).

    Only a final response to a ``GET`` is resumed, and only where HTTP allows it:

    * ``ranges``: a ``200`` or ``206`` with a strong ``ETag`` (and no ``Accept-Ranges:
      none``) is asked again for the bytes not yet read, with ``Range`` and
      ``If-Range``; only a ``206`` of exactly those bytes of the same representation is
      spliced in, so the caller reads one body equal to the resource's, byte for byte.
    * ``events``: a ``200`` ``text/event-stream`` is handed on one whole event at a time
      and asked again with ``Last-Event-ID`` after a break, so each event arrives once,
      in order, none torn. A stream with no event ID cannot be resumed.

    Attributes:
        max_resumes: the most resumptions of one response's body (every resumption
            attempt counts, one answered 503 included). An int >= 1. Default 5.
        ranges: resume by byte ranges. Default True.
        events: resume event streams by event ID (preferred when both apply). Default True.
    """

    max_resumes: int = 5
    _: KW_ONLY
    ranges: bool = True
    events: bool = True

    def __post_init__(self) -> None:
        value = self.max_resumes
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"max_resumes must be an int >= 1, got {value!r}")
        if value < 1:
            raise ValueError(f"max_resumes must be an int >= 1, got {value!r}")
        for name in ("ranges", "events"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
