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
- A date is measured against the response's ``Date`` header when it has a usable one, which
  cancels any skew between the server's clock and ours; otherwise against ``now``.
- Anything malformed yields ``None``; nothing here raises on what a server sends.
"""

from __future__ import annotations

import math
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

# HTTP-date is case-sensitive, but recipients are "encouraged to be robust in parsing
# timestamps": names are matched in any case and runs of spaces are accepted.
_IMF_FIXDATE = re.compile(
    rf"{_DAY},\s+(\d{{1,2}})\s+{_MONTH}\s+(\d{{4}})\s+{_TIME}\s+GMT", re.IGNORECASE | re.ASCII
)
_RFC850_DATE = re.compile(
    rf"{_LONG_DAY},\s+(\d{{1,2}})-{_MONTH}-(\d{{2}})\s+{_TIME}\s+GMT", re.IGNORECASE | re.ASCII
)
_ASCTIME_DATE = re.compile(
    rf"{_DAY}\s+{_MONTH}\s+(\d{{1,2}})\s+{_TIME}\s+(\d{{4}})", re.IGNORECASE | re.ASCII
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


def parse_http_date(value: str, *, now: float | None = None) -> datetime | None:
    """Parse an HTTP-date in any of RFC 9110's three formats into an aware UTC datetime.

    ``now`` (a POSIX timestamp in seconds; default: the current time) only matters for the
    RFC 850 format, whose two-digit year is resolved with the 50-year rule. Returns ``None``
    for anything that is not a valid date.
    """
    text = value.strip()
    if match := _IMF_FIXDATE.fullmatch(text):
        day, month, year, hh, mm, ss = match.groups()
        return _build(int(year), month, day, hh, mm, ss)
    if match := _RFC850_DATE.fullmatch(text):
        day, month, yy, hh, mm, ss = match.groups()
        reference = _utc(time.time() if now is None else now)
        if reference is None:
            return None
        return _rfc850(int(yy), month, day, hh, mm, ss, reference)
    if match := _ASCTIME_DATE.fullmatch(text):
        month, day, hh, mm, ss, year = match.groups()
        return _build(int(year), month, day, hh, mm, ss)
    return None


def _utc(timestamp: float) -> datetime | None:
    try:
        return datetime.fromtimestamp(timestamp, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def parse_retry_after(
    value: str, *, now: float | None = None, date: str | None = None
) -> float | None:
    """Return how many seconds a ``Retry-After`` value asks the client to wait.

    Args:
        value: the header's text: delay-seconds (``"120"``) or an HTTP-date.
        now: the current POSIX time in seconds; default: ``time.time()``.
        date: the response's ``Date`` header, or ``None``. When it is a valid HTTP-date, an
            HTTP-date ``value`` is measured against it instead of ``now``.

    Returns:
        Seconds to wait: finite, ``>= 0`` (a date in the past gives ``0.0``) and at most
        ``MAX_SECONDS``; or ``None`` when the value is unusable (empty, negative, fractional,
        not ASCII, not a valid date). Never raises on a server's text.
    """
    text = value.strip()
    if _DIGITS.fullmatch(text):
        digits = text.lstrip("0")
        if len(digits) > _MAX_DIGITS:
            return MAX_SECONDS
        return float(int(digits or "0"))
    if now is None:
        now = time.time()
    if not math.isfinite(now):
        return None
    target = parse_http_date(text, now=now)
    if target is None:
        return None
    reference = parse_http_date(date, now=now) if date is not None else None
    if reference is None:
        reference = _utc(now)
        if reference is None:
            return None
    seconds = (target - reference).total_seconds()
    return min(max(seconds, 0.0), MAX_SECONDS)
