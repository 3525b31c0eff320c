"""Reading an event stream (``text/event-stream``) as the HTML standard's event-stream
interpretation does, far enough to resume it: where each event ends, the last event ID, and
the reconnection time.

:class:`EventScanner` is fed the raw body chunk by chunk and gives back the bytes of whole
events only (each with the blank line that ends it): an event still arriving is held back
until it ends, so that a body that breaks mid-event can be resumed without a torn event
reaching the caller. It parses bytes, never text: only the lines that matter here (blank
lines, ``id`` and ``retry`` fields) are looked at, and nothing is decoded but an ID.
"""

from __future__ import annotations

from typing import Final

__all__ = ["BOM", "EventScanner"]

#: The UTF-8 byte order mark an event stream may begin with (the standard's decoding drops it).
BOM: Final = b"\xef\xbb\xbf"


class EventScanner:
    """One event stream's reading: :meth:`feed` the raw chunks, and hand on what it returns.

    Lines end in CRLF, LF or CR (a CR that ends a chunk may be the first half of a CRLF: the
    LF that then opens the next chunk belongs to it). A blank line ends an event, and with
    it, the last event ID becomes the ID buffer's value. An ``id`` field without NULL sets
    the ID buffer (an empty one clears it); a ``retry`` field of ASCII digits only sets the
    reconnection time in milliseconds, as the line is read.
    """

    __slots__ = ("_bom", "_cr", "_fresh", "_held", "_id", "_scan", "last_id", "retry_ms")

    def __init__(self, last_id: str | None = None) -> None:
        #: The event ID to resume from: the ID buffer as of the last event that ended, or
        #: ``None`` (none set, or cleared by an empty ``id``). It starts as ``last_id``: the
        #: ID the request itself sent, which the server went on from.
        self.last_id = last_id
        #: The stream's reconnection time in milliseconds (``retry``), or ``None``.
        self.retry_ms: int | None = None
        self._id = last_id  # the ID buffer, which a torn event may have changed
        self._held = b""  # the bytes of the event still arriving
        self._scan = 0  # where, in ``_held``, the first line not yet read starts
        self._cr = False  # the last line read ended in a CR, maybe the first half of a CRLF
        # At the start of a body, where a BOM may be: _FIRST (the first body's, handed on)
        # or _RESUMED (a resumed body's, dropped); 0 past it.
        self._fresh = _FIRST
        self._bom = False  # the first line not yet read opens with the first body's BOM

    def feed(self, chunk: bytes) -> bytes:
        """The bytes of the events that ``chunk`` completes (``b""`` while none has)."""
        out = b""
        held = self._held
        if self._cr:
            self._cr = False
            if chunk[:1] == b"\n":  # the LF of a CRLF split between two chunks
                chunk = chunk[1:]
                if held:
                    held += b"\n"
                    self._scan += 1
                else:  # it ends an event already handed on: it follows at once
                    out = b"\n"
        held = held + chunk if held else chunk
        if self._fresh:
            if len(held) < len(BOM) and BOM.startswith(held):
                self._held = held  # too short yet to tell whether a BOM opens it
                return out
            if held.startswith(BOM):
                if self._fresh == _RESUMED:
                    held = held[len(BOM):]
                else:
                    self._bom = True
            self._fresh = 0
        scan = self._scan
        end = 0  # the end of the last whole event in ``held``
        for line in held[scan:].splitlines(True):
            tail = line[-1:]
            if tail != b"\n" and tail != b"\r":  # the last line, still arriving
                break
            scan += len(line)
            head = line[:1]
            if self._bom:
                self._bom = False
                line = line[len(BOM):]
                head = line[:1]
            if head == b"\r" or head == b"\n":  # a blank line: the event ends
                end = scan
                self.last_id = self._id
            elif head == b"i" or head == b"r":
                self._field(line)
        # A CR that ends what came may be the first half of a CRLF.
        self._cr = scan == len(held) and held[-1:] == b"\r"
        if end:
            out += held[:end]
            held = held[end:]
            scan -= end
        self._held = held
        self._scan = scan
        return out

    def _field(self, line: bytes) -> None:
        """Read an ``id`` or ``retry`` field line (with its line end)."""
        name, _, value = line.rstrip(b"\r\n").partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if name == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace") or None
        elif name == b"retry" and value.isdigit() and value.isascii():
            self.retry_ms = int(value)

    def rest(self) -> bytes:
        """At a clean end of the body: what is held back (an event the server never ended),
        handed on as it came."""
        held, self._held, self._scan = self._held, b"", 0
        return held

    def restart(self) -> None:
        """A new body follows a break: the torn event is dropped with whatever its lines
        set (the ID buffer is the last event ID again), and a BOM opening the new body will
        be dropped too."""
        self._held, self._scan, self._cr, self._bom = b"", 0, False, False
        self._id = self.last_id
        self._fresh = _RESUMED


_FIRST: Final = 1
_RESUMED: Final = 2
