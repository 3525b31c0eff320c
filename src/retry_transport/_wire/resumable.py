"""Which responses' bodies can be resumed after a break, and how: the headers read.

* **Byte ranges** (RFC 9110 sections 14 and 13.1.5): a ``200`` or ``206`` with a strong
  ``ETag`` and no ``Accept-Ranges: none`` is asked again for the bytes not yet read, with
  ``Range`` and ``If-Range: <etag>``; only a ``206`` of exactly those bytes of the same
  representation is taken.
* **Event streams** (the HTML standard's ``EventSource``): a ``200`` ``text/event-stream``
  is asked again with ``Last-Event-ID``; only a ``200`` event stream is taken.

Pure reading: :func:`plan` says what a response allows, :meth:`Ranges.accepts` and
:func:`is_event_stream` judge a resumption's answer, and :meth:`Ranges.size` says how many
raw bytes the bodies spliced must bring. A header that cannot be read (malformed, or a number
of any length) makes a response not resumable and a resumption's answer refused: it never
raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from .._base.flavour import Response
from .http import count, header

__all__ = ["Ranges", "content_range", "encoding", "is_event_stream", "plan"]

_CONTENT_RANGE: Final = re.compile(r"\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*", re.ASCII | re.I)


def content_range(value: str | None) -> tuple[int, int, int | None] | None:
    """``Content-Range: bytes first-last/total`` as ``(first, last, total)`` (``total``
    ``None`` for ``*``), or ``None`` when absent, malformed or past any body's size."""
    if value is None:
        return None
    match = _CONTENT_RANGE.fullmatch(value)
    if match is None:
        return None
    first, last = count(match[1]), count(match[2])
    total = None if match[3] == "*" else count(match[3])
    if (first is None or last is None or last < first
            or (total is not None and last >= total) or (total is None and match[3] != "*")):
        return None
    return first, last, total


def _length_refused(response: Response, size: int) -> str | None:
    """Why ``response``'s ``Content-Length`` disagrees with the ``size`` bytes its range
    declares (``"..."`` to follow "in a body of"), or ``None`` when it agrees or is absent."""
    value = header(response, b"content-length")
    if value is None:
        return None
    declared = count(value.strip())
    if declared == size:
        return None
    return "unreadable length" if declared is None else f"{declared} bytes"


def media_type(response: Response) -> str:
    """The response's media type, lower case, without parameters (``""`` without one)."""
    value = header(response, b"content-type") or ""
    return value.partition(";")[0].strip().lower()


def encoding(response: Response) -> str:
    """The response's ``Content-Encoding``, normalised (``""`` for none or identity)."""
    value = (header(response, b"content-encoding") or "").strip().lower()
    return "" if value == "identity" else value


def is_event_stream(response: Response) -> bool:
    """A ``200`` ``text/event-stream`` whose bytes are the events (no content coding)."""
    return (response.status_code == 200 and media_type(response) == "text/event-stream"
            and not encoding(response))


@dataclass(slots=True)
class Ranges:
    """A body resumed by byte ranges: where the representation's bytes read so far began
    (``start``), the caller's last wanted byte (``end``, ``None``: the representation's
    end), its total length when known, and its validator and content coding."""

    etag: str
    encoding: str
    start: int
    end: int | None
    total: int | None
    #: Raw bytes handed on since ``start``.
    read: int = 0

    def size(self) -> int | None:
        """How many raw bytes, from ``start``, the bodies spliced must bring in all, no
        more and no fewer (``None`` while the representation's length is unknown)."""
        if self.end is not None:
            return self.end + 1 - self.start
        return None if self.total is None else self.total - self.start

    def range_header(self) -> str:
        """The ``Range`` of the bytes not yet read."""
        last = "" if self.end is None else str(self.end)
        return f"bytes={self.start + self.read}-{last}"

    def accepts(self, response: Response) -> str | None:
        """Why a resumption's answer is refused, or ``None`` when it is the ``206`` of the
        bytes not yet read, of the same representation (its total learned if new)."""
        status = response.status_code
        if status == 200:
            return "the server answered 200 to a range request: the resource changed"
        if status != 206:
            return f"the server answered {status} to a range request"
        parsed = content_range(header(response, b"content-range"))
        if parsed is None or media_type(response) == "multipart/byteranges":
            return "the server answered 206 without a single Content-Range"
        first, last, total = parsed
        want = self.start + self.read
        end = self.end if self.end is not None else (None if total is None else total - 1)
        if (first != want or total is None or (self.total is not None and total != self.total)
                or last != end):
            asked = f"{want}-{'' if self.end is None else self.end}"
            return (f"the server answered 206 with bytes {first}-{last}/"
                    f"{'*' if total is None else total}, not the bytes {asked} asked for")
        wrong = _length_refused(response, last + 1 - first)
        if wrong is not None:
            return f"the server answered 206 with bytes {first}-{last}/{total} in a body of {wrong}"
        etag = header(response, b"etag")
        if etag is not None and etag.strip() != self.etag:
            return "the server answered 206 with another ETag: the resource changed"
        if encoding(response) != self.encoding:
            return "the server answered 206 with another Content-Encoding"
        self.total = total
        return None


def plan(response: Response, *, ranges: bool, events: bool) -> Ranges | Literal[True] | None:
    """How ``response``'s body (to a ``GET``) may be resumed: ``True`` by event ID, a
    :class:`Ranges` by byte ranges, or ``None`` not at all. An event stream is resumed by
    event ID when both apply."""
    if events and is_event_stream(response):
        return True
    if not ranges:
        return None
    status = response.status_code
    if status != 200 and status != 206:
        return None
    etag = header(response, b"etag")
    if etag is None:
        return None
    etag = etag.strip()
    if not etag.startswith('"') or not etag.endswith('"') or len(etag) < 2:
        return None  # a weak validator (W/"...") or a malformed one
    accept = header(response, b"accept-ranges")
    if accept is not None and accept.strip().lower() == "none":
        return None
    if status == 200:
        value = header(response, b"content-length")
        total = None if value is None else count(value.strip())
        if value is not None and total is None:
            return None  # a length that cannot be read
        return Ranges(etag, encoding(response), 0, None, total)
    parsed = content_range(header(response, b"content-range"))
    if parsed is None or media_type(response) == "multipart/byteranges":
        return None
    first, last, total = parsed
    if total is None or _length_refused(response, last + 1 - first) is not None:
        return None
    return Ranges(etag, encoding(response), first, last, total)
