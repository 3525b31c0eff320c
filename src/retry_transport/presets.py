"""Retry policies for the OpenAI and Anthropic SDKs, set up never to carry a request out
twice, and to be as resilient as the SDK alone wherever that is safe::

    import httpx2, openai
    import retry_transport.httpx2 as rt

    client = openai.OpenAI(
        max_retries=0,  # one layer of retries: the transport's
        http_client=httpx2.Client(transport=rt.RetryTransport(policy=rt.presets.openai())),
    )

Each preset follows its SDK's own choices where they are safe: the statuses it retries
(408, 409, 429, 500, 502, 503, 504, and Anthropic's 529 overloaded); 408, 429 (and 529)
taken as answers given before the request was acted on (``unapplied_statuses``: retried for
a POST without an idempotency key; a 408 says the server did not receive the whole request,
RFC 9110 section 15.5.9, a 429 and a 529 that it turned the request away); the server's
``x-should-retry`` trusted; ``retry-after-ms`` and ``Retry-After`` honoured up to 120 s (a
longer wait is refused rather than parking the client); backoff within the SDKs' range when
the server names no time (at most 0.5 s, doubling per retry, never above 8 s) and three
attempts, as the SDKs' two retries.

Where the presets are less resilient than the SDK alone, and why:

* a POST (any request without an idempotency key whose method is not in
  ``retry_methods``) that meets a 409, a 5xx (Anthropic's 529 aside) without
  ``x-should-retry: true`` (a bare 500 or 503), a timeout or a connection dropped after the
  request was sent is not sent again: the server may have carried it out, and the SDKs
  resend it with no key the server could deduplicate by, so the SDK alone may get it
  carried out twice;
* a status from 500 up other than 500, 502, 503 and 504 (and Anthropic's 529) is not
  retried, whatever the method, unless the server says ``x-should-retry: true``: the
  OpenAI preset does not retry 529, an overload only the Anthropic API sends, and neither
  retries a 501 or a 505, which no retry fixes.

Each preset also judges its API's refusals sent inside a ``200`` (``retry_event``): an
overloaded or rate-limited answer that the API sends as the first event of a
``text/event-stream`` body, after headers that said ``200 OK``, and that the SDKs do not
retry (their retries end when the headers arrive). The event judges are public,
:func:`anthropic_events` and :func:`openai_events`, so that a policy of your own may use
them or build on them::

    def mine(event):
        if event.event == "my_heartbeat":
            return None  # not content: held back, the next event judged
        return rt.presets.openai_events(event)

The events held back before content begins (``message_start``, ``ping``,
``response.created``...) reach the SDK as they came once the stream goes on; a refusal
retried is never seen by it. The presets leave ``idle_timeout`` alone: reasoning models
may be silent for minutes.

Keyword arguments override the preset's fields, as :meth:`RetryPolicy.replace` does (an
unknown one is its ``TypeError``). ``retry_transport.httpx2.presets`` is this module.
"""

from __future__ import annotations

from typing import Any, Final

from ._policy.policy import RetryPolicy
from ._wire.sse import ServerSentEvent

__all__ = ["anthropic", "anthropic_events", "openai", "openai_events"]

#: The error types by which the Anthropic API refuses a request inside a ``200``.
_ANTHROPIC_REFUSALS: Final = frozenset({"overloaded_error", "rate_limit_error"})
#: The events that come before an Anthropic message's content.
_ANTHROPIC_BEFORE: Final = frozenset({"message_start", "ping"})
#: The error codes by which the OpenAI API refuses a request inside a ``200``.
_OPENAI_REFUSALS: Final = frozenset({"server_is_overloaded", "rate_limit_exceeded"})
#: The events that come before a response's output (the Responses API).
_OPENAI_BEFORE: Final = frozenset({"response.created", "response.queued",
                                   "response.in_progress"})


def anthropic_events(event: ServerSentEvent) -> bool | None:
    """The Anthropic API's refusals sent inside a ``200`` (a ``retry_event``): ``True`` for
    an ``error`` event whose JSON ``error.type`` is ``overloaded_error`` or
    ``rate_limit_error``; ``None`` for ``message_start`` and ``ping`` (not content yet,
    whatever their data); ``False`` for any other event, or an ``error`` whose data is not
    JSON."""
    name = event.event
    if name in _ANTHROPIC_BEFORE:
        return None
    if name != "error":
        return False
    data = _json(event)
    return _field(data, "error", "type") in _ANTHROPIC_REFUSALS


def openai_events(event: ServerSentEvent) -> bool | None:
    """The OpenAI API's refusals sent inside a ``200`` (a ``retry_event``): ``True`` for an
    ``error`` event whose JSON ``code`` (or ``error.code``) is ``server_is_overloaded`` or
    ``rate_limit_exceeded``, for a ``response.failed`` whose ``response.error.code`` is one
    of those, and for an unnamed event (``message``) whose JSON has an ``error`` object with
    such a ``code`` or ``type`` (Chat Completions' in-band error); ``None`` for
    ``response.created``, ``response.queued`` and ``response.in_progress`` (whatever their
    data); ``False`` for any other event, or one whose data is not JSON."""
    name = event.event
    if name in _OPENAI_BEFORE:
        return None
    if name not in ("error", "response.failed", "message"):
        return False
    data = _json(event)
    codes: tuple[object, ...]
    if name == "error":
        codes = (_field(data, "code"), _field(data, "error", "code"))
    elif name == "response.failed":
        codes = (_field(data, "response", "error", "code"),)
    else:
        codes = (_field(data, "error", "code"), _field(data, "error", "type"))
    return any(code in _OPENAI_REFUSALS for code in codes)


def _json(event: ServerSentEvent) -> Any:
    """The event's data as JSON, or ``None`` when it is not JSON."""
    try:
        return event.json()
    except ValueError:
        return None


def _field(data: Any, *path: str) -> object:
    """The value at ``path`` in nested JSON objects, or ``None`` where one is missing."""
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data if isinstance(data, str) else None

#: The OpenAI preset; the Anthropic one is it with 529 added.
_OPENAI: Final = RetryPolicy(
    max_attempts=3,
    retry_statuses={408, 409, 429, 500, 502, 503, 504},
    unapplied_statuses={408, 429},
    trust_should_retry=True,
    max_retry_after=120.0,
    base_delay=0.5,
    max_delay=8.0,
    retry_event=openai_events,
)
_ANTHROPIC: Final = _OPENAI.replace(retry_statuses=_OPENAI.retry_statuses | {529},
                                 unapplied_statuses={408, 429, 529},
                                 retry_event=anthropic_events)


def openai(**overrides: Any) -> RetryPolicy:
    """The policy for the OpenAI SDK (``openai.OpenAI(max_retries=0, http_client=...)``),
    its refusals inside a ``200`` judged by :func:`openai_events`, with ``overrides``
    applied."""
    return _OPENAI.replace(**overrides) if overrides else _OPENAI


def anthropic(**overrides: Any) -> RetryPolicy:
    """The policy for the Anthropic SDK (``anthropic.Anthropic(max_retries=0,
    http_client=...)``): the OpenAI preset's, with 529 (overloaded) retried and taken as
    unapplied, as the Anthropic API sends it before acting on a request, and its refusals
    inside a ``200`` judged by :func:`anthropic_events`; ``overrides`` applied."""
    return _ANTHROPIC.replace(**overrides) if overrides else _ANTHROPIC
