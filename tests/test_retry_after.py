"""Retry-After and HTTP-date parsing: RFC 9110 sections 10.2.3 and 5.6.7."""

from __future__ import annotations

import email.utils
from datetime import datetime, timezone

import pytest

from retry_transport import parse_http_date, parse_retry_after
from retry_transport._retry_after import MAX_SECONDS

# 2026-11-30 12:00:00 UTC
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),  # the RFC's own example
        ("0", 0.0),
        ("  5 ", 5.0),  # surrounding whitespace is not part of the value
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


@pytest.mark.parametrize("now", [float("nan"), float("inf"), -1e300, 1e300])
def test_absurd_now_never_raises(now: float) -> None:
    """A broken clock gives no usable date, and no exception."""
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=now) is None
    assert parse_retry_after("5", now=now) == 5.0
