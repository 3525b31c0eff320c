"""The pure reading behind resumable bodies: which responses may be resumed and how
(``_wire/resumable.py``), what a resumption's answer must be, and the event-stream scanner
(``_wire/events.py``), checked against the HTML standard's rules."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given, strategies as st

from retry_transport._wire.events import EventScanner
from retry_transport._wire.http import length
from retry_transport._wire.resumable import Ranges, content_range, plan


def response(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers={k.replace("_", "-"): v for k, v in headers.items()})


@pytest.mark.parametrize("value, parsed", [
    ("bytes 0-99/100", (0, 99, 100)),
    ("bytes 5-9/*", (5, 9, None)),
    (" BYTES 5-9/10 ", (5, 9, 10)),
    ("bytes 9-5/10", None),  # last before first
    ("bytes 5-10/10", None),  # past the total
    ("bytes */10", None),  # an unsatisfied range's form
    ("items 0-1/2", None),
    ("bytes 0-1", None),
    (None, None),
    # past what int() reads: unusable
    pytest.param("bytes 0-" + "9" * 5000 + "/" + "9" * 5001, None, id="5000-digits"),
    pytest.param("bytes 0-99/" + "0" * 5000 + "100", (0, 99, 100), id="leading-zeros"),
    ("bytes 0-99/" + "9" * 19, None),  # more bytes than any representation has
])
def test_content_range(value: str | None, parsed: object) -> None:
    assert content_range(value) == parsed


@pytest.mark.parametrize("value, declared", [
    ("100", 100), (" 100 ", 100), ("0", 0), ("0" * 5000 + "7", 7), ("9" * 18, 10**18 - 1),
    ("9" * 19, None), ("9" * 5000, None), ("1e3", None), ("-1", None), ("\xb2", None),
    ("", None),
], ids=lambda v: v if isinstance(v, int) or v is None or len(v) < 20 else f"{len(v)}-chars")
def test_a_declared_length_is_read_without_raising(value: str, declared: int | None) -> None:
    # the one reading of Content-Length: resumption's counts and retry_body_errors' limit
    headers = [(b"content-length", value.encode("latin-1"))]
    assert length(httpx.Response(200, headers=headers)) == declared


@pytest.mark.parametrize("status, headers, how", [
    (200, {"etag": '"a"', "content_length": "10"}, Ranges('"a"', "", 0, None, 10)),
    (200, {"etag": '"a"'}, Ranges('"a"', "", 0, None, None)),  # total learned later
    (200, {"etag": '"a"', "content_encoding": "gzip"}, Ranges('"a"', "gzip", 0, None, None)),
    (206, {"etag": '"a"', "content_range": "bytes 5-9/20"}, Ranges('"a"', "", 5, 9, 20)),
    (206, {"etag": '"a"'}, None),  # no Content-Range
    (206, {"etag": '"a"', "content_range": "bytes 5-9/*"}, None),  # no total
    (206, {"etag": '"a"', "content_range": "bytes 5-9/20",
           "content_type": "multipart/byteranges; boundary=x"}, None),
    (200, {"etag": 'W/"a"'}, None),  # a weak validator
    (200, {"etag": "a"}, None),  # malformed
    (200, {}, None),
    (200, {"etag": '"a"', "accept_ranges": "none"}, None),
    (200, {"etag": '"a"', "accept_ranges": "bytes"}, Ranges('"a"', "", 0, None, None)),
    (304, {"etag": '"a"'}, None),
    (200, {"content_type": "text/event-stream"}, True),
    (200, {"content_type": "Text/Event-Stream; charset=utf-8", "etag": '"a"'}, True),
    (200, {"content_type": "text/event-stream", "content_encoding": "gzip"}, None),
    (200, {"content_type": "text/event-stream", "content_encoding": "identity"}, True),
    (201, {"content_type": "text/event-stream"}, None),
    # a header that cannot be read: not resumable, never an exception
    pytest.param(200, {"etag": '"a"', "content_length": "9" * 5000}, None,
                 id="length-5000-digits"),
    (200, {"etag": '"a"', "content_length": "ten"}, None),
    (206, {"etag": '"a"', "content_range": "bytes 5-9/20", "content_length": "5"},
     Ranges('"a"', "", 5, 9, 20)),
    (206, {"etag": '"a"', "content_range": "bytes 5-9/20", "content_length": "6"}, None),
    pytest.param(206, {"etag": '"a"', "content_range": "bytes 0-" + "9" * 5000 + "/1"}, None,
                 id="range-5000-digits"),
    pytest.param(200, {"etag": '"' + "a" * 100_000 + '"', "content_length": "10"},
                 Ranges('"' + "a" * 100_000 + '"', "", 0, None, 10), id="etag-100-kb"),
])
def test_what_may_be_resumed(status: int, headers: dict[str, str], how: object) -> None:
    assert plan(response(status, **headers), ranges=True, events=True) == how


def test_each_kind_can_be_turned_off() -> None:
    both = response(200, etag='"a"', content_type="text/event-stream")
    assert plan(both, ranges=True, events=False) == Ranges('"a"', "", 0, None, None)
    assert plan(both, ranges=False, events=True) is True
    assert plan(response(200, etag='"a"'), ranges=False, events=True) is None


@pytest.mark.parametrize("ranges, answer, why", [
    (Ranges('"a"', "", 0, None, 100, 40), response(206, content_range="bytes 40-99/100"), None),
    (Ranges('"a"', "", 0, None, None, 40), response(206, content_range="bytes 40-99/100"),
     None),
    (Ranges('"a"', "", 10, 49, 100, 5), response(206, content_range="bytes 15-49/100"), None),
    (Ranges('"a"', "", 0, None, 100, 40),
     response(206, content_range="bytes 40-99/100", etag='"a"'), None),
    (Ranges('"a"', "", 0, None, 100, 40), response(200),
     "the server answered 200 to a range request: the resource changed"),
    (Ranges('"a"', "", 0, None, 100, 40), response(416),
     "the server answered 416 to a range request"),
    (Ranges('"a"', "", 0, None, 100, 40), response(206),
     "the server answered 206 without a single Content-Range"),
    (Ranges('"a"', "", 0, None, 100, 40), response(206, content_range="bytes 41-99/100"),
     "the server answered 206 with bytes 41-99/100, not the bytes 40- asked for"),
    (Ranges('"a"', "", 0, None, 100, 40), response(206, content_range="bytes 40-98/100"),
     "the server answered 206 with bytes 40-98/100, not the bytes 40- asked for"),
    (Ranges('"a"', "", 0, None, 100, 40), response(206, content_range="bytes 40-99/101"),
     "the server answered 206 with bytes 40-99/101, not the bytes 40- asked for"),
    (Ranges('"a"', "", 0, None, None, 40), response(206, content_range="bytes 40-99/*"),
     "the server answered 206 with bytes 40-99/*, not the bytes 40- asked for"),
    (Ranges('"a"', "", 10, 49, 100, 5), response(206, content_range="bytes 15-99/100"),
     "the server answered 206 with bytes 15-99/100, not the bytes 15-49 asked for"),
    (Ranges('"a"', "", 0, None, 100, 40),
     response(206, content_range="bytes 40-99/100", etag='"b"'),
     "the server answered 206 with another ETag: the resource changed"),
    (Ranges('"a"', "gzip", 0, None, 100, 40), response(206, content_range="bytes 40-99/100"),
     "the server answered 206 with another Content-Encoding"),
    pytest.param(Ranges('"a"', "", 0, None, 100, 40),
                 response(206, content_range="bytes 40-" + "9" * 5000 + "/" + "9" * 5001),
                 "the server answered 206 without a single Content-Range", id="5000-digits"),
    (Ranges('"a"', "", 0, None, 100, 40),
     response(206, content_range="bytes 40-99/100", content_length="61"),
     "the server answered 206 with bytes 40-99/100 in a body of 61 bytes"),
    pytest.param(Ranges('"a"', "", 0, None, 100, 40),
                 response(206, content_range="bytes 40-99/100", content_length="9" * 5000),
                 "the server answered 206 with bytes 40-99/100 in a body of unreadable length",
                 id="length-5000-digits"),
    (Ranges('"a"', "", 0, None, 100, 40),
     response(206, content_range="bytes 40-99/100", content_length="60"), None),
])
def test_what_a_resumption_may_answer(ranges: Ranges, answer: httpx.Response,
                                      why: str | None) -> None:
    assert ranges.accepts(answer) == why


def test_the_range_asked_for() -> None:
    assert Ranges('"a"', "", 0, None, None, 40).range_header() == "bytes=40-"
    assert Ranges('"a"', "", 10, 49, 100, 5).range_header() == "bytes=15-49"


def test_a_total_is_learned_from_the_first_206() -> None:
    ranges = Ranges('"a"', "", 0, None, None, 40)
    assert ranges.accepts(response(206, content_range="bytes 40-99/100")) is None
    assert ranges.total == 100


# -- the event-stream scanner ------------------------------------------------------------


def fed(scanner: EventScanner, chunk: bytes) -> bytes:
    """What one :meth:`EventScanner.feed` hands on, as one string of bytes."""
    return b"".join(scanner.feed(chunk))


def scan(body: bytes, size: int) -> tuple[bytes, EventScanner]:
    scanner = EventScanner()
    out = b"".join(fed(scanner, body[i:i + size]) for i in range(0, len(body), size))
    return out, scanner


@pytest.mark.parametrize("body, last_id, retry_ms", [
    (b"id: 1\ndata: a\n\n", "1", None),
    (b"id: 1\r\ndata: a\r\n\r\n", "1", None),
    (b"id: 1\rdata: a\r\r", "1", None),
    (b"id:1\n\n", "1", None),  # no space after the colon
    (b"id:  1\n\n", " 1", None),  # only one space is dropped
    (b"id: 1\n\nid\n\n", None, None),  # an empty id clears it
    (b"id: 1\n\nid: \n\n", None, None),
    (b"id: 1\n\nid: a\x00b\n\n", "1", None),  # an id with NULL is ignored
    (b"id: 1\n\nidx: 2\n\n", "1", None),  # not the id field
    (b"id: 1\n\nid: 2\n", "1", None),  # the event with id 2 has not ended
    (b"retry: 300\n\n", None, 300),
    (b"retry: 3a0\n\n", None, None),  # digits only
    (b"retry: -1\n\n", None, None),
    (b"retry: \xd9\xa3\n\n", None, None),  # a non-ASCII digit
    (b"retry: 300\n", None, 300),  # set as the line is read
    (b"retry: 007\n", None, 7),
    # a time longer than any wait, of any length, is kept as the longest: never an error
    pytest.param(b"retry: " + b"9" * 5000 + b"\n", None, 10**12, id="retry-5000-digits"),
    pytest.param(b"retry: 1" + b"0" * 400 + b"\n", None, 10**12, id="retry-401-digits"),
    pytest.param(b"retry: " + b"0" * 5000 + b"5\n", None, 5, id="retry-leading-zeros"),
    (b"\xef\xbb\xbfid: 7\n\n", "7", None),  # the first body's BOM is not part of the name
    (b": comment\nid: 2\n\n", "2", None),
    (b"id: \xe2\x82\xac\n\n", "\u20ac", None),
])
@pytest.mark.parametrize("size", [1, 2, 3, 1000])
def test_the_scanner_reads_as_the_standard_says(body: bytes, last_id: str | None,
                                                 retry_ms: int | None, size: int) -> None:
    out, scanner = scan(body, size)
    assert (scanner.last_id, scanner.retry_ms) == (last_id, retry_ms)
    assert out + scanner.rest() == body  # nothing lost, nothing added


def test_only_whole_events_are_handed_on() -> None:
    scanner = EventScanner()
    assert fed(scanner, b"id: 1\ndata: a\n") == b""
    assert fed(scanner, b"\nid: 2\nda") == b"id: 1\ndata: a\n\n"
    assert fed(scanner, b"ta: b\n\n") == b"id: 2\ndata: b\n\n"


def test_a_crlf_split_between_chunks_is_one_line_end() -> None:
    scanner = EventScanner()
    assert fed(scanner, b"data: a\r\n\r") == b"data: a\r\n\r"  # the event ended at the CR
    assert fed(scanner, b"\ndata: b\r") == b"\n"  # ... its LF follows at once
    assert fed(scanner, b"\n\r\n") == b"data: b\r\n\r\n"  # the CR of "b" was half a CRLF


def test_a_restart_drops_the_torn_event_and_what_it_set() -> None:
    scanner = EventScanner()
    fed(scanner, b"id: 1\ndata: a\n\nid: 2\ndata: b")
    assert scanner.last_id == "1"
    scanner.restart()
    # the new body opens with a BOM (dropped) and replays event 2
    assert fed(scanner, b"\xef\xbb") == b""
    assert fed(scanner, b"\xbfid: 2\ndata: b\n\n") == b"id: 2\ndata: b\n\n"
    assert scanner.last_id == "2"


@given(st.lists(st.sampled_from([b"id: 1", b"id: 22", b"id", b"data: x", b"retry: 5",
                                 b": c", b"", b"\xef\xbb\xbfid: 3"]), max_size=12),
       st.sampled_from([b"\n", b"\r", b"\r\n"]), st.integers(1, 7))
def test_any_split_reads_as_the_whole(lines: list[bytes], newline: bytes, size: int) -> None:
    body = b"".join(line + newline for line in lines)
    whole = EventScanner()
    whole_out = fed(whole, body)
    out, split = scan(body, size)
    assert (split.last_id, split.retry_ms) == (whole.last_id, whole.retry_ms)
    assert out + split.rest() == whole_out + whole.rest() == body
    ends = out.endswith((newline + newline, b"\n\n")) or not out
    assert ends or out == newline  # only whole events (or a lone blank line) handed on


def test_a_retry_of_any_length_never_breaks_the_read() -> None:
    scanner = EventScanner()
    chunk = b"id: 1\ndata: a\n\nretry: " + b"9" * 5000 + b"\ndata: b\n\n"
    assert fed(scanner, chunk) == chunk  # the event before it, and the one it is in
    assert (scanner.last_id, scanner.retry_ms) == ("1", 10**12)


def test_an_event_arriving_in_many_chunks_is_handed_on_without_copying() -> None:
    # Held back until it ends, an event's chunks are kept as they came and handed on
    # as they are: nothing held is copied again when a chunk arrives, so an event of n
    # bytes costs time in proportion to n, however many chunks bring it.
    scanner = EventScanner()
    chunks = [b"id: 1\ndata: "] + [bytes([n % 200 + 32]) * 1000 for n in range(2000)]
    for chunk in chunks:
        assert scanner.feed(chunk) == []
    last = b"\n\nid: 2\ndata: x"
    out = scanner.feed(last)
    assert len(out) == len(chunks) + 1
    assert all(piece is chunk for piece, chunk in zip(out, chunks, strict=False))
    assert out[-1] == b"\n\n"
    assert scanner.last_id == "1"
    assert scanner.rest() == b"id: 2\ndata: x"


class Seen(bytes):
    """A chunk that counts the bytes split into lines."""

    split = 0

    def splitlines(self, keepends: bool = False) -> list[bytes]:
        Seen.split += len(self)
        return super().splitlines(keepends)


@pytest.mark.parametrize("line", [b"data: ", b"id: ", b""], ids=["data", "id", "none"])
def test_each_byte_is_split_into_lines_once(line: bytes) -> None:
    # one long line (a data line, an id line being read, a field with no name) arriving
    # a kilobyte at a time: each chunk is split once, when it arrives
    scanner = EventScanner()
    chunks = [Seen(line)] + [Seen(b"y" * 1000) for _ in range(500)] + [Seen(b"\n\n")]
    Seen.split = 0
    out = b"".join(piece for chunk in chunks for piece in scanner.feed(chunk))
    assert Seen.split == sum(len(chunk) for chunk in chunks)
    assert out == b"".join(chunks)
    if line == b"id: ":
        assert scanner.last_id == "y" * 500_000


#: (body, events the HTML standard dispatches): only an event with a ``data`` field counts.
DISPATCHED = [
    (b"data: a\n\n", 1),
    (b"data\n\n", 1),  # a data field with no value: an event with empty data
    (b"data:\r\n\r\n", 1),
    (b"event: x\ndata: a\rdata: b\r\r", 1),
    (b": ping\n\n: ping\n\n", 0),  # comments and blank lines
    (b"\n\n\n", 0),
    (b"id: 1\n\nretry: 5\n\n", 0),  # blocks of only id / retry
    (b"event: x\n\n", 0),  # no data: not dispatched
    (b"datax: a\n\ndat\n\nd\n\n", 0),  # other fields
    (b"data: a\n", 0),  # not ended yet
    (b"\xef\xbb\xbfdata: a\n\n: ping\n\nid: 2\ndata: b\n\n", 2),
]


@pytest.mark.parametrize("body, count", DISPATCHED)
@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 1000])
def test_the_scanner_counts_the_events_the_standard_dispatches(body: bytes, count: int,
                                                               size: int) -> None:
    """``dispatched`` counts the ended events with a data field, however the body is cut
    (what ``idle_timeout`` counts as progress on an event stream)."""
    _, scanner = scan(body, size)
    assert scanner.dispatched == count


def test_a_torn_event_left_by_a_break_is_not_dispatched_by_the_next_body() -> None:
    """After :meth:`EventScanner.restart`, the torn event's data line counts for nothing."""
    scanner = EventScanner()
    scanner.feed(b"id: 1\ndata: a\n\ndata: torn")
    scanner.restart()
    scanner.feed(b"id: 2\n\n")
    assert scanner.dispatched == 1
