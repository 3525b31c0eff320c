"""Other retry libraries' names for the settings, and what they are here.

Someone coming from urllib3's ``Retry`` (requests), httpx-retries, tenacity, stamina, backoff
or the OpenAI and Anthropic SDKs writes their keywords: ``max_retries=3``, ``total=3``,
``backoff_factor=0.5``. Such a keyword is refused as any unknown one is, and
:func:`peer_hint` says what it is here, with the value worked out where it can be:
``max_retries=3`` counts the retries after the first attempt, so it is ``max_attempts=4``.
The nearest spelling (``difflib``) would point the wrong way: ``max_retries`` is near
``retries``, httpcore's connect retries, a different thing.

The equivalences are those of docs/guides/migrating.md, whose table of hints is this
module's output (a test keeps the two equal).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final

__all__ = ["PEERS", "peer_hint", "retry_object"]


def _count(value: object) -> int | None:
    """A count given as a non-negative int (not a bool), or ``None``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _seconds(value: object) -> str | None:
    """A number of seconds as a Python literal (a ``timedelta`` as its seconds)."""
    total = getattr(value, "total_seconds", None)
    if callable(total):
        value = total()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return repr(value)


def _statuses(value: object) -> str | None:
    """Status codes as a set literal, in order (``HTTPStatus`` members as their numbers)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        return None
    try:
        codes = sorted({int(code) for code in value})
    except (TypeError, ValueError):
        return None
    return "{" + ", ".join(map(str, codes)) + "}" if codes else "set()"


def _methods(value: object) -> str | None:
    """Method names as a set literal, upper-cased and in order."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        return None
    names = sorted({str(method).upper() for method in value})
    return "{" + ", ".join(f'"{name}"' for name in names) + "}" if names else "set()"


def _retries(name: str) -> Callable[[object], str]:
    """A count of retries after the first attempt: one more attempt here."""

    def hint(value: object) -> str:
        count = _count(value)
        spelt = f"max_attempts={count + 1}" if count is not None else f"max_attempts=<{name} + 1>"
        return (f"a count of retries after the first attempt; here max_attempts counts the "
                f"attempts, the first included: {spelt}")

    return hint


def _one_count(value: object) -> str:
    count = _count(value)
    spelt = f"max_attempts={count + 1}" if count is not None else "max_attempts=<retries + 1>"
    return (f"a count of retries of one kind of failure; here one count of attempts, the "
            f"first included, covers every kind: {spelt}")


def _attempts(value: object) -> str:
    count = _count(value)
    spelt = f"max_attempts={value}" if count is not None else "max_attempts=<attempts>"
    return f"a count of attempts, the first included, as here: {spelt}"


def _field(field: str, meaning: str, spell: Callable[[object], str | None] = _seconds
           ) -> Callable[[object], str]:
    """A setting that is ``field`` here, its value spelt by ``spell``."""

    def hint(value: object) -> str:
        spelt = spell(value)
        return f"{meaning}: {field}={spelt if spelt is not None else '...'}"

    return hint


def _flag(value: object) -> str:
    return f"respect_retry_after={value!r}" if isinstance(value, bool) else \
        "respect_retry_after=True or False"


def _allowed_methods(value: object) -> str:
    if value is None:
        return ("None retries every method; here a method outside retry_methods (default "
                "the idempotent ones) is retried only with an Idempotency-Key header")
    spelt = _methods(value)
    return (f"the methods retried; here those retried without an idempotency key: "
            f"retry_methods={spelt if spelt is not None else '...'}")


def _jitter(value: object) -> str:
    return ('random time added to each backoff; here the backoff is drawn at random: '
            'jitter="full" (or "equal", "decorrelated", "none")')


def _stop(value: object) -> str:
    """tenacity's ``stop=``: ``stop_after_attempt(n)`` or ``stop_after_delay(s)``."""
    attempts = _count(getattr(value, "max_attempt_number", None))
    if attempts is not None:
        return f"stop_after_attempt({attempts}) is max_attempts={attempts}"
    delay = _seconds(getattr(value, "max_delay", None))
    if delay is not None:
        return f"stop_after_delay({delay}) is deadline={delay}"
    return "stop_after_attempt(n) is max_attempts=n, stop_after_delay(s) is deadline=s"


def _wait(value: object) -> str:
    """tenacity's ``wait=``: exponential (with random jitter or not) or fixed."""
    fixed = _seconds(getattr(value, "wait_fixed", None))
    if fixed is not None:
        return (f"wait_fixed({fixed}) is base_delay={fixed}, max_delay={fixed}, "
                f'jitter="none"')
    multiplier = _seconds(getattr(value, "multiplier", None))
    cap = _seconds(getattr(value, "max", None))
    if multiplier is not None and cap is not None:
        jitter = "full" if "random" in type(value).__name__ else "none"
        return f'base_delay={multiplier}, max_delay={cap}, jitter="{jitter}"'
    return ("wait_random_exponential(multiplier=m, max=c) is base_delay=m, max_delay=c, "
            'jitter="full"; wait_exponential(...) the same with jitter="none"')


def retry_object(value: object) -> str | None:
    """What an httpx-retries or urllib3 ``Retry`` is here: this transport's own keywords,
    with its values; ``None`` for anything else."""
    if not (hasattr(value, "status_forcelist") and hasattr(value, "total")):
        return None
    spelt = [f"max_attempts={count + 1}" for count in [_count(getattr(value, "total", None))]
             if count is not None]
    statuses = _statuses(getattr(value, "status_forcelist", None) or ())
    if statuses is not None and statuses != "set()":
        spelt.append(f"retry_statuses={statuses}")
    methods = _methods(getattr(value, "allowed_methods", None) or ())
    if methods is not None and methods != "set()":
        spelt.append(f"retry_methods={methods}")
    factor = _seconds(getattr(value, "backoff_factor", None))
    if factor is not None:
        spelt.append(f"base_delay={factor}")
    return ("a Retry's settings are the retry transport's own keywords: "
            + (", ".join(spelt) if spelt else "max_attempts=<total + 1>, ..."))


def _retry(value: object) -> str:
    """httpx-retries' ``retry=Retry(...)`` (or urllib3's), or tenacity's ``retry=``."""
    return retry_object(value) or (
        "the transient transport errors are retried as they are; a predicate of your own "
        "is retry_if= (True, False or None), a status to retry is in retry_statuses")


_HOOKS: Final = "a callback; here hooks= get a RetryEvent for each retry and each give-up"
_PREDICATE: Final = ("a predicate; here retry_if= is a plain function of the response or "
                     "exception returning True (retry), False (final) or None (the rules)")
_REDIRECTS: Final = ("httpx follows redirects itself (follow_redirects= on the client), each "
                     "hop a request of its own")

#: name -> (whose, what it is here, given the value), in the order of
#: docs/guides/migrating.md's sections.
PEERS: Final[Mapping[str, tuple[str, Callable[[object], str]]]] = {
    # the OpenAI and Anthropic SDKs, requests' HTTPAdapter
    "max_retries": ("the OpenAI and Anthropic SDKs', requests'", _retries("max_retries")),
    # httpx-retries and urllib3's Retry (requests)
    "total": ("urllib3's and httpx-retries'", _retries("total")),
    "connect": ("urllib3's", _one_count),
    "read": ("urllib3's", _one_count),
    "status": ("urllib3's", _one_count),
    "other": ("urllib3's", _one_count),
    "status_forcelist": ("urllib3's and httpx-retries'",
                         _field("retry_statuses", "the statuses retried", _statuses)),
    "allowed_methods": ("urllib3's and httpx-retries'", _allowed_methods),
    "method_whitelist": ("urllib3's (before 1.26)", _allowed_methods),
    "backoff_factor": ("urllib3's and httpx-retries'",
                       _field("base_delay", "the first backoff step, seconds")),
    "backoff_max": ("urllib3's", _field("max_delay", "the largest backoff, seconds")),
    "max_backoff_wait": ("httpx-retries'", _field("max_delay", "the largest backoff, seconds")),
    "backoff_jitter": ("urllib3's and httpx-retries'", _jitter),
    "respect_retry_after_header": ("urllib3's and httpx-retries'",
                                   lambda value: "whether Retry-After is waited: "
                                                 + _flag(value)),
    "retry_after_max": ("urllib3's", _field(
        "max_retry_after", "the longest Retry-After honoured (a longer one stops and returns "
        "the response)")),
    "total_timeout": ("httpx-retries'", _field(
        "deadline", "a bound on the time spent; here on the whole operation, attempts "
        "included")),
    "validate_response": ("httpx-retries'", lambda value: _PREDICATE),
    "retry_on_exceptions": ("httpx-retries'", lambda value: _PREDICATE),
    "retry": ("httpx-retries' and tenacity's", _retry),
    "raise_on_status": ("urllib3's", lambda value: (
        "the last response is always returned, as with raise_on_status=False; "
        "response.raise_for_status() raises for it")),
    "redirect": ("urllib3's", lambda value: _REDIRECTS),
    "raise_on_redirect": ("urllib3's", lambda value: _REDIRECTS),
    # tenacity
    "stop": ("tenacity's", _stop),
    "stop_after_attempt": ("tenacity's", _field("max_attempts", "a count of attempts, the "
                                                "first included, as here", repr)),
    "stop_after_delay": ("tenacity's", _field("deadline", "a bound on the whole operation")),
    "wait": ("tenacity's", _wait),
    "before_sleep": ("tenacity's", lambda value: _HOOKS),
    "before": ("tenacity's", lambda value: _HOOKS),
    "after": ("tenacity's", lambda value: _HOOKS),
    "reraise": ("tenacity's", lambda value: "the last exception is always re-raised unchanged"),
    # stamina
    "attempts": ("stamina's", _attempts),
    "timeout": ("stamina's", _field(
        "deadline", "a bound on the whole operation; here deadline= bounds it, attempts and "
        "waits included (httpx's timeout= for each attempt goes on the client)")),
    "wait_initial": ("stamina's", _field("base_delay", "the first backoff step, seconds")),
    "wait_max": ("stamina's", _field("max_delay", "the largest backoff, seconds")),
    "wait_jitter": ("stamina's", _jitter),
    "on": ("stamina's", lambda value: _PREDICATE),
    # backoff
    "max_tries": ("backoff's", _attempts),
    "max_time": ("backoff's", _field("deadline", "a bound on the whole operation")),
    "factor": ("backoff's", _field("base_delay", "the first backoff step, seconds")),
    "max_value": ("backoff's", _field("max_delay", "the largest backoff, seconds")),
    "giveup": ("backoff's", lambda value: _PREDICATE),
    "on_backoff": ("backoff's", lambda value: _HOOKS),
    "on_giveup": ("backoff's", lambda value: _HOOKS),
    # httpcore
    "retries": ("httpcore's, a keyword of the transports: connect retries only",
                _retries("retries")),
}


def peer_hint(name: str, value: object) -> str | None:
    """What the keyword ``name=value`` of another library is here, or ``None`` for a name
    no peer uses: ``"(the OpenAI and Anthropic SDKs', requests'): a count of retries after
    the first attempt; here ... max_attempts=4"``."""
    entry = PEERS.get(name)
    if entry is None:
        return None
    whose, hint = entry
    return f"({whose}): {hint(value)}"
