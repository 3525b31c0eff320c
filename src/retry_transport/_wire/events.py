"""Reading an event stream (``text/event-stream``) as the HTML standard's event-stream
interpretation does, far enough to resume it: where each event ends, the last event ID, and
the reconnection time.

:class:`EventScanner` is fed the raw body chunk by chunk and gives back the bytes of whole
events only (each with the blank line that ends it): an event still arriving is held back
until it ends, so that a body that breaks mid-event can be resumed without a torn event
reaching the caller. It parses bytes, never text: only the lines that matter here (blank
lines, ``id`` and ``retry`` fields) are looked at, and nothing is decoded but an ID.

Its cost is linear in the body, however its events are cut into chunks: each chunk is split
into lines once, when it arrives; the chunks of an event still arriving are kept as they
came and handed on as they are once it ends (nothing held is copied again); only a line
still arriving whose value is to be read (an ``id`` or ``retry`` field) keeps its pieces,
joined once when it ends.
"""

from __future__ import annotations

from typing import Final

from .._base.validate import MAX_SECONDS

__all__ = ["BOM", "EventScanner", "MAX_RETRY_MS"]

#: The UTF-8 byte order mark an event stream may begin with (the standard's decoding drops it).
BOM: Final = b"\xef\xbb\xbf"

#: The longest reconnection time kept, in milliseconds: the longest wait any option allows.
#: A ``retry`` field of more (a number of any length) is kept as this: a wait that long is
#: capped at ``max_retry_after`` anyway, and ``int()`` of a huge string raises or is slow.
MAX_RETRY_MS: Final = int(MAX_SECONDS * 1000)
_RETRY_DIGITS: Final = len(str(MAX_RETRY_MS))

#: What :meth:`EventScanner.feed` gives while no event has ended (never changed).
_NONE: Final[list[bytes]] = []

# The line still arriving at the end of the last chunk: none, one not to be read (a
# ``data`` line, a comment...), or one to be read when it ends (its pieces kept).
_SKIP: Final = 1
_READ: Final = 2


class EventScanner:
    """One event stream's reading: :meth:`feed` the raw chunks, and hand on what it returns.

    Lines end in CRLF, LF or CR (a CR that ends a chunk may be the first half of a CRLF: the
    LF that then opens the next chunk belongs to it). A blank line ends an event, and with
    it, the last event ID becomes the ID buffer's value. An ``id`` field without NULL sets
    the ID buffer (an empty one clears it); a ``retry`` field of ASCII digits only sets the
    reconnection time in milliseconds (at most :data:`MAX_RETRY_MS`), as the line is read.
    An event with a ``data`` field is one the standard dispatches (:attr:`dispatched`).
    """

    __slots__ = ("_cr", "_data", "_fresh", "_held", "_id", "_line", "_open", "dispatched",
                 "last_id", "retry_ms")

    def __init__(self, last_id: str | None = None) -> None:
        #: The event ID to resume from: the ID buffer as of the last event that ended, or
        #: ``None`` (none set, or cleared by an empty ``id``). It starts as ``last_id``: the
        #: ID the request itself sent, which the server went on from.
        self.last_id = last_id
        #: The stream's reconnection time in milliseconds (``retry``), or ``None``.
        self.retry_ms: int | None = None
        #: The events ended so far that the standard dispatches: those with a ``data``
        #: field (a block of comments, or of only ``id``/``retry`` fields, is none).
        self.dispatched = 0
        self._data = False  # the event still arriving has a data field
        self._id = last_id  # the ID buffer, which a torn event may have changed
        self._held: list[bytes] = []  # the chunks of the event still arriving, as they came
        self._open = 0  # the line still arriving: 0 none, _SKIP or _READ
        self._line: list[bytes] = []  # its pieces, when _READ
        self._cr = False  # the last line read ended in a CR, maybe the first half of a CRLF
        # At the start of a body, where a BOM may be: _FIRST (the first body's, handed on)
        # or _RESUMED (a resumed body's, dropped); 0 past it.
        self._fresh = _FIRST

    def feed(self, chunk: bytes) -> list[bytes]:
        """The bytes of the events that ``chunk`` completes, as pieces to hand on in order
        (the chunks that brought them; ``[]`` while none has ended)."""
        if not chunk:
            return _NONE
        start = 0  # where the lines to read begin in ``chunk``
        end = 0  # where, in ``chunk``, the last event that ends in it ends
        if self._cr:
            self._cr = False
            if chunk[:1] == b"\n":  # the LF of a CRLF split between two chunks
                start = 1
                if not self._held:  # it ends an event already handed on: it follows at once
                    end = 1
        if self._fresh:
            held = self._held
            if held:  # the first bytes of a BOM, held until it could be told
                chunk = held[0] + chunk
                held.clear()
            if len(chunk) < len(BOM) and BOM.startswith(chunk):
                held.append(chunk)  # too short yet to tell whether a BOM opens it
                return _NONE
            if chunk.startswith(BOM):
                if self._fresh == _RESUMED:
                    chunk = chunk[len(BOM):]
                    if not chunk:
                        self._fresh = 0
                        return _NONE
                else:  # handed on as it came, but no part of the first line's name
                    start = len(BOM)
            self._fresh = 0
        at = start
        lines = iter((chunk[start:] if start else chunk).splitlines(True))
        opened = self._open
        if opened:  # the first line goes on with one begun in an earlier chunk
            line = next(lines)
            tail = line[-1:]
            if tail != b"\n" and tail != b"\r":  # ... and on past this chunk
                if opened == _READ:
                    self._line.append(line)
                self._held.append(chunk)
                return _NONE
            at += len(line)
            if opened == _READ:
                pieces = self._line
                pieces.append(line)
                self._line = []
                self._field(b"".join(pieces))  # an id, retry or data line: never blank
            opened = 0
        for line in lines:
            tail = line[-1:]
            if tail != b"\n" and tail != b"\r":  # the last line, still arriving
                head = line[:1]
                if (head == b"i" or head == b"r"
                        or (head == b"d" and len(line) < 5 and not self._data)):
                    opened = _READ  # read when it ends (a "d" one: too short to tell)
                    self._line = [line]
                else:
                    if head == b"d" and line[:5] == b"data:":
                        self._data = True
                    opened = _SKIP
                break
            at += len(line)
            head = line[:1]
            if head == b"\r" or head == b"\n":  # a blank line: the event ends
                end = at
                self.last_id = self._id
                if self._data:
                    self.dispatched += 1
                    self._data = False
            elif head == b"i" or head == b"r":
                self._field(line)
            elif head == b"d" and not self._data:
                self._data = line[:5] == b"data:" or line.rstrip(b"\r\n") == b"data"
        self._open = opened
        # A CR that ends what came may be the first half of a CRLF.
        self._cr = not opened and chunk[-1:] == b"\r"
        held = self._held
        if not end:
            held.append(chunk)
            return _NONE
        if end == len(chunk):
            held.append(chunk)
            self._held = []
        else:
            held.append(chunk[:end])
            self._held = [chunk[end:]]
        return held

    def _field(self, line: bytes) -> None:
        """Read an ``id``, ``retry`` or ``data`` field line (with its line end)."""
        name, _, value = line.rstrip(b"\r\n").partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if name == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace") or None
        elif name == b"retry" and value.isdigit():  # ASCII digits only, in bytes
            digits = value.lstrip(b"0")
            self.retry_ms = (MAX_RETRY_MS if len(digits) > _RETRY_DIGITS
                             else min(int(digits or b"0"), MAX_RETRY_MS))
        elif name == b"data":
            self._data = True

    def rest(self) -> bytes:
        """At a clean end of the body: what is held back (an event the server never ended),
        handed on as it came."""
        held, self._held = self._held, []
        self._open, self._line = 0, []
        return b"".join(held)

    def restart(self) -> None:
        """A new body follows a break: the torn event is dropped with whatever its lines
        set (the ID buffer is the last event ID again), and a BOM opening the new body will
        be dropped too."""
        self._held, self._line, self._open, self._cr = [], [], 0, False
        self._id, self._data = self.last_id, False
        self._fresh = _RESUMED


_FIRST: Final = 1
_RESUMED: Final = 2
