"""The server signals besides Retry-After: retry-after-ms, x-should-retry, Go durations,
RFC 3339 date-times, the IETF RateLimit field (RFC 8941) and exhausted rate-limit quotas.

Tables of accepted and rejected values (a comment per row), then hypothesis properties:
every parser takes any text, bytes or ``None`` (and :func:`exhausted_quota` any clock and
any Date header) without raising, and never gives a wait that is negative, non-finite or
above ``MAX_SECONDS``.
"""

from __future__ import annotations

import ast
import base64
import email.utils
import math
import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from retry_transport._wire import signals as _signals
from retry_transport._wire.retry_after import MAX_SECONDS
from retry_transport._wire.signals import (
    exhausted_quota,
    parse_duration,
    parse_ratelimit,
    parse_retry_after_ms,
    parse_rfc3339,
    parse_should_retry,
)

UTC = timezone.utc
# 2026-11-30 12:00:00 UTC
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC).timestamp()
#: A Date header naming NOW.
DATE = "Mon, 30 Nov 2026 12:00:00 GMT"


def ts(year: int, month: int = 1, day: int = 1, hour: int = 0, minute: int = 0,
       second: int = 0) -> float:
    """The POSIX timestamp of a date and time in UTC."""
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()


def http_date(timestamp: float) -> str:
    """An IMF-fixdate for a timestamp (whole seconds)."""
    return email.utils.format_datetime(datetime.fromtimestamp(timestamp, UTC), usegmt=True)


def rfc3339(timestamp: float) -> str:
    """An RFC 3339 date-time in UTC, as Anthropic writes it."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: Values no parser here accepts: not ASCII digits, whitespace that is not OWS, junk.
NEVER_VALID = [
    "",  # empty
    "   ",  # only OWS
    "\xb2",  # superscript two: str.isdigit() says yes
    "\u0661\u0662",  # Arabic-Indic digits
    "\uff11",  # fullwidth one
    "\x0b1",  # vertical tab
    "1\x0c",  # form feed
    "\n1",  # line break
    "\xa01",  # no-break space
    "\u20081",  # punctuation space
    "x" * 10_000,  # long junk
]


def short(value: object) -> str | None:
    """A test id that stays readable for the rows with huge values."""
    if isinstance(value, (str, bytes)) and len(value) > 60:
        return f"{value[:20]!r}...({len(value)} long)"
    if isinstance(value, int) and abs(value) > 10**40:
        return f"{'-' if value < 0 else ''}{len(str(abs(value)))}-digit int"
    return None


# -- retry-after-ms ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1500", 1.5),  # whole milliseconds
        ("0", 0.0),  # no wait
        ("0.5", 0.0005),  # half a millisecond
        ("250.75", 0.25075),  # a fraction
        ("007", 0.007),  # leading zeros are digits too
        ("1.000", 0.001),  # trailing zeros in the fraction
        (" \t1500\t ", 1.5),  # OWS (spaces and tabs) around the value is ignored
        ("999999999999999", 999999999999.999),  # fifteen digits: just under the cap
        ("1" + "0" * 15, MAX_SECONDS),  # exactly the cap
        ("9" * 21, MAX_SECONDS),  # more digits than any wait: the cap
        ("1" + "0" * 100_000, MAX_SECONDS),  # huge, and not slow
        ("0" * 100_000 + "5", 0.005),  # leading zeros do not count as digits
        ("1." + "0" * 100_000, 0.001),  # a long fraction
    ],
    ids=short,
)
def test_retry_after_ms(value: str, expected: float) -> None:
    """Milliseconds in, seconds out, capped at MAX_SECONDS."""
    assert parse_retry_after_ms(value) == expected
    assert parse_retry_after_ms(value.encode("latin-1")) == expected


@pytest.mark.parametrize(
    "value",
    [
        *NEVER_VALID,
        "-1",  # negative
        "+1",  # a sign
        "-0",  # even a negative zero
        "1e3",  # an exponent
        "1E3",
        "inf",  # what float() would take
        "Infinity",
        "nan",
        "NaN",
        ".5",  # a leading "."
        "5.",  # a trailing "."
        "1.2.3",  # two points
        "1,5",  # a decimal comma
        "1_000",  # a digit separator (int() and float() take it)
        "0x10",  # hexadecimal
        "1 000",  # a space inside
        "1500ms",  # a unit
        "1.5\x0b",  # a vertical tab after
    ],
    ids=short,
)
def test_retry_after_ms_malformed(value: str) -> None:
    """Anything but a plain non-negative decimal is ignored."""
    assert parse_retry_after_ms(value) is None


def test_retry_after_ms_missing() -> None:
    """No header, no wait."""
    assert parse_retry_after_ms(None) is None


# -- x-should-retry --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", True),  # as OpenAI and Anthropic send it
        ("false", False),
        ("True", True),  # any ASCII case
        ("FALSE", False),
        ("tRuE", True),
        (" \ttrue\t ", True),  # OWS around it is ignored
        (b"false", False),  # bytes
        (None, None),  # no header
        ("", None),  # empty
        ("1", None),  # not a boolean spelling this header uses
        ("0", None),
        ("yes", None),
        ("no", None),
        ("t", None),
        ("truee", None),  # a prefix is not enough
        ("true false", None),
        ("true,", None),
        ('"true"', None),  # quoted
        ("\u0074rue\u200b", None),  # a zero-width space after
        ("\xa0true", None),  # a no-break space before
        ("\x0btrue", None),  # a vertical tab before
        ("tru\u212a", None),  # KELVIN SIGN: lower() would not make it "e"... nor anything
        ("fal\u017fe", None),  # LONG S, which casefold() turns into "s"
        ("TRUE\n", None),  # a line break is no OWS
    ],
    ids=short,
)
def test_should_retry(value: str | bytes | None, expected: bool | None) -> None:
    """true or false in any ASCII case; anything else is no verdict."""
    assert parse_should_retry(value) is expected


# -- Go durations ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1s", 1.0),  # OpenAI's usual forms
        ("6m0s", 360.0),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("0.5s", 0.5),  # a fraction
        ("250ms", 0.25),
        ("1m30s", 90.0),
        ("17.001s", 17.001),
        ("2h", 7200.0),  # hours alone
        ("1h0m0s", 3600.0),  # zero parts, as Go writes them
        ("2us", 2e-6),  # microseconds, ASCII spelling
        ("2\u00b5s", 2e-6),  # MICRO SIGN, as Go's Duration.String() writes it
        ("2\u03bcs", 2e-6),  # GREEK SMALL LETTER MU, which Go also accepts
        ("2\u00c2\u00b5s", 2e-6),  # MICRO SIGN in UTF-8, its bytes decoded as Latin-1
        ("2\u00ce\u00bcs", 2e-6),  # GREEK MU in UTF-8, decoded as Latin-1
        ("3ns", 3e-9),  # nanoseconds
        ("1.5\u00b5s", 1.5e-6),  # a fraction of a microsecond
        ("1s1s", 2.0),  # repeated units add up, as in Go
        ("30s1m", 90.0),  # in any order, as in Go
        ("0", 0.0),  # a bare zero, as in Go
        ("0s", 0.0),
        ("007s", 7.0),  # leading zeros
        (" \t6m0s\t ", 360.0),  # OWS around it is ignored
        ("999999999999999999h", MAX_SECONDS),  # too long a wait: the cap
        ("1" + "0" * 100_000 + "s", MAX_SECONDS),  # huge, and not slow
    ],
    ids=short,
)
def test_duration(value: str, expected: float) -> None:
    """Go durations in seconds."""
    assert parse_duration(value) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "value",
    [
        *NEVER_VALID,
        "1",  # a number without a unit (only a bare 0 may go without)
        "00",  # not Go's bare zero
        "0.0",
        "s",  # a unit without a number
        "1d",  # days are not a Go unit
        "1S",  # units are case sensitive
        "1Ms",
        "1H",
        "1 s",  # no space inside
        "1m 30s",
        "1m,30s",
        "-1s",  # no sign (Go takes one; a wait cannot be negative)
        "+1s",
        ".5s",  # no leading "." (Go takes it)
        "5.s",  # no trailing "." (Go takes it)
        "1.2.3s",
        "1e3s",  # no exponent
        "infs",
        "1sx",  # junk after
        "x1s",  # junk before
        "1\u00b5",  # a micro sign without the s
        "1\u00c2s",  # half a UTF-8 micro sign
        "\u00b2s",  # superscript two
        "1\u0131s",  # a dotless i
        "1.5mm",  # a unit twice
    ],
    ids=short,
)
def test_duration_malformed(value: str) -> None:
    """Anything else is no duration."""
    assert parse_duration(value) is None


def test_duration_bytes_are_latin_1() -> None:
    """Raw bytes decode as Latin-1: the micro sign as one byte, or as UTF-8's two."""
    assert parse_duration(b"6m0s") == 360.0
    assert parse_duration(b"2\xb5s") == pytest.approx(2e-6)
    assert parse_duration("2\u00b5s".encode()) == pytest.approx(2e-6)
    assert parse_duration("2\u03bcs".encode()) == pytest.approx(2e-6)
    assert parse_duration(b"2\xa0s") is None
    assert parse_duration(None) is None


# -- RFC 3339 --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-12-01T12:00:30Z", ts(2026, 12, 1, 12, 0, 30)),  # Anthropic's form
        ("2026-12-01T12:00:30.123456+00:00", ts(2026, 12, 1, 12, 0, 30) + 0.123456),
        ("2026-12-01t12:00:30z", ts(2026, 12, 1, 12, 0, 30)),  # lower-case t and z
        ("2026-12-01 12:00:30Z", ts(2026, 12, 1, 12, 0, 30)),  # a space for T (RFC NOTE)
        ("2026-12-01T12:00:30.5Z", ts(2026, 12, 1, 12, 0, 30) + 0.5),  # one fraction digit
        ("2026-12-01T12:00:30." + "9" * 30 + "Z", ts(2026, 12, 1, 12, 0, 31)),  # thirty
        ("2026-12-01T13:00:30+01:00", ts(2026, 12, 1, 12, 0, 30)),  # east of UTC
        ("2026-12-01T06:30:30-05:30", ts(2026, 12, 1, 12, 0, 30)),  # west, half hours
        ("2026-12-01T12:00:30-00:00", ts(2026, 12, 1, 12, 0, 30)),  # unknown offset: UTC
        ("2026-12-01T23:59:59+23:59", ts(2026, 12, 1, 0, 0, 59)),  # the largest offset
        ("2016-12-31T23:59:60Z", ts(2016, 12, 31, 23, 59, 59)),  # a leap second, folded
        ("2024-02-29T00:00:00Z", ts(2024, 2, 29)),  # a leap day
        ("1970-01-01T00:00:00Z", 0.0),  # the epoch
        ("1969-12-31T23:59:59Z", -1.0),  # before it
        ("0001-01-01T00:00:00Z", ts(1, 1, 1)),  # the first year a datetime holds
        ("0001-01-01T00:00:00+01:00", ts(1, 1, 1) - 3600),  # an hour before it
        ("9999-12-31T23:59:59-23:59", ts(9999, 12, 31, 23, 59, 59) + 86340),  # after the last
        (" \t2026-12-01T12:00:30Z\t ", ts(2026, 12, 1, 12, 0, 30)),  # OWS around it
    ],
    ids=short,
)
def test_rfc3339(value: str, expected: float) -> None:
    """RFC 3339 date-times as POSIX timestamps."""
    assert parse_rfc3339(value) == pytest.approx(expected, abs=1e-6)
    assert parse_rfc3339(value.encode("latin-1")) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    "value",
    [
        *NEVER_VALID,
        "2026-12-01T12:00:30",  # no offset: a local time, which names no instant
        "2026-12-01",  # a date alone
        "12:00:30Z",  # a time alone
        "2026-12-01T12:00Z",  # no seconds
        "2026-12-01T12:00:30.Z",  # a "." without digits
        "2026-12-01T12:00:30,5Z",  # a decimal comma
        "2026-12-01T12:00:30+0100",  # an offset without its colon
        "2026-12-01T12:00:30+01",  # an offset without minutes
        "2026-12-01T12:00:30 Z",  # a space before the zone
        "2026-12-01T12:00:30UTC",  # a zone name
        "2026-12-01T12:00:30GMT",
        "2026-12-01X12:00:30Z",  # a wrong separator
        "2026-12-01  12:00:30Z",  # two spaces
        "2026-12-01\t12:00:30Z",  # a tab for T
        "26-12-01T12:00:30Z",  # a two-digit year
        "02026-12-01T12:00:30Z",  # a five-digit year
        "2026-1-01T12:00:30Z",  # a one-digit month
        "2026-13-01T12:00:30Z",  # month 13
        "2026-00-01T12:00:30Z",  # month 0
        "2026-02-29T12:00:30Z",  # 29 February in a common year
        "2026-04-31T12:00:30Z",  # 31 April
        "2026-12-00T12:00:30Z",  # day 0
        "2026-12-01T24:00:00Z",  # hour 24
        "2026-12-01T12:60:00Z",  # minute 60
        "2026-12-01T12:00:61Z",  # second 61
        "2026-12-01T12:00:30+24:00",  # offset hour 24
        "2026-12-01T12:00:30+01:60",  # offset minute 60
        "0000-01-01T00:00:00Z",  # year 0: out of range
        "2026-12-01T12:00:30Zjunk",  # junk after
        "\u0662026-12-01T12:00:30Z",  # an Arabic-Indic digit
        "２026-12-01T12:00:30Z",  # a fullwidth digit
        "2026-12-01T12:00:30\u2212" + "01:00",  # a MINUS SIGN, not a hyphen-minus
        "Sun, 06 Nov 1994 08:49:37 GMT",  # an HTTP-date
        "1796126430",  # a timestamp
    ],
    ids=short,
)
def test_rfc3339_malformed(value: str) -> None:
    """Anything else, including a date-time without an offset, is ignored."""
    assert parse_rfc3339(value) is None


# -- the RateLimit field (draft-ietf-httpapi-ratelimit-headers-09, RFC 8941) --------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"default";r=0;t=30', (0, 30.0)),  # the draft's own shape
        ('"default";r=50;t=30', (50, 30.0)),  # not exhausted, still reported
        ("default;r=0;t=30", (0, 30.0)),  # a Token for the policy name
        ("*policy/a:b;r=0;t=30", (0, 30.0)),  # Token characters "*", "/" and ":"
        ('"default";t=30;r=0', (0, 30.0)),  # parameters in any order
        ('"default";r=0;t=0', (0, 0.0)),  # a reset now
        ('"a";r=5;t=10, "b";r=0;t=3, "c";r=0;t=7', (0, 7.0)),  # exhausted: the longest t
        ('"a";r=0;t=7, "b";r=0;t=7', (0, 7.0)),  # a tie: the first (same answer)
        ('"a";r=3;t=100, "b";r=1;t=5', (1, 5.0)),  # none exhausted: the fewest remaining
        ('"a";r=1;t=5, "b";r=1;t=9', (1, 9.0)),  # equally few: the longest t
        ('"a";r=0, "b";r=4;t=9', (4, 9.0)),  # an item without t cannot be chosen
        ('"default";r=0;t=30;pk=:QXBwLTk5OQ==:', (0, 30.0)),  # the draft's pk Byte Sequence
        ('"default";r=0;t=30;pk=:QXBwLTk5OQ:', (0, 30.0)),  # unpadded base64 is fine
        ('"default";r=0;t=30;pk=::', (0, 30.0)),  # an empty Byte Sequence
        ('"d";r=0;t=30;acme-x=1.5;acme-y=-2;acme-z="s";w=tok;q=?1', (0, 30.0)),  # others
        ('"d";r=0;t=30;flag', (0, 30.0)),  # a parameter without value (Boolean true)
        ('"d";r=0;t=30;when=@1700000000', (0, 30.0)),  # an RFC 9651 Date
        ('"d";r=0;t=30;name=%"f%c3%bc%c3%9f"', (0, 30.0)),  # an RFC 9651 Display String
        ('"d";r=5;t=30;r=0', (0, 30.0)),  # a repeated key: the last value counts
        ('"d"; r=0; t=30', (0, 30.0)),  # spaces after ";" (RFC 8941 allows SP there)
        ('"a";r=0;t=1 ,\t"b";r=0;t=2', (0, 2.0)),  # OWS around ","
        (' \t"d";r=0;t=30\t ', (0, 30.0)),  # OWS around the field
        (r'"a \"quoted\" \\ name";r=0;t=30', (0, 30.0)),  # String escapes
        ('"";r=0;t=30', (0, 30.0)),  # an empty String
        ('"d";r=0;t=' + "9" * 15, (0, MAX_SECONDS)),  # fifteen digits: capped
        ('"d";r=999999999999999;t=1', (999999999999999, 1.0)),  # the largest Integer
        ('"d";r=-0;t=30', (0, 30.0)),  # "-0" is the Integer 0
        ('"d";r=0;t=007', (0, 7.0)),  # leading zeros
        ('"d";r=0;t=30;x=-999999999999.999', (0, 30.0)),  # the most negative Decimal
    ],
    ids=short,
)
def test_ratelimit(value: str, expected: tuple[int, float]) -> None:
    """The item that matters, as (remaining, seconds until the reset)."""
    assert parse_ratelimit(value) == expected
    assert parse_ratelimit(value.encode("latin-1")) == expected


@pytest.mark.parametrize(
    "value",
    [
        *NEVER_VALID,
        # Malformed Structured Fields: the whole field is ignored.
        '"d";r=0;t=30,',  # a trailing comma
        ',"d";r=0;t=30',  # a leading comma
        '"d";r=0;t=30,,"e";r=0;t=1',  # an empty member
        '"d" ;r=0;t=30',  # a space before ";"
        '"d";r =0;t=30',  # a space before "="
        '"d";r= 0;t=30',  # a space after "="
        '"d";\tr=0;t=30',  # a tab after ";" (only SP)
        '"d";R=0;t=30',  # upper-case keys are not keys
        '"d";1r=0;t=30',  # nor ones starting with a digit
        '"d";r=0;t=30;',  # a ";" without a key
        '"d";r=0;t=',  # "=" without a value
        '"d";r=0;t=30 "e"',  # two items without a comma
        '"d;r=0;t=30',  # an unterminated String
        r'"d\x";r=0;t=30',  # an invalid escape
        '"d\x7f";r=0;t=30',  # DEL in a String
        '"d\u00e9";r=0;t=30',  # non-ASCII in a String
        '"d";r=0;t=30;pk=:QXBw!:',  # a Byte Sequence outside base64
        '"d";r=0;t=30;pk=:QXBw',  # an unterminated Byte Sequence
        '"d";r=0;t=30;b=?2',  # a Boolean other than ?0 or ?1
        '"d";r=0;t=30;b=?',
        '"d";r=0;t=30;x=1.',  # a Decimal ending in "."
        '"d";r=0;t=30;x=1.2345',  # four fraction digits
        '"d";r=0;t=30;x=1234567890123.5',  # thirteen integer digits in a Decimal
        '"d";r=0;t=30;x=-',  # a sign alone
        '"d";r=0;t=30;x=1e3',  # an exponent
        '"d";r=0;t=30;x=@1.5',  # a Date must be an Integer
        '"d";r=0;t=30;x=%"%C3%BC"',  # upper-case hex in a Display String
        '"d";r=0;t=30;x=%"%c3"',  # a Display String that is not UTF-8
        '"d";r=0;t=30;x=%"\u00fc"',  # non-ASCII in a Display String
        '"d";r=0;t=1234567890123456',  # sixteen digits: no RFC 8941 Integer
        '"d";r=' + "1" * 100_000 + ";t=1",  # a huge Integer, and not slow
        '"d";r=0;t=30;x="' + "a" * 100_000,  # a huge unterminated String, and not slow
        "(a b);r=0;t=30",  # an Inner List is no Service Limit Item
        '"d";r=0;t=30, (a b)',
        # Valid Structured Fields that break the draft: ignored as a whole too.
        "1;r=0;t=30",  # an Integer for the policy name
        ":AAAA:;r=0;t=30",  # a Byte Sequence for it
        "?1;r=0;t=30",  # a Boolean for it
        '"d";t=30',  # no r (REQUIRED)
        '"d";r=0;t=30, "e";t=5',  # one item without r spoils the field
        '"d";r=-1;t=30',  # a negative r
        '"d";r=0;t=-30',  # a negative t
        '"d";r=0;t=30.0',  # a Decimal t
        '"d";r=0.0;t=30',  # a Decimal r
        '"d";r="0";t=30',  # a String r
        '"d";r=0;t="30"',  # a String t
        '"d";r;t=30',  # a Boolean r
        '"d";r=0;t=?1',  # a Boolean t
        '"d";r=0;t=@30',  # a Date t
        # Well-formed, but nothing to wait for.
        '"d";r=0',  # no t
        '"d";r=5;pk=:AAAA:',  # no t
        # Other formats.
        "limit=100, remaining=0, reset=30",  # a Dictionary (an older draft's shape)
        "0",  # RateLimit-Remaining's shape
        '"d";r=0;t=30\x0b',  # whitespace that is not OWS
    ],
    ids=short,
)
def test_ratelimit_malformed_or_unusable(value: str) -> None:
    """A malformed field is ignored as a whole (the draft's MUST); so is one with no item
    that has both r and t."""
    assert parse_ratelimit(value) is None


def test_ratelimit_missing() -> None:
    """No header, nothing to say."""
    assert parse_ratelimit(None) is None


# -- exhausted quotas ------------------------------------------------------------------


def anthropic(quota: str, remaining: str, reset: str) -> dict[str, str]:
    return {
        f"anthropic-ratelimit-{quota}-remaining": remaining,
        f"anthropic-ratelimit-{quota}-reset": reset,
    }


@pytest.mark.parametrize(
    ("headers", "now", "date", "expected"),
    [
        # IETF RateLimit: r=0 waits t.
        ({"ratelimit": '"default";r=0;t=30'}, NOW, None, (30.0, "ratelimit")),
        # ... whatever RateLimit-Policy says (it is not read).
        ({"ratelimit-policy": '"default";q=100;w=60', "ratelimit": '"default";r=0;t=30'},
         NOW, None, (30.0, "ratelimit")),
        # ... on any clock: delay-seconds need none.
        ({"ratelimit": '"default";r=0;t=30'}, math.nan, None, (30.0, "ratelimit")),
        # RateLimit-Remaining + RateLimit-Reset as delay-seconds (drafts up to -06).
        ({"ratelimit-remaining": "0", "ratelimit-reset": "30"}, NOW, None,
         (30.0, "ratelimit-reset")),
        # ... or a timestamp (GitLab), against now without a Date header.
        ({"ratelimit-remaining": "0", "ratelimit-reset": str(int(NOW) + 60)}, NOW, None,
         (60.0, "ratelimit-reset")),
        # GitHub: X-RateLimit-Reset is a timestamp, measured against the Date header: our
        # clock is 1000 s fast, the server's Date cancels it.
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 60)},
         NOW + 1000, DATE, (60.0, "x-ratelimit-reset")),
        # ... a server clock an hour slow: the Date header says so.
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) - 3600 + 60)},
         NOW, http_date(NOW - 3600), (60.0, "x-ratelimit-reset")),
        # ... a garbage Date header: against now.
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 60)},
         NOW, "garbage", (60.0, "x-ratelimit-reset")),
        # ... no usable clock, but a usable Date header.
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 60)},
         math.inf, DATE, (60.0, "x-ratelimit-reset")),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 60)},
         10**400, DATE, (60.0, "x-ratelimit-reset")),
        # Discord: a decimal timestamp...
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": f"{NOW + 1.5:.3f}"},
         NOW, None, (1.5, "x-ratelimit-reset")),
        # ... and X-RateLimit-Reset-After, preferred (it needs no clock).
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": f"{NOW + 1.5:.3f}",
          "x-ratelimit-reset-after": "1.25"}, NOW, None, (1.25, "x-ratelimit-reset-after")),
        # ... also when X-RateLimit-Reset names a later moment.
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 60),
          "x-ratelimit-reset-after": "1"}, NOW, None, (1.0, "x-ratelimit-reset-after")),
        # ... an unusable Reset-After falls back to X-RateLimit-Reset.
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 60),
          "x-ratelimit-reset-after": "soon"}, NOW, None, (60.0, "x-ratelimit-reset")),
        # ... Reset-After is always delay-seconds, even above 1e9.
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset-after": "2000000000"}, NOW, None,
         (2e9, "x-ratelimit-reset-after")),
        # ... and needs no clock.
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset-after": "2"}, math.nan, None,
         (2.0, "x-ratelimit-reset-after")),
        # 1e9 itself is delay-seconds; above it, a timestamp (here long past).
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1000000000"}, NOW, None,
         (1e9, "x-ratelimit-reset")),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1000000001"}, NOW, None,
         (0.0, "x-ratelimit-reset")),
        # A reset in the past: no wait (0.0, not None).
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) - 60)}, NOW, None,
         (0.0, "x-ratelimit-reset")),
        # A reset too far ahead: the cap.
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "9" * 40}, NOW, None,
         (MAX_SECONDS, "x-ratelimit-reset")),
        # Remaining written with more zeros, or OWS: still zero.
        ({"x-ratelimit-remaining": "000", "x-ratelimit-reset": "5"}, NOW, None,
         (5.0, "x-ratelimit-reset")),
        ({"x-ratelimit-remaining": " 0\t", "x-ratelimit-reset": " 5\t"}, NOW, None,
         (5.0, "x-ratelimit-reset")),
        # OpenAI: Go durations.
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s"},
         NOW, None, (360.0, "x-ratelimit-reset-requests")),
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "20ms"},
         NOW, None, (0.02, "x-ratelimit-reset-tokens")),
        # ... the exhausted one counts, not the other.
        ({"x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "6m0s",
          "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1.5s"},
         NOW, None, (1.5, "x-ratelimit-reset-tokens")),
        # ... both exhausted: the longer.
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2s",
          "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1m"},
         NOW, None, (60.0, "x-ratelimit-reset-tokens")),
        # ... durations need no clock.
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s"},
         -(10**400), None, (1.0, "x-ratelimit-reset-requests")),
        # Anthropic: RFC 3339, against now without a Date header...
        (anthropic("requests", "0", rfc3339(NOW + 30)), NOW, None,
         (30.0, "anthropic-ratelimit-requests-reset")),
        # ... against the Date header when usable (our clock is a day slow).
        (anthropic("tokens", "0", rfc3339(NOW + 30)), NOW - 86400, DATE,
         (30.0, "anthropic-ratelimit-tokens-reset")),
        # ... with an offset and a fraction.
        (anthropic("input-tokens", "0", "2026-11-30T13:00:30.5+01:00"), NOW, DATE,
         (30.5, "anthropic-ratelimit-input-tokens-reset")),
        (anthropic("output-tokens", "0", rfc3339(NOW + 7)), NOW, None,
         (7.0, "anthropic-ratelimit-output-tokens-reset")),
        # ... in the past: no wait.
        (anthropic("tokens", "0", rfc3339(NOW - 7)), NOW, None,
         (0.0, "anthropic-ratelimit-tokens-reset")),
        # ... no usable clock, a usable Date header.
        (anthropic("tokens", "0", rfc3339(NOW + 30)), math.nan, DATE,
         (30.0, "anthropic-ratelimit-tokens-reset")),
        # Bytes work like text.
        ({"ratelimit": b'"d";r=0;t=3'}, NOW, DATE.encode(), (3.0, "ratelimit")),
    ],
    ids=short,
)
def test_exhausted_quota(
    headers: dict[str, str], now: float, date: str | None, expected: tuple[float, str]
) -> None:
    """Each family on its own: the wait until the exhausted quota resets, and the header."""
    result = exhausted_quota(headers, now=now, date=date)
    assert result is not None
    assert result[1] == expected[1]
    assert result[0] == pytest.approx(expected[0], abs=1e-6)


@pytest.mark.parametrize(
    ("headers", "now", "date"),
    [
        ({}, NOW, None),  # no headers
        ({"x-ratelimit-limit": "100", "ratelimit-limit": "100"}, NOW, None),  # limits alone
        ({"ratelimit-policy": '"default";q=100;w=60'}, NOW, None),  # a policy alone
        # Quota left: no wait, whatever the reset says.
        ({"ratelimit": '"default";r=1;t=30'}, NOW, None),
        ({"ratelimit-remaining": "1", "ratelimit-reset": "30"}, NOW, None),
        ({"x-ratelimit-remaining": "10", "x-ratelimit-reset": str(int(NOW) + 60)}, NOW, None),
        ({"x-ratelimit-remaining-requests": "1", "x-ratelimit-reset-requests": "1s"},
         NOW, None),
        (anthropic("tokens", "1", rfc3339(NOW + 30)), NOW, None),
        # Remaining that is not plainly zero.
        ({"x-ratelimit-remaining": "0.0", "x-ratelimit-reset": "5"}, NOW, None),  # decimal
        ({"x-ratelimit-remaining": "-0", "x-ratelimit-reset": "5"}, NOW, None),  # a sign
        ({"x-ratelimit-remaining": "-1", "x-ratelimit-reset": "5"}, NOW, None),  # negative
        ({"x-ratelimit-remaining": "", "x-ratelimit-reset": "5"}, NOW, None),  # empty
        ({"x-ratelimit-remaining": "\uff10", "x-ratelimit-reset": "5"}, NOW, None),  # fullwidth
        ({"x-ratelimit-remaining": "0\x0b", "x-ratelimit-reset": "5"}, NOW, None),  # a VT
        ({"x-ratelimit-remaining": "zero", "x-ratelimit-reset": "5"}, NOW, None),
        # Exhausted, but no usable reset.
        ({"x-ratelimit-remaining": "0"}, NOW, None),  # none at all
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "soon"}, NOW, None),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "-5"}, NOW, None),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1e3"}, NOW, None),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "5s"}, NOW, None),  # no duration
        ({"ratelimit-remaining": "0", "ratelimit-reset": DATE}, NOW, None),  # no HTTP-date
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "5"}, NOW, None),
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "-1s"}, NOW, None),
        (anthropic("tokens", "0", "2026-11-30T12:00:30"), NOW, None),  # no offset
        (anthropic("tokens", "0", str(int(NOW) + 30)), NOW, None),  # a timestamp
        # A reset header paired with another family's remaining does not count.
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset-tokens": "5s"}, NOW, None),
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset": "5"}, NOW, None),
        ({"ratelimit-remaining": "0", "x-ratelimit-reset": "5"}, NOW, None),
        (anthropic("requests", "0", "") | anthropic("tokens", "5", rfc3339(NOW + 30)),
         NOW, None),
        # A timestamp with no clock to measure it against.
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 60)},
         math.nan, None),
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 60)},
         10**400, "garbage"),
        (anthropic("tokens", "0", rfc3339(NOW + 30)), -math.inf, None),
        # A malformed RateLimit field is ignored as a whole.
        ({"ratelimit": '"default";r=0;t=30,'}, NOW, None),
        ({"ratelimit": '"default";r=0;t=30, "other";r=-1;t=5'}, NOW, None),
        # Names are read lower-cased only, as the core passes them.
        ({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "5"}, NOW, None),
        # Unknown families.
        ({"x-ratelimit-remaining-minute": "0", "x-ratelimit-reset-minute": "5"}, NOW, None),
    ],
    ids=short,
)
def test_no_exhausted_quota(headers: dict[str, str], now: float, date: str | None) -> None:
    """Quota left, a remaining count that is not plainly 0, or no usable reset: None."""
    assert exhausted_quota(headers, now=now, date=date) is None


def test_the_longest_wait_wins() -> None:
    """Several families exhausted: the longest wait, whichever family says it."""
    families: dict[str, dict[str, str]] = {
        "ratelimit": {"ratelimit": '"d";r=0;t=10'},
        "ratelimit-reset": {"ratelimit-remaining": "0", "ratelimit-reset": "20"},
        "x-ratelimit-reset-after": {"x-ratelimit-remaining": "0",
                                    "x-ratelimit-reset-after": "30"},
        "x-ratelimit-reset-requests": {"x-ratelimit-remaining-requests": "0",
                                       "x-ratelimit-reset-requests": "40s"},
        "x-ratelimit-reset-tokens": {"x-ratelimit-remaining-tokens": "0",
                                     "x-ratelimit-reset-tokens": "50s"},
        **{
            f"anthropic-ratelimit-{quota}-reset": anthropic(quota, "0", rfc3339(NOW + wait))
            for quota, wait in (("requests", 60), ("tokens", 70), ("input-tokens", 80),
                                ("output-tokens", 90))
        },
    }
    waits = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0]
    names = list(families)
    # Each family alone gives its own wait...
    for name, wait in zip(names, waits, strict=True):
        assert exhausted_quota(families[name], now=NOW, date=DATE) == (wait, name)
    # ... and together, whatever the order of the headers, the longest.
    for rotation in range(len(names)):
        order = names[rotation:] + names[:rotation]
        headers = {key: value for name in order for key, value in families[name].items()}
        assert exhausted_quota(headers, now=NOW, date=DATE) == (90.0, names[-1])
    # Each family, made the longest, wins over all the others.
    for index, name in enumerate(names):
        headers = {key: value for other in names for key, value in families[other].items()}
        if name == "ratelimit":
            headers["ratelimit"] = '"d";r=0;t=1000'
        elif index < 3:
            headers[name] = "1000"
        elif index < 5:
            headers[name] = "1000s"
        else:
            headers[name] = rfc3339(NOW + 1000)
        assert exhausted_quota(headers, now=NOW, date=DATE) == (1000.0, name)


def test_an_exhausted_family_counts_whatever_the_others_say() -> None:
    """One family with quota left does not cancel another that is exhausted."""
    headers = {
        "ratelimit": '"d";r=100;t=60',  # plenty left
        "x-ratelimit-remaining": "0",  # exhausted
        "x-ratelimit-reset": "5",
        "x-ratelimit-remaining-tokens": "0",  # exhausted, but its reset is garbage
        "x-ratelimit-reset-tokens": "later",
    }
    assert exhausted_quota(headers, now=NOW) == (5.0, "x-ratelimit-reset")


def test_equal_waits_name_the_first_family() -> None:
    """A tie goes to the first family in the documented order."""
    headers = {
        "anthropic-ratelimit-tokens-remaining": "0",
        "anthropic-ratelimit-tokens-reset": rfc3339(NOW + 5),
        "x-ratelimit-remaining-tokens": "0",
        "x-ratelimit-reset-tokens": "5s",
        "ratelimit": '"d";r=0;t=5',
    }
    assert exhausted_quota(headers, now=NOW) == (5.0, "ratelimit")


def test_the_date_header_is_parsed_in_every_format() -> None:
    """The Date header may be in any HTTP-date format; an RFC 850 one uses now's century."""
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 60)}
    for date in (DATE, "Monday, 30-Nov-26 12:00:00 GMT", "Mon Nov 30 12:00:00 2026"):
        assert exhausted_quota(headers, now=NOW + 500, date=date) == (60.0, "x-ratelimit-reset")
        assert exhausted_quota(headers, now=NOW + 500, date=date.encode()) == (
            60.0, "x-ratelimit-reset",
        )


@pytest.mark.parametrize(
    ("function", "args", "kwargs", "message"),
    [
        (parse_retry_after_ms, (1500,), {}, "value must be str, bytes or None, got int"),
        (parse_should_retry, (True,), {}, "value must be str, bytes or None, got bool"),
        (parse_duration, (1.5,), {}, "value must be str, bytes or None, got float"),
        (parse_rfc3339, (bytearray(b"x"),), {},
         "value must be str, bytes or None, got bytearray"),
        (parse_ratelimit, (["x"],), {}, "value must be str, bytes or None, got list"),
        (exhausted_quota, ({},), {"now": "1"}, "now must be a number of seconds"),
        (exhausted_quota, ({},), {"now": None}, "now must be a number of seconds"),
        (exhausted_quota, ({},), {"now": NOW, "date": 0},
         "date must be str, bytes or None, got int"),
        (exhausted_quota, ({"ratelimit": 5},), {"now": NOW},
         "ratelimit must be str, bytes or None, got int"),
        (exhausted_quota, ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": 5},),
         {"now": NOW}, "x-ratelimit-reset must be str, bytes or None, got int"),
    ],
    ids=short,
)
def test_other_types_raise_type_error(
    function: Callable[..., object], args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    """A value, Date header or clock of the wrong type is a programming error."""
    with pytest.raises(TypeError, match=re.escape(message)):
        function(*args, **kwargs)


def test_the_module_is_sans_io() -> None:
    """The signals import the standard library, retry_after and sfv only (no HTTP library)."""
    allowed = {"__future__", "math", "re", "collections.abc", "datetime", "retry_after", "sfv"}
    wire = Path(_signals.__file__).parent
    for path in (wire / "signals.py", wire / "retry_after.py", wire / "sfv.py"):
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert {alias.name for alias in node.names} <= allowed | {"time"}, path
            elif isinstance(node, ast.ImportFrom):
                assert node.module in allowed | {"time"}, (path, node.module)


# -- properties --------------------------------------------------------------------------

SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def as_bytes(text: str) -> bytes:
    """Header bytes for a text: Latin-1 when it fits, else UTF-8."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


def usable(result: float | None) -> bool:
    return result is None or (
        isinstance(result, float) and math.isfinite(result) and 0.0 <= result <= MAX_SECONDS
    )


SPECIALS = [
    "0", "00", "-0", "1", "1.5", ".5", "5.", "1e3", "inf", "nan", "\xb2", "\uff11", "",
    " ", "\t", "true", "FALSE", "6m0s", "20ms", "1h2m3.5s", "2\u00b5s", "0",
    "2026-12-01T12:00:30Z", "2026-12-01T12:00:30.5+01:00", "0000-01-01T00:00:00Z",
    "9999-12-31T23:59:60-23:59", "0001-01-01T00:00:00+23:59",
    '"d";r=0;t=30', 'd;r=0;t=30, "e";r=1;t=5', '"d";r=0;t=999999999999999',
    "9" * 25, "9" * 5000, "1" + "0" * 400, "Sun, 06 Nov 1994 08:49:37 GMT",
]
texts = st.one_of(
    st.text(max_size=80),
    st.sampled_from(SPECIALS),
    st.text(alphabet="0123456789.", max_size=40),  # numbers, near-numbers
    st.text(alphabet="0123456789.hmsun\u00b5\u03bc\u00c2\u00ce\u00bc", max_size=40),  # durations
    st.text(alphabet="0123456789-:.TtZz+ ", max_size=40),  # date-times
    st.text(alphabet='"\\dr=0123456789;t, \t:?*-@%.abcAB()', max_size=60),  # fields
    st.integers(0, 10**40).map(str),
)
values = st.one_of(texts, texts.map(as_bytes), st.binary(max_size=60), st.none())
nows = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e11, max_value=3e11),
    st.integers(-(10**400), 10**400),
    st.sampled_from([NOW, 0.0, -0.0, 1e9, math.nan, math.inf, -math.inf, 10**400,
                     -(10**400), 1e300, -1e300, 5e-324]),
)
dates = st.one_of(
    st.none(),
    st.text(max_size=40),
    st.floats(min_value=-6.2e10, max_value=2.5e11).map(http_date),
    st.sampled_from([DATE, "Monday, 30-Nov-26 12:00:00 GMT", "garbage", ""]),
)


@SETTINGS
@given(value=values)
@example(value="9" * 100_000)
@example(value=b"\xff1500")
def test_retry_after_ms_never_raises(value: str | bytes | None) -> None:
    """Any text, bytes or none: None, or a usable wait."""
    assert usable(parse_retry_after_ms(value))


@SETTINGS
@given(whole=st.integers(0, 10**30), fraction=st.none() | st.text("0123456789", min_size=1),
       zeros=st.integers(0, 3))
def test_retry_after_ms_is_the_number_over_a_thousand(
    whole: int, fraction: str | None, zeros: int
) -> None:
    """A well-formed value means exactly its number of milliseconds (up to the cap)."""
    text = "0" * zeros + str(whole) + ("" if fraction is None else "." + fraction)
    expected = min(float(str(whole) + ("" if fraction is None else "." + fraction)) / 1000,
                   MAX_SECONDS)
    assert parse_retry_after_ms(text) == expected


@SETTINGS
@given(value=values)
def test_should_retry_never_raises(value: str | bytes | None) -> None:
    """Any text, bytes or none: a bool or None."""
    assert parse_should_retry(value) in (True, False, None)


@SETTINGS
@given(word=st.sampled_from(["true", "false"]), upper=st.lists(st.booleans(), min_size=5,
       max_size=5), left=st.text(" \t", max_size=3), right=st.text(" \t", max_size=3))
def test_should_retry_any_case(word: str, upper: list[bool], left: str, right: str) -> None:
    """true/false in any case with any OWS around it."""
    spelled = "".join(c.upper() if up else c for c, up in zip(word, upper, strict=False))
    assert parse_should_retry(left + spelled + right) is (word == "true")


@SETTINGS
@given(value=values)
@example(value="1m" * 50_000)
@example(value="1" * 100_000)
def test_duration_never_raises(value: str | bytes | None) -> None:
    """Any text, bytes or none: None, or a usable wait."""
    assert usable(parse_duration(value))


GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6,
            "\u03bcs": 1e-6, "ns": 1e-9}


@SETTINGS
@given(parts=st.lists(
    st.tuples(st.integers(0, 10**6), st.none() | st.text("0123456789", min_size=1, max_size=6),
              st.sampled_from(sorted(GO_UNITS))),
    min_size=1, max_size=6,
))
def test_duration_adds_its_parts(parts: list[tuple[int, str | None, str]]) -> None:
    """A well-formed duration is the sum of its parts."""
    text = "".join(f"{n}{'' if f is None else '.' + f}{unit}" for n, f, unit in parts)
    expected = sum(float(f"{n}{'' if f is None else '.' + f}") * GO_UNITS[unit]
                   for n, f, unit in parts)
    assert parse_duration(text) == pytest.approx(expected, rel=1e-9, abs=1e-12)


@SETTINGS
@given(value=values)
@example(value="2026-12-01T12:00:30." + "1" * 100_000 + "Z")
def test_rfc3339_never_raises(value: str | bytes | None) -> None:
    """Any text, bytes or none: None, or a finite timestamp."""
    result = parse_rfc3339(value)
    assert result is None or (isinstance(result, float) and math.isfinite(result))


@SETTINGS
@given(
    moment=st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    offset_minutes=st.integers(-(23 * 60 + 59), 23 * 60 + 59),
    fraction=st.none() | st.text("0123456789", min_size=1, max_size=12),
    t=st.sampled_from("Tt "), z=st.sampled_from("Zz"),
)
def test_rfc3339_is_the_instant_it_names(
    moment: datetime, offset_minutes: int, fraction: str | None, t: str, z: str
) -> None:
    """A date-time at any offset, with any fraction, is the instant datetime computes."""
    offset = timedelta(minutes=offset_minutes)
    aware = moment.replace(microsecond=0, tzinfo=timezone(offset))
    sign = "-" if offset_minutes < 0 else "+"
    hours, minutes = divmod(abs(offset_minutes), 60)
    zone = z if offset_minutes == 0 and z == "z" else f"{sign}{hours:02d}:{minutes:02d}"
    text = (f"{aware.year:04d}-{aware.month:02d}-{aware.day:02d}{t}"
            f"{aware.hour:02d}:{aware.minute:02d}:{aware.second:02d}"
            + ("" if fraction is None else "." + fraction))
    expected = aware.timestamp() + (0.0 if fraction is None else float("0." + fraction))
    assert parse_rfc3339(text + zone) == pytest.approx(expected, abs=1e-5)


@SETTINGS
@given(value=values)
@example(value='"d";r=0;t=1,' * 2000 + '"d";r=0;t=1')
@example(value="d" + ";d" * 20_000)
def test_ratelimit_never_raises(value: str | bytes | None) -> None:
    """Any text, bytes or none: None, or (remaining >= 0, a usable wait)."""
    result = parse_ratelimit(value)
    if result is not None:
        remaining, reset = result
        assert isinstance(remaining, int) and remaining >= 0
        assert usable(reset)


# Well-formed RFC 8941 pieces, to build fields whose meaning is known.
sf_keys = st.from_regex(r"[a-z*][a-z0-9_.*-]{0,6}", fullmatch=True).filter(
    lambda k: k not in ("r", "t")
)
sf_tokens = st.from_regex(r"[A-Za-z*][!#$%&'*+.^_`|~0-9A-Za-z:/-]{0,8}", fullmatch=True)
sf_strings = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12).map(
    lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
)
sf_bare_items = st.one_of(
    st.integers(-(10**15) + 1, 10**15 - 1).map(str),
    st.tuples(st.integers(-(10**12) + 1, 10**12 - 1), st.integers(0, 999)).map(
        lambda p: f"{p[0]}.{p[1]}"
    ),
    sf_strings,
    sf_tokens,
    st.binary(max_size=9).map(lambda b: ":" + base64.b64encode(b).decode() + ":"),
    st.sampled_from(["?0", "?1", "@0", "@-1700000000", '%"caf%c3%a9"', '%""']),
)
sf_extra = st.tuples(sf_keys, st.none() | sf_bare_items).map(
    lambda p: p[0] if p[1] is None else f"{p[0]}={p[1]}"
)
service_limits = st.tuples(
    st.one_of(sf_strings, sf_tokens),
    st.integers(0, 10**15 - 1),
    st.none() | st.integers(0, 10**15 - 1),
    st.lists(sf_extra, max_size=3),
    st.randoms(use_true_random=False),
    st.text(" ", max_size=2),
)


def serialize(item: tuple[Any, ...]) -> str:
    name, r, t, extras, rnd, space = item
    parameters = [f"r={r}"] + ([] if t is None else [f"t={t}"]) + extras
    rnd.shuffle(parameters)
    return str(name) + "".join(";" + space + p for p in parameters)


@SETTINGS
@given(items=st.lists(service_limits, min_size=1, max_size=5),
       separators=st.lists(st.sampled_from([",", ", ", " , ", "\t,\t", ",  "]), min_size=4,
                           max_size=4))
def test_ratelimit_picks_the_item_that_matters(
    items: list[tuple[Any, ...]], separators: list[str]
) -> None:
    """A well-formed field: the exhausted item with the longest reset, else the one with the
    fewest remaining units (the longest reset among equals)."""
    text = serialize(items[0])
    for separator, item in zip(separators, items[1:], strict=False):
        text += separator + serialize(item)
    usable_items = [(r, t) for _, r, t, *_ in items if t is not None]
    expected = None
    if usable_items:
        r, t = min(usable_items, key=lambda rt: (rt[0], -rt[1]))
        expected = (r, min(float(t), MAX_SECONDS))
    assert parse_ratelimit(text) == expected
    # One bad r or t anywhere makes the whole field malformed.
    assert parse_ratelimit(text + ', "x";r=0;t=1.5') is None
    assert parse_ratelimit(text + ', "x";r=-1;t=1') is None


header_names = st.sampled_from([
    "ratelimit", "ratelimit-policy", "ratelimit-remaining", "ratelimit-reset",
    "x-ratelimit-remaining", "x-ratelimit-reset", "x-ratelimit-reset-after",
    "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
    "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens",
    *(f"anthropic-ratelimit-{q}-{k}" for q in ("requests", "tokens", "input-tokens",
                                               "output-tokens") for k in ("remaining", "reset")),
])
header_values = st.one_of(
    st.just("0"),  # remaining counts are most interesting at zero
    texts,
    texts.map(as_bytes),
    st.floats(min_value=0, max_value=3e11).map(lambda f: f"{f:.3f}"),  # epochs and delays
    st.floats(min_value=-6e10, max_value=2.5e11).map(
        lambda f: datetime.fromtimestamp(f, UTC).isoformat()
    ),
)
RESET_NAMES = {
    "ratelimit", "ratelimit-reset", "x-ratelimit-reset", "x-ratelimit-reset-after",
    "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens",
    *(f"anthropic-ratelimit-{q}-reset" for q in ("requests", "tokens", "input-tokens",
                                                 "output-tokens")),
}


@SETTINGS
@given(headers=st.dictionaries(header_names, header_values, max_size=12), now=nows,
       date=st.one_of(dates, dates.map(lambda d: d and as_bytes(d))))
@example(headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": "9" * 5000},
         now=-(10**400), date=DATE)
@example(headers={"anthropic-ratelimit-tokens-remaining": "0",
                  "anthropic-ratelimit-tokens-reset": "9999-12-31T23:59:59-23:59"},
         now=-1e300, date=None)
@example(headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1700000000"},
         now=math.nan, date="Monday, 30-Nov-26 12:00:00 GMT")
def test_exhausted_quota_never_raises(
    headers: dict[str, str | bytes], now: float, date: str | bytes | None
) -> None:
    """Any headers, any clock, any Date header: None, or a usable wait and a reset header
    that is there."""
    result = exhausted_quota(headers, now=now, date=date)
    if result is not None:
        seconds, source = result
        assert usable(seconds)
        assert source in RESET_NAMES and source in headers


@SETTINGS
@given(waits=st.lists(st.none() | st.integers(0, 10**6), min_size=5, max_size=5),
       now=nows)
def test_exhausted_quota_takes_the_longest_delay(waits: list[int | None], now: float) -> None:
    """Delay-based families (no clock needed), each exhausted or not: the longest wait."""
    headers: dict[str, str] = {}
    names = ["ratelimit", "ratelimit-reset", "x-ratelimit-reset-after",
             "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"]
    for name, wait in zip(names, waits, strict=True):
        if wait is None:
            continue
        if name == "ratelimit":
            headers[name] = f'"d";r=0;t={wait}'
        elif name == "ratelimit-reset":
            headers.update({"ratelimit-remaining": "0", name: str(wait)})
        elif name == "x-ratelimit-reset-after":
            headers.update({"x-ratelimit-remaining": "0", name: str(wait)})
        else:
            headers.update({name.replace("reset", "remaining"): "0", name: f"{wait}s"})
    present = [(float(w), n) for n, w in zip(names, waits, strict=True) if w is not None]
    expected = None
    for candidate in present:
        if expected is None or candidate[0] > expected[0]:
            expected = candidate
    assert exhausted_quota(headers, now=now) == expected


@SETTINGS
@given(value=texts)
def test_bytes_mean_what_their_text_means(value: str) -> None:
    """Latin-1 bytes parse as their text does."""
    try:
        raw = value.encode("latin-1")
    except UnicodeEncodeError:
        return
    for parse in (parse_retry_after_ms, parse_should_retry, parse_duration, parse_rfc3339,
                  parse_ratelimit):
        assert parse(raw) == parse(value)
