"""Parsing of ``Retry-After`` (RFC 9110 section 10.2.3) and HTTP dates (section 5.6.7).

Pure functions: no clock is read unless the caller leaves ``now`` out.

Rules followed here:

- ``Retry-After = HTTP-date / delay-seconds``; ``delay-seconds = 1*DIGIT`` (ASCII digits only,
  so ``-1``, ``+1``, ``1.5`` and ``²`` are not delay-seconds).
- A recipient MUST accept all three HTTP-date formats: IMF-fixdate
  (``Sun, 06 Nov 1994 08:49:37 GMT``), the obsolete RFC 850 form
  (``Sunday, 06-Nov-94 08:49:37 GMT``) and asctime (``Sun Nov  6 08:49:37 1994``, taken as UTC).
- RFC 850 two-digit years: a year that appears to be more than 50 years in the future means
  the most recent past year with the same last two digits. (``email.utils`` uses the POSIX
  69/68 pivot instead, which is why it is not used here.)
- Only optional whitespace as RFC 9110 section 5.6.3 defines it (``OWS = *( SP / HTAB )``)
  surrounds a value or separates a date's parts: spaces and horizontal tabs. Any other
  whitespace (a vertical tab, a form feed, a line break, a Unicode space such as U+00A0 or
  U+2008) makes the value malformed, where ``str.strip()`` would have ignored it.
- A date is measured against the response's ``Date`` header when it has a usable one, which
  cancels any skew between the server's clock and ours; otherwise against ``now``.
- Values may be ``str``, ``bytes`` (decoded as Latin-1, as header bytes are) or ``None`` (no
  header): ``parse_retry_after(response.headers.get("Retry-After"))`` just works.
- Anything malformed yields ``None``; nothing here raises on what a server sends, nor for any
  clock (``nan``, infinities, integers too big for a float). Only an argument of the wrong type
  raises ``TypeError``.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

__all__ = ["parse_http_date", "parse_retry_after"]

#: Delay-seconds longer than this many digits are reported as ``MAX_SECONDS``: no caller
#: needs to tell ten thousand years from a googol, and ``int()`` of a huge string is slow.
_MAX_DIGITS = 12
#: The largest value :func:`parse_retry_after` returns, in seconds (about 31,700 years).
MAX_SECONDS = float(10**_MAX_DIGITS)

_MONTHS = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
        start=1,
    )
}
_DAY = r"(?:mon|tue|wed|thu|fri|sat|sun)"
_LONG_DAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MONTH = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
_TIME = r"(\d{2}):(\d{2}):(\d{2})"

#: RFC 9110 section 5.6.3: OWS = *( SP / HTAB ). (``str.strip()`` would strip far more: line
#: breaks, vertical tabs, form feeds and every Unicode space.)
_OWS = " \t"
#: Between a date's parts: one or more SP / HTAB.
_SEP = r"[ \t]+"

# HTTP-date is case-sensitive, but recipients are "encouraged to be robust in parsing
# timestamps": names are matched in any case and runs of spaces and tabs are accepted.
_IMF_FIXDATE = re.compile(
    rf"{_DAY},{_SEP}(\d{{1,2}}){_SEP}{_MONTH}{_SEP}(\d{{4}}){_SEP}{_TIME}{_SEP}GMT",
    re.IGNORECASE | re.ASCII,
)
_RFC850_DATE = re.compile(
    rf"{_LONG_DAY},{_SEP}(\d{{1,2}})-{_MONTH}-(\d{{2}}){_SEP}{_TIME}{_SEP}GMT",
    re.IGNORECASE | re.ASCII,
)
_ASCTIME_DATE = re.compile(
    rf"{_DAY}{_SEP}{_MONTH}{_SEP}(\d{{1,2}}){_SEP}{_TIME}{_SEP}(\d{{4}})",
    re.IGNORECASE | re.ASCII,
)
_DIGITS = re.compile(r"[0-9]+", re.ASCII)


def _build(year: int, month: str, day: str, hh: str, mm: str, ss: str) -> datetime | None:
    try:
        # A leap second (":60") is folded into the second before it.
        return datetime(
            year,
            _MONTHS[month.lower()],
            int(day),
            int(hh),
            int(mm),
            min(int(ss), 59),
            tzinfo=timezone.utc,
        )
    except ValueError:
        return None


def _rfc850(yy: int, month: str, day: str, hh: str, mm: str, ss: str,
            now: datetime) -> datetime | None:
    """Build an RFC 850 date, applying RFC 9110's 50-year rule to its two-digit year.

    The date is put in the current century; if it then appears to be more than 50 years in
    the future, it means the most recent past year with the same last two digits.
    """
    year = now.year - now.year % 100 + yy
    try:
        limit = now.replace(year=now.year + 50)
    except ValueError:  # 29 February, or a clock past year 9949
        try:
            limit = now + timedelta(days=365 * 50 + 12)
        except OverflowError:  # nothing is more than 50 years ahead of such a clock
            limit = datetime.max.replace(tzinfo=timezone.utc)
    candidate = _build(year, month, day, hh, mm, ss)
    if candidate is not None and candidate > limit:
        return _build(year - 100, month, day, hh, mm, ss)
    return candidate


def _text(name: str, value: object) -> str | None:
    """A header value as text without its OWS; ``None`` for ``None`` (no header)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip(_OWS)
    if isinstance(value, bytes):
        # Latin-1 maps every byte to one character: header bytes always decode.
        return value.decode("latin-1").strip(_OWS)
    raise TypeError(f"{name} must be str, bytes or None, got {type(value).__name__}")


def _check_now(now: object) -> None:
    if now is not None and not isinstance(now, (int, float)):
        raise TypeError(
            f"now must be a number of seconds (int or float) or None, got {type(now).__name__}"
        )


def _utc(timestamp: float) -> datetime | None:
    """``timestamp`` as an aware UTC datetime; ``None`` for a time no datetime can hold (nan,
    infinities, integers too big for a float, years outside 1..9999)."""
    try:
        return datetime.fromtimestamp(timestamp, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def _date(text: str, clock: float) -> datetime | None:
    """Parse an HTTP-date already stripped of OWS; ``clock`` only resolves RFC 850 years."""
    if match := _IMF_FIXDATE.fullmatch(text):
        day, month, year, hh, mm, ss = match.groups()
        return _build(int(year), month, day, hh, mm, ss)
    if match := _RFC850_DATE.fullmatch(text):
        day, month, yy, hh, mm, ss = match.groups()
        reference = _utc(clock)
        if reference is None:
            return None
        return _rfc850(int(yy), month, day, hh, mm, ss, reference)
    if match := _ASCTIME_DATE.fullmatch(text):
        month, day, hh, mm, ss, year = match.groups()
        return _build(int(year), month, day, hh, mm, ss)
    return None


def parse_http_date(value: str | bytes | None, *, now: float | None = None) -> datetime | None:
    """Parse an HTTP-date in any of RFC 9110's three formats into an aware UTC datetime.

    ``value`` is the header's text, its raw bytes (decoded as Latin-1) or ``None`` (no header:
    gives ``None``); spaces and tabs around it are ignored. ``now`` (a POSIX timestamp in
    seconds; default: the current time) only matters for the RFC 850 format, whose two-digit
    year is resolved with the 50-year rule; a ``now`` that names no moment (``nan``,
    infinities, beyond year 9999) makes an RFC 850 date unusable. Returns ``None`` for
    anything that is not a valid date; never raises but ``TypeError`` for an argument of
    the wrong type.
    """
    text = _text("value", value)
    _check_now(now)
    if text is None:
        return None
    return _date(text, time.time() if now is None else now)


def parse_retry_after(
    value: str | bytes | None,
    *,
    now: float | None = None,
    date: str | bytes | None = None,
) -> float | None:
    """Return how many seconds a ``Retry-After`` value asks the client to wait.

    Args:
        value: the header's text: delay-seconds (``"120"``) or an HTTP-date; or its raw
            bytes (decoded as Latin-1); or ``None`` when there is no such header. Spaces and
            tabs around it are ignored, and no other whitespace.
        now: the current POSIX time in seconds; default: ``time.time()``. Any number is
            accepted: one that names no moment (``nan``, infinities, integers too big for a
            float, beyond year 9999) is no clock, so an HTTP-date can then only be measured
            against a usable ``date`` (and not be in the RFC 850 format).
        date: the response's ``Date`` header (text, bytes or ``None``). When it is a valid
            HTTP-date, an HTTP-date ``value`` is measured against it instead of ``now``.

    Returns:
        Seconds to wait: finite, ``>= 0`` (a date in the past gives ``0.0``) and at most
        ``MAX_SECONDS``; or ``None`` when the value is missing or unusable (empty, negative,
        fractional, not ASCII, other whitespace than spaces and tabs, not a valid date, or a
        date with no usable clock to measure it against). Never raises on a server's text
        nor for any clock.

    Raises:
        TypeError: ``value`` or ``date`` is not ``str``, ``bytes`` or ``None``, or ``now`` is
            not a number or ``None``.
    """
    text = _text("value", value)
    date_text = _text("date", date)
    _check_now(now)
    if text is None:
        return None
    if _DIGITS.fullmatch(text):
        digits = text.lstrip("0")
        if len(digits) > _MAX_DIGITS:
            return MAX_SECONDS
        return float(int(digits or "0"))
    clock = time.time() if now is None else now
    target = _date(text, clock)
    if target is None:
        return None
    reference = _date(date_text, clock) if date_text is not None else None
    if reference is None:
        reference = _utc(clock)
        if reference is None:
            return None
    seconds = (target - reference).total_seconds()
    return min(max(seconds, 0.0), MAX_SECONDS)
