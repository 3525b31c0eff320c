"""An event stream's events, as the HTML standard's event-stream interpretation dispatches
them: :class:`ServerSentEvent`, the record a policy's ``retry_event`` is shown, and
:class:`EventReader`, which reads them from the raw body chunk by chunk.

Where :mod:`.events` only finds where events end (to resume a stream), this reads their
fields: the ``event`` name, the ``data`` lines, the ``id`` and ``retry`` fields. It reads the
first events of a response only (a bounded head, see ``_call/inband.py``), so it favours
plainness over speed: each line is decoded once it is whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from .events import BOM, MAX_RETRY_MS

__all__ = ["EventReader", "ServerSentEvent"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One event of a ``text/event-stream`` body, as a browser's ``EventSource`` would
    dispatch it (an event with data: comments and blocks of ``id`` or ``retry`` fields
    alone are not events).

    Attributes:
        event: the event's name: its ``event`` field, ``"message"`` when it has none.
        data: its ``data`` lines, joined with ``"\\n"``.
        id: the stream's last event ID as of this event (the standard's ``lastEventId``:
            set by this event's ``id`` field or an earlier one's), or ``None``.
        retry: this event's own ``retry`` field, in milliseconds, or ``None``.
    """

    event: str
    data: str
    id: str | None = None
    retry: int | None = None

    def json(self) -> Any:
        """``data`` parsed as JSON (``json.loads``: raises ``ValueError`` when it is not)."""
        return json.loads(self.data)


class EventReader:
    """One event stream's events, read from its raw chunks: :meth:`feed` returns the events
    each chunk completes. Lines end in CRLF, LF or CR (a CR that ends a chunk may be half of
    a CRLF); a BOM opening the body is dropped; bytes that are not UTF-8 are replaced."""

    __slots__ = ("_cr", "_data", "_event", "_fresh", "_id", "_line", "_retry", "last_id",
                 "offset")

    def __init__(self, last_id: str | None = None) -> None:
        #: The last event ID buffer, as of the last event dispatched.
        self.last_id = last_id
        #: Bytes of the body read so far.
        self.offset = 0
        self._id = last_id  # the ID buffer, which the event still arriving may change
        self._event = ""
        self._data: list[str] = []
        self._retry: int | None = None
        self._line: list[bytes] = []  # the pieces of the line still arriving
        self._cr = False  # the last chunk ended in a CR
        self._fresh = True  # no line read yet: a BOM may open it

    def feed(self, chunk: bytes) -> list[tuple[ServerSentEvent, int]]:
        """The events ``chunk`` completes, each with the body's length up to its end (the
        blank line that dispatches it included)."""
        events: list[tuple[ServerSentEvent, int]] = []
        at = self.offset
        self.offset += len(chunk)
        if self._cr:
            self._cr = False
            if chunk[:1] == b"\n":  # the LF of a CRLF split between two chunks
                chunk = chunk[1:]
                at += 1
        for line in chunk.splitlines(True):
            at += len(line)
            tail = line[-1:]
            if tail != b"\n" and tail != b"\r":  # the last line, still arriving
                self._line.append(line)
                break
            if self._line:
                self._line.append(line)
                line = b"".join(self._line)
                self._line = []
            if self._fresh:
                self._fresh = False
                line = line.removeprefix(BOM)
            if tail == b"\r" and at == self.offset:
                self._cr = True
            event = self._read(line.rstrip(b"\r\n"))
            if event is not None:
                events.append((event, at))
        return events

    def _read(self, line: bytes) -> ServerSentEvent | None:
        """Read one whole line (without its end): the event a blank line dispatches."""
        if not line:
            self.last_id = self._id
            data, self._data = self._data, []
            event, self._event = self._event, ""
            retry, self._retry = self._retry, None
            if not data:  # nothing to dispatch
                return None
            return ServerSentEvent(event or "message", "\n".join(data), self.last_id, retry)
        if line[:1] == b":":  # a comment
            return None
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value.decode("utf-8", "replace"))
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace") or None
        elif name == b"retry" and value.isdigit():  # ASCII digits only, in bytes
            digits = value.lstrip(b"0")
            self._retry = (MAX_RETRY_MS if len(digits) > _RETRY_DIGITS
                           else min(int(digits or b"0"), MAX_RETRY_MS))
        return None


_RETRY_DIGITS: Final = len(str(MAX_RETRY_MS))
