"""Parsing of the retry and rate-limit signals servers send besides ``Retry-After``.

Sans-I/O and pure: no HTTP library is imported and no clock is read; the wall clock and the
response's ``Date`` header are passed in. Every wait is in seconds.

- ``retry-after-ms`` (:func:`parse_retry_after_ms`): a wait in milliseconds.
- ``x-should-retry`` (:func:`parse_should_retry`): the server's own verdict, ``true`` or
  ``false``.
- Go durations (:func:`parse_duration`), as OpenAI's ``x-ratelimit-reset-*`` send them.
- RFC 3339 date-times (:func:`parse_rfc3339`), as Anthropic's
  ``anthropic-ratelimit-*-reset`` send them.
- The ``RateLimit`` field of draft-ietf-httpapi-ratelimit-headers-09
  (:func:`parse_ratelimit`), a Structured Field (RFC 8941).
- :func:`exhausted_quota` reads every rate-limit family above (and the older
  ``RateLimit-Remaining``/``RateLimit-Reset`` and ``X-RateLimit-*`` pairs) and says how long
  until an exhausted quota resets.

Rules followed here, as in :mod:`._retry_after`:

- Only RFC 9110 section 5.6.3 optional whitespace (``OWS = *( SP / HTAB )``) around a value
  is ignored. Any other whitespace (a vertical tab, a line break, U+00A0...) makes the value
  malformed.
- Digits are the ASCII digits ``0``-``9`` (every regex is ``re.ASCII``): ``²`` or ``١`` are
  not digits. Nothing depends on the locale.
- Values may be ``str``, ``bytes`` (decoded as Latin-1, as header bytes are) or ``None`` (no
  header, which gives ``None``).
- Anything malformed yields ``None``; nothing here raises on what a server sends, nor for any
  clock (``nan``, infinities, integers too big for a float). Only an argument of the wrong
  type raises ``TypeError``.
- Every wait returned is finite, ``>= 0`` and at most :data:`MAX_SECONDS`; a number with
  more digits than any wait needs is reported as ``MAX_SECONDS`` (and never handed to
  ``int()``, which is slow on huge strings).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime

from .retry_after import MAX_SECONDS, _text, parse_http_date
from .sfv import Bare as _Bare, Malformed as _Malformed, sf_list as _sf_list

__all__ = [
    "exhausted_quota",
    "parse_duration",
    "parse_ratelimit",
    "parse_retry_after_ms",
    "parse_rfc3339",
    "parse_should_retry",
]

# -- numbers ---------------------------------------------------------------------------

#: A non-negative decimal number: ``1*DIGIT [ "." 1*DIGIT ]`` (no sign, no exponent, no
#: leading or trailing ``.``).
_DECIMAL = r"[0-9]+(?:\.[0-9]+)?"
_NUMBER = re.compile(_DECIMAL, re.ASCII)
#: A number whose integer part has more significant digits than this is larger than any
#: value read here can usefully be (1e20 ms, 1e20 s, an epoch 1e20): it reads as infinity,
#: which every caller clamps to ``MAX_SECONDS``.
_MAX_NUMBER_DIGITS = 20


def _number(text: str) -> float | None:
    """A ``_DECIMAL`` as a float (``math.inf`` when too long to matter); ``None`` if not one."""
    if _NUMBER.fullmatch(text) is None:
        return None
    whole = text.partition(".")[0].lstrip("0")
    if len(whole) > _MAX_NUMBER_DIGITS:
        return math.inf
    # float() of a validated decimal is exact to the last digit, linear in its length, and
    # does not depend on the locale.
    return float(text)


def _clamp(seconds: float) -> float:
    """A wait within ``0..MAX_SECONDS``: a time in the past is no wait."""
    return min(max(seconds, 0.0), MAX_SECONDS)


# -- retry-after-ms, x-should-retry ----------------------------------------------------


def parse_retry_after_ms(value: str | bytes | None) -> float | None:
    """Return how many **seconds** a ``retry-after-ms`` value asks the client to wait.

    ``retry-after-ms`` (sent by OpenAI and Anthropic, among others, and read by their SDKs)
    is a wait in **milliseconds**: a non-negative decimal number, ASCII digits with an
    optional fraction (``"1500"``, ``"0.5"``, ``"250.75"``). No sign, exponent, ``inf``,
    ``nan``, digit separator, nor a leading or trailing ``.``; OWS (RFC 9110 section 5.6.3:
    spaces and tabs) around it is ignored.

    Args:
        value: the header's text, its raw bytes (decoded as Latin-1), or ``None`` (no header).

    Returns:
        The wait in seconds (the milliseconds divided by 1000), at most ``MAX_SECONDS``; or
        ``None`` when the value is missing or malformed. Never raises on a server's text.

    Raises:
        TypeError: ``value`` is not ``str``, ``bytes`` or ``None``.
    """
    text = _text("value", value)
    if text is None:
        return None
    milliseconds = _number(text)
    if milliseconds is None:
        return None
    return min(milliseconds / 1000.0, MAX_SECONDS)


_BOOLEAN = re.compile(r"(true)|false", re.ASCII | re.IGNORECASE)


def parse_should_retry(value: str | bytes | None) -> bool | None:
    """Read an ``x-should-retry`` value (OpenAI's and Anthropic's servers send it).

    Accepted: ``true`` and ``false`` in any ASCII case (``TRUE``, ``False``), with OWS
    (spaces and tabs) around it ignored. Anything else (``1``, ``yes``, ``""``, a Unicode
    look-alike) is no verdict.

    Returns:
        ``True`` (the server says a retry may succeed), ``False`` (it says not to retry), or
        ``None`` (missing or malformed). Never raises on a server's text.

    Raises:
        TypeError: ``value`` is not ``str``, ``bytes`` or ``None``.
    """
    text = _text("value", value)
    if text is None:
        return None
    match = _BOOLEAN.fullmatch(text)
    if match is None:
        return None
    return match.group(1) is not None


# -- Go durations ----------------------------------------------------------------------

#: A unit's length as (multiplier, divisor): dividing by an exact power of ten rounds
#: correctly where multiplying by 0.001 would not.
_UNITS: dict[str, tuple[float, float]] = {
    "h": (3600.0, 1.0),
    "m": (60.0, 1.0),
    "s": (1.0, 1.0),
    "ms": (1.0, 1e3),
    "us": (1.0, 1e6),
    "\u00b5s": (1.0, 1e6),  # MICRO SIGN, which Go's Duration.String() writes
    "\u03bcs": (1.0, 1e6),  # GREEK SMALL LETTER MU, which Go's ParseDuration also accepts
    # The same two in UTF-8, as raw header bytes decoded as Latin-1 spell them.
    "\u00c2\u00b5s": (1.0, 1e6),
    "\u00ce\u00bcs": (1.0, 1e6),
    "ns": (1.0, 1e9),
}
# Longest first, so that "ms" is not read as "m" followed by garbage.
_UNIT = "|".join(sorted(_UNITS, key=len, reverse=True))
_DURATION = re.compile(rf"(?:{_DECIMAL}(?:{_UNIT}))+|0", re.ASCII)
_DURATION_PART = re.compile(rf"({_DECIMAL})({_UNIT})", re.ASCII)


def parse_duration(value: str | bytes | None) -> float | None:
    """Return the **seconds** a Go-style duration names (``time.ParseDuration``'s syntax).

    OpenAI's ``x-ratelimit-reset-requests`` and ``x-ratelimit-reset-tokens`` look like
    ``"1s"``, ``"6m0s"``, ``"20ms"`` or ``"1h2m3.5s"``. Accepted: one or more
    ``number unit`` parts with nothing between them, whose lengths add up (in any order, as
    Go adds them); each number a non-negative decimal (ASCII digits, optional fraction, no
    leading or trailing ``.``: stricter than Go, which takes ``.5s``); the units, case
    sensitive, ``h``, ``m``, ``s``, ``ms``, ``us``, ``µs`` (U+00B5, as Go writes it) and
    ``μs`` (U+03BC), also when their UTF-8 bytes were decoded as Latin-1, and ``ns``. A bare
    ``0`` is zero, as in Go. No sign (Go's ``-``/``+``), no spaces inside; OWS (spaces and
    tabs) around the value is ignored.

    Returns:
        Seconds, finite, ``>= 0`` and at most ``MAX_SECONDS``; or ``None`` when missing or
        malformed (``""``, ``"5"``, ``"1d"``, ``"1 s"``, ``"-1s"``). Never raises on a
        server's text.

    Raises:
        TypeError: ``value`` is not ``str``, ``bytes`` or ``None``.
    """
    text = _text("value", value)
    if text is None or _DURATION.fullmatch(text) is None:
        return None
    total = 0.0
    for number, unit in _DURATION_PART.findall(text):
        multiplier, divisor = _UNITS[unit]
        parsed = _number(number)
        if parsed is None:  # cannot happen: the whole value matched
            return None
        total += parsed * multiplier / divisor
    return min(total, MAX_SECONDS)


# -- RFC 3339 --------------------------------------------------------------------------

# RFC 3339 section 5.6: date-time = full-date "T" full-time; "T" and "Z" may be lower case
# (section 5.6, NOTE), and a space may separate the date from the time (same NOTE).
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]"
    r"([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))",
    re.ASCII,
)
_EPOCH = datetime(1970, 1, 1)


def parse_rfc3339(value: str | bytes | None) -> float | None:
    """Return the POSIX timestamp (**seconds** since 1970-01-01 UTC) of an RFC 3339 date-time.

    Anthropic's ``anthropic-ratelimit-*-reset`` look like ``"2026-12-01T12:00:30Z"``.
    Accepted (RFC 3339 section 5.6): ``YYYY-MM-DDTHH:MM:SS``, an optional fraction of a
    second of any length (``.5``, ``.123456789012``), then a REQUIRED offset: ``Z`` or
    ``+HH:MM`` / ``-HH:MM`` (``-00:00``, "offset unknown", is taken as UTC). ``T`` and ``Z``
    may be lower case, and a single space may stand for ``T`` (both allowed by the RFC's
    NOTE). The date must exist (no 30 February), hours 00-23, minutes 00-59, seconds 00-60
    (a leap second, ``:60``, is folded into the second before it); the offset's hours 00-23
    and minutes 00-59. OWS (spaces and tabs) around the value is ignored.

    Returns:
        The timestamp (any offset applied), or ``None`` when missing, malformed, without an
        offset, or out of range (year 0000, which no ``datetime`` holds). Never raises on a
        server's text.

    Raises:
        TypeError: ``value`` is not ``str``, ``bytes`` or ``None``.
    """
    text = _text("value", value)
    if text is None:
        return None
    match = _RFC3339.fullmatch(text)
    if match is None:
        return None
    year, month, day, hh, mm, ss, fraction, sign, off_h, off_m = match.groups()
    second = int(ss)
    if second > 60:
        return None
    try:
        # A leap second (":60") is folded into the second before it.
        moment = datetime(int(year), int(month), int(day), int(hh), int(mm), min(second, 59))
    except ValueError:  # no such date or time, or year 0000
        return None
    offset = 0
    if sign is not None:
        if int(off_h) > 23 or int(off_m) > 59:
            return None
        offset = (int(off_h) * 3600 + int(off_m) * 60) * (1 if sign == "+" else -1)
    # Arithmetic on a naive datetime: an offset may not push it out of datetime's range.
    seconds = (moment - _EPOCH).total_seconds() - offset
    if fraction is not None:
        seconds += float("0." + fraction)
    return seconds


# -- Structured Fields (RFC 8941) and the RateLimit field ------------------------------


def parse_ratelimit(value: str | bytes | None) -> tuple[int, float] | None:
    """Read the ``RateLimit`` field of draft-ietf-httpapi-ratelimit-headers-09 (section 4).

    The field is a Structured Field List (RFC 8941 section 3.1) of Service Limit Items, e.g.
    ``"default";r=0;t=30, "daily";r=100;t=3600``. Each item is a String or a Token (the
    quota policy's name) with Parameters: ``r``, REQUIRED, the remaining quota units, and
    ``t``, OPTIONAL, the seconds until the quota resets, both non-negative Integers; other
    parameters (``pk``, vendor ones) are ignored, whatever their type.

    RFC 8941 syntax is parsed in full: Strings with their ``\\"`` and ``\\\\`` escapes,
    Tokens, Integers (at most 15 digits), Decimals, Byte Sequences, Booleans and RFC 9651's
    Dates and Display Strings as parameter values; ``";" *SP key ["=" value]`` parameters
    (lower-case keys, no space before ``;`` nor around ``=``); OWS (spaces and tabs) around
    each ``,``, none after a trailing one. OWS around the whole value is ignored. A List
    split over several field lines must be joined with ``", "`` first (RFC 8941 section
    4.2).

    The draft says a malformed field MUST be ignored: the whole field is ignored (``None``)
    when it is not a valid List, when an item is an Inner List or not a String or Token,
    when an item has no ``r``, or when an ``r`` or a ``t`` is not a non-negative Integer.

    Returns:
        ``(remaining, reset_seconds)`` of the item that matters: among items with
        ``r == 0``, the one with the longest ``t``; if none has ``r == 0``, the one with the
        smallest ``r`` (the longest ``t`` among equals); the first one on a tie. Items
        without ``t`` cannot be chosen. ``reset_seconds`` is at most ``MAX_SECONDS``.
        ``None`` when missing, malformed, or no item has both ``r`` and ``t``. Never raises
        on a server's text.

    Raises:
        TypeError: ``value`` is not ``str``, ``bytes`` or ``None``.
    """
    text = _text("value", value)
    if text is None:
        return None
    try:
        members = _sf_list(text)
    except _Malformed:
        return None
    best: tuple[int, int] | None = None
    for (kind, _name), parameters in members:
        if kind not in ("string", "token"):
            return None
        r = _non_negative_integer(parameters.get("r"))
        if r is None:  # no r (it is REQUIRED), or not a non-negative Integer
            return None
        if "t" not in parameters:  # no reset: nothing to wait for
            continue
        t = _non_negative_integer(parameters["t"])
        if t is None:
            return None
        # The most pressing: the fewest remaining units, then the longest reset.
        if best is None or (r, -t) < (best[0], -best[1]):
            best = (r, t)
    if best is None:
        return None
    return best[0], min(float(best[1]), MAX_SECONDS)


def _non_negative_integer(item: _Bare | None) -> int | None:
    """A parameter's value if it is a non-negative Integer, else ``None``."""
    if item is None:
        return None
    kind, number = item
    if kind != "integer" or not isinstance(number, int) or number < 0:
        return None
    return number


# -- exhausted quotas ------------------------------------------------------------------

#: A reset number above this is a POSIX timestamp, at or below it delay-seconds: 1e9
#: seconds is almost 32 years, and the timestamp 1e9 is September 2001.
_EPOCH_THRESHOLD = 1e9
_ZERO = re.compile(r"0+", re.ASCII)

#: (remaining header, reset headers in order of preference) with a number as the reset:
#: delay-seconds, or a timestamp when above _EPOCH_THRESHOLD.
_NUMERIC_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # RateLimit-* of the drafts up to -06, GitLab's.
    ("ratelimit-remaining", ("ratelimit-reset",)),
    # GitHub's, Discord's, Twitter's...; Discord's x-ratelimit-reset-after is preferred.
    ("x-ratelimit-remaining", ("x-ratelimit-reset-after", "x-ratelimit-reset")),
)
#: Resets that are always delay-seconds, never a timestamp.
_DELAY_ONLY = frozenset({"x-ratelimit-reset-after"})
#: OpenAI's: the reset is a Go duration.
_DURATION_FAMILIES: tuple[tuple[str, str], ...] = (
    ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
)
#: Anthropic's: the reset is an RFC 3339 date-time.
_RFC3339_FAMILIES: tuple[tuple[str, str], ...] = tuple(
    (f"anthropic-ratelimit-{quota}-remaining", f"anthropic-ratelimit-{quota}-reset")
    for quota in ("requests", "tokens", "input-tokens", "output-tokens")
)


def _finite(now: float) -> float | None:
    """``now`` as a finite float; ``None`` for a clock that names no time (``nan``,
    infinities, integers too big for a float)."""
    try:
        clock = float(now)
    except OverflowError:
        return None
    return clock if math.isfinite(clock) else None


def exhausted_quota(
    headers: Mapping[str, str | bytes], *, now: float, date: str | bytes | None = None
) -> tuple[float, str] | None:
    """Return how long until an exhausted rate-limit quota resets, and which header said so.

    A quota is exhausted when its remaining count is exactly zero. The families read:

    - IETF draft-ietf-httpapi-ratelimit-headers-09 ``RateLimit`` (:func:`parse_ratelimit`):
      the chosen item has ``r=0``; the wait is its ``t``. Source ``"ratelimit"``.
      (``RateLimit-Policy`` is not read.)
    - ``RateLimit-Remaining`` + ``RateLimit-Reset`` (drafts up to -06, GitLab) and
      ``X-RateLimit-Remaining`` + ``X-RateLimit-Reset`` (GitHub, Discord, ...): the reset is
      a non-negative decimal number (``"30"``, Discord's ``"1470173023.123"``): above 1e9 a
      POSIX timestamp, else delay-seconds. Discord's ``X-RateLimit-Reset-After``
      (delay-seconds, decimal) is preferred to ``X-RateLimit-Reset`` when usable: it needs
      no clock. Source: the name of the reset header used.
    - OpenAI's ``x-ratelimit-remaining-{requests,tokens}`` +
      ``x-ratelimit-reset-{requests,tokens}``: the reset a Go duration
      (:func:`parse_duration`). Source: the reset header's name.
    - Anthropic's ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-remaining``
      + ``...-reset``: the reset an RFC 3339 date-time (:func:`parse_rfc3339`). Source:
      the reset header's name.

    A remaining count is "exhausted" only when it is ASCII digits that are all zeros
    (``"0"``, ``"00"``, with OWS around it): ``"0.0"``, ``"-1"`` or ``""`` are not (a wait is
    only taken from a quota that clearly says so). A timestamp (epoch or RFC 3339) is
    measured against ``date`` when that is a usable HTTP-date (which cancels clock skew),
    else against ``now``; with neither usable it is ignored. Each family stands alone: one
    exhausted family counts whatever the others say, a malformed value only drops its own
    family, and when several are exhausted the longest wait wins (the first in the order
    above on a tie).

    Args:
        headers: lower-cased header name -> value (text, or bytes decoded as Latin-1);
            other headers are ignored.
        now: the wall clock, POSIX seconds. Any number: one that names no time (``nan``,
            infinities, integers too big for a float) only makes timestamps unusable.
        date: the response's ``Date`` header (text, bytes or ``None``).

    Returns:
        ``(seconds, source)``: the wait, finite, ``>= 0`` (a reset in the past gives
        ``0.0``) and at most ``MAX_SECONDS``, and the header name it came from; or ``None``
        when no family says a quota is exhausted with a usable reset. Never raises on a
        server's text nor for any clock.

    Raises:
        TypeError: ``now`` is not a number, or ``date`` or a header value read is not
            ``str``, ``bytes`` or ``None``.
    """
    if not isinstance(now, (int, float)):
        raise TypeError(f"now must be a number of seconds (int or float), got "
                        f"{type(now).__name__}")
    date_text = _text("date", date)
    measured = False
    origin: float | None = None

    def reference() -> float | None:
        """What timestamps are measured against (the Date header, else ``now``; ``None``
        with neither usable), worked out on first use."""
        nonlocal measured, origin
        if not measured:
            parsed = None if date_text is None else parse_http_date(date_text, now=now)
            origin = _finite(now) if parsed is None else parsed.timestamp()
            measured = True
        return origin

    def read(name: str) -> str | None:
        return _text(name, headers.get(name))

    def exhausted(name: str) -> bool:
        text = read(name)
        return text is not None and _ZERO.fullmatch(text) is not None

    found: list[tuple[float, str]] = []
    limit = parse_ratelimit(read("ratelimit"))
    if limit is not None and limit[0] == 0:
        found.append((limit[1], "ratelimit"))
    for remaining, resets in _NUMERIC_FAMILIES:
        if not exhausted(remaining):
            continue
        for name in resets:
            text = read(name)
            number = None if text is None else _number(text)
            if number is None:
                continue
            if number <= _EPOCH_THRESHOLD or name in _DELAY_ONLY:
                found.append((_clamp(number), name))
                break
            clock = reference()
            if clock is not None:
                found.append((_clamp(number - clock), name))
                break
    for remaining, name in _DURATION_FAMILIES:
        if exhausted(remaining):
            seconds = parse_duration(read(name))
            if seconds is not None:
                found.append((seconds, name))
    for remaining, name in _RFC3339_FAMILIES:
        if exhausted(remaining):
            moment = parse_rfc3339(read(name))
            clock = None if moment is None else reference()
            if moment is not None and clock is not None:
                found.append((_clamp(moment - clock), name))
    best: tuple[float, str] | None = None
    for wait in found:
        if best is None or wait[0] > best[0]:
            best = wait
    return best
