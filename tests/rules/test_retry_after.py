"""Retry-After and HTTP-date parsing: RFC 9110 sections 10.2.3 and 5.6.7."""

from __future__ import annotations

import email.utils
import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest

from retry_transport import parse_http_date, parse_retry_after
from retry_transport._wire.retry_after import MAX_SECONDS

# 2026-11-30 12:00:00 UTC
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),  # the RFC's own example
        ("0", 0.0),
        ("  5 ", 5.0),  # surrounding whitespace is not part of the value
        ("\t5\t", 5.0),  # OWS is spaces and horizontal tabs
        (" \t 5\t ", 5.0),
        ("007", 7.0),  # leading zeros are digits too
        ("999999999999", 999999999999.0),  # twelve digits: exact
        ("9" * 13, MAX_SECONDS),  # more digits than any wait: reported as the maximum
        ("1" + "0" * 5000, MAX_SECONDS),  # longer than int() accepts by default
    ],
)
def test_delay_seconds(value: str, expected: float) -> None:
    """Delay-seconds are a count of ASCII digits."""
    assert parse_retry_after(value, now=NOW) == expected


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "-1",  # negative
        "+1",  # a sign is not a digit
        "1.0",  # fractional seconds are not delay-seconds
        "1.5",
        "1e3",
        "NaN",
        "inf",
        "-0",
        "\xb2",  # superscript two: str.isdigit() says yes, the RFC says no
        "\u0661\u0662",  # Arabic-Indic digits
        "10 s",
        "Sun, 06 Nov 1994 08:49:37",  # a date without its zone
        "Sun, 32 Nov 1994 08:49:37 GMT",  # day 32
        "Sun, 30 Feb 1994 08:49:37 GMT",  # 30 February
        "Sun, 06 Nov 1994 25:49:37 GMT",  # hour 25
        "Sun, 06 Foo 1994 08:49:37 GMT",  # no such month
        "Sun, 06 Nov 1994 08:49:37 PST",  # HTTP dates are in GMT
        "x" * 10_000,
    ],
)
def test_unusable_values_give_none(value: str) -> None:
    """Anything that is not delay-seconds or an HTTP-date is ignored, never raised."""
    assert parse_retry_after(value, now=NOW) is None


@pytest.mark.parametrize(
    "value",
    [
        "\x0b5",  # vertical tab
        "\x0c5",  # form feed
        "5\x0b",
        "\n5",  # a line break is no OWS (and could not be in a header anyway)
        "\r5\r",
        "\x1f5",  # unit separator: str.strip() strips it
        "\x855",  # NEL
        "\xa05",  # no-break space
        "\u20085",  # punctuation space
        "\u30005\u3000",  # ideographic space
        "\x0bSun, 06 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT\xa0",
        "Sun,\x0b06 Nov 1994 08:49:37 GMT",  # nor between a date's parts
        "Sun, 06\xa0Nov 1994 08:49:37 GMT",
        "Sunday,\x0c06-Nov-94 08:49:37 GMT",
        "Sun Nov\n 6 08:49:37 1994",
    ],
)
def test_whitespace_other_than_ows_makes_the_value_malformed(value: str) -> None:
    """Only spaces and horizontal tabs are OWS (RFC 9110 5.6.3); other whitespace is garbage."""
    assert parse_retry_after(value, now=NOW) is None
    assert parse_retry_after(value.encode("utf-8"), now=NOW) is None


@pytest.mark.parametrize(
    "value",
    [
        " \tSun, 06 Nov 1994 08:49:37 GMT\t ",
        "Sun,\t06  Nov\t1994 08:49:37\t\tGMT",
        "\tSunday, 06-Nov-94\t08:49:37 GMT ",
        " Sun\tNov\t 6 08:49:37\t1994",
    ],
)
def test_http_dates_allow_spaces_and_tabs(value: str) -> None:
    """Spaces and tabs around a date and between its parts are accepted."""
    expected = datetime(1994, 11, 6, 8, 49, 37, tzinfo=timezone.utc)
    assert parse_http_date(value, now=NOW) == expected


def test_date_header_with_other_whitespace_is_ignored() -> None:
    """A Date header padded with a vertical tab or a Unicode space is unusable: now is used."""
    value = "Mon, 30 Nov 2026 12:01:30 GMT"
    for date in ("\x0bMon, 30 Nov 2026 12:00:00 GMT", "Mon, 30 Nov 2026 12:00:00 GMT\u2008"):
        assert parse_http_date(date, now=NOW) is None
        assert parse_retry_after(value, now=NOW - 60, date=date) == 150.0
    assert parse_retry_after(value, now=NOW - 60, date="\tMon, 30 Nov 2026 12:00:00 GMT ") == 90.0


@pytest.mark.parametrize(
    ("value", "date", "expected"),
    [
        # IMF-fixdate, measured against the Date header: 30 s later.
        ("Sun, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:07 GMT", 30.0),
        # RFC 850 form, same instant.
        ("Sunday, 06-Nov-94 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:07 GMT", 30.0),
        # asctime form, taken as UTC; note the space-padded day.
        ("Sun Nov  6 08:49:37 1994", "Sun, 06 Nov 1994 08:49:07 GMT", 30.0),
        # The Date header may itself use an obsolete format.
        ("Sun, 06 Nov 1994 08:50:37 GMT", "Sun Nov  6 08:49:37 1994", 60.0),
        # A date before the response's Date: no wait.
        ("Sun, 06 Nov 1994 08:49:07 GMT", "Sun, 06 Nov 1994 08:49:37 GMT", 0.0),
        # Names in another case are accepted (recipients should be robust).
        ("sun, 06 nov 1994 08:49:37 gmt", "Sun, 06 Nov 1994 08:49:07 GMT", 30.0),
    ],
)
def test_http_date_against_date_header(value: str, date: str, expected: float) -> None:
    """A server clock decades off does not matter: the Date header cancels the skew."""
    assert parse_retry_after(value, now=NOW, date=date) == expected


def test_http_date_against_now_without_date_header() -> None:
    """Without a Date header, the date is measured against now."""
    assert parse_retry_after("Mon, 30 Nov 2026 12:01:30 GMT", now=NOW) == 90.0


def test_unusable_date_header_falls_back_to_now() -> None:
    """A garbage Date header is ignored, not fatal."""
    assert parse_retry_after("Mon, 30 Nov 2026 12:01:30 GMT", now=NOW, date="garbage") == 90.0


def test_http_date_in_the_past_means_no_wait() -> None:
    """A date already passed asks for no wait."""
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=NOW) == 0.0


def test_http_date_far_future_is_finite() -> None:
    """Year 9999 is a long but finite wait (the transport's cap decides what to do)."""
    seconds = parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", now=NOW)
    assert seconds is not None and 2.5e11 < seconds <= MAX_SECONDS


def test_year_one_is_in_the_past() -> None:
    """Year 1 is a valid date, long past."""
    assert parse_retry_after("Mon, 01 Jan 0001 00:00:00 GMT", now=NOW) == 0.0


@pytest.mark.parametrize(
    ("value", "year"),
    [
        # now is 2026-11-30: 2076-11-29 is less than 50 years ahead, so it stays in 2076...
        ("Sunday, 29-Nov-76 00:00:00 GMT", 2076),
        # ...but 2076-12-01 appears more than 50 years ahead: the most recent past 1976.
        ("Tuesday, 01-Dec-76 00:00:00 GMT", 1976),
        ("Friday, 01-Jan-77 00:00:00 GMT", 1977),
        ("Monday, 01-Jan-69 00:00:00 GMT", 2069),  # POSIX would say 1969
        ("Monday, 01-Jan-70 00:00:00 GMT", 2070),  # POSIX would say 1970
        ("Monday, 01-Jan-99 00:00:00 GMT", 1999),
        ("Monday, 01-Jan-26 00:00:00 GMT", 2026),
        ("Monday, 01-Jan-00 00:00:00 GMT", 2000),
    ],
)
def test_rfc850_two_digit_years_follow_the_50_year_rule(value: str, year: int) -> None:
    """RFC 9110: a two-digit year more than 50 years ahead means the previous century."""
    parsed = parse_http_date(value, now=NOW)
    assert parsed is not None
    assert parsed.year == year


def test_email_utils_gets_the_two_digit_year_wrong() -> None:
    """Why the parser is our own: the stdlib pivots at 69/68, not on the 50-year rule."""
    stdlib = email.utils.parsedate_to_datetime("Monday, 01-Jan-70 00:00:00 GMT")
    assert stdlib.year == 1970
    ours = parse_http_date("Monday, 01-Jan-70 00:00:00 GMT", now=NOW)
    assert ours is not None and ours.year == 2070


def test_all_three_formats_name_the_same_instant() -> None:
    """The RFC's three examples are one instant."""
    expected = datetime(1994, 11, 6, 8, 49, 37, tzinfo=timezone.utc)
    now = datetime(2000, 1, 1, tzinfo=timezone.utc).timestamp()
    for value in (
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
    ):
        assert parse_http_date(value, now=now) == expected


def test_default_now_is_the_current_time() -> None:
    """Without ``now`` a date far in the past still gives 0 and one far ahead a large wait."""
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT") == 0.0
    ahead = parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT")
    assert ahead is not None and ahead > 1e10


#: Clocks that name no moment a datetime can hold.
ABSURD_NOWS = {
    "nan": float("nan"),
    "-nan": float("-nan"),
    "inf": float("inf"),
    "-inf": float("-inf"),
    "1e300": 1e300,
    "-1e300": -1e300,
    "10**400": 10**400,  # an integer too big for a float
    "-10**400": -(10**400),
    "10**20": 10**20,  # fits in a float, not in a datetime
    "-10**20": -(10**20),
    "year 10000": datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp() + 1,
    "year 0": datetime(1, 1, 1, tzinfo=timezone.utc).timestamp() - 1,
}
absurd_nows = pytest.mark.parametrize("now", list(ABSURD_NOWS.values()), ids=list(ABSURD_NOWS))


@absurd_nows
def test_absurd_now_never_raises(now: float) -> None:
    """A broken clock gives no usable date, and no exception."""
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=now) is None
    assert parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now=now) is None
    assert parse_retry_after("5", now=now) == 5.0
    assert parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT", now=now) is None
    # A four-digit year needs no clock.
    assert parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT", now=now) == datetime(
        1994, 11, 6, 8, 49, 37, tzinfo=timezone.utc
    )


@absurd_nows
def test_absurd_now_still_measures_against_the_date_header(now: float) -> None:
    """With no usable clock, a date is still measured against a usable Date header."""
    date = "Sun, 06 Nov 1994 08:49:07 GMT"
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=now, date=date) == 30.0
    assert parse_retry_after("Sun Nov  6 08:50:07 1994", now=now, date=date) == 60.0
    # An RFC 850 date needs the clock for its century: without one it is unusable.
    assert parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now=now, date=date) is None


def test_no_header_gives_none() -> None:
    """``parse_retry_after(response.headers.get("Retry-After"))`` works without the header."""
    assert parse_retry_after(None) is None
    assert parse_retry_after(None, now=NOW, date="Sun, 06 Nov 1994 08:49:07 GMT") is None
    assert parse_http_date(None) is None


@pytest.mark.parametrize(
    ("value", "date", "expected"),
    [
        (b"120", None, 120.0),
        (b" \t7\t", None, 7.0),
        (b"Sun, 06 Nov 1994 08:49:37 GMT", b"Sun, 06 Nov 1994 08:49:07 GMT", 30.0),
        (b"Sun, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:07 GMT", 30.0),
        ("Sun, 06 Nov 1994 08:49:37 GMT", b"Sun, 06 Nov 1994 08:49:07 GMT", 30.0),
        (b"Mon, 30 Nov 2026 12:01:30 GMT", b"\xff\xfe", 90.0),  # junk Date: against now
        (b"\xa05", None, None),  # Latin-1 no-break space, not OWS
        (b"\xc2\xb2", None, None),  # UTF-8 superscript two, read as Latin-1: not a digit
        (b"", None, None),
    ],
)
def test_bytes_are_decoded_as_latin_1(
    value: bytes | str, date: bytes | str | None, expected: float | None
) -> None:
    """Raw header bytes are read as Latin-1, as httpx reads header values."""
    assert parse_retry_after(value, now=NOW, date=date) == expected


def test_parse_http_date_takes_bytes() -> None:
    """parse_http_date reads bytes as Latin-1 too."""
    expected = datetime(1994, 11, 6, 8, 49, 37, tzinfo=timezone.utc)
    assert parse_http_date(b"\tSun Nov  6 08:49:37 1994 ", now=NOW) == expected
    assert parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT\xa0", now=NOW) is None


@pytest.mark.parametrize(
    ("function", "args", "kwargs", "message"),
    [
        (parse_retry_after, (120,), {}, "value must be str, bytes or None, got int"),
        (parse_retry_after, (1.5,), {}, "value must be str, bytes or None, got float"),
        (parse_retry_after, (bytearray(b"5"),), {},
         "value must be str, bytes or None, got bytearray"),
        (parse_retry_after, (["5"],), {}, "value must be str, bytes or None, got list"),
        (parse_retry_after, ("5",), {"date": 0}, "date must be str, bytes or None, got int"),
        (parse_retry_after, (None,), {"date": 1.0}, "date must be str, bytes or None, got float"),
        (parse_retry_after, ("5",), {"now": "1"}, "now must be a number of seconds"),
        (parse_http_date, (0,), {}, "value must be str, bytes or None, got int"),
        (parse_http_date, ("x",), {"now": b"1"}, "now must be a number of seconds"),
    ],
)
def test_other_types_raise_type_error(
    function: Callable[..., object], args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    """A value, date or clock of the wrong type is a programming error, and says what fits."""
    with pytest.raises(TypeError, match=re.escape(message)):
        function(*args, **kwargs)
