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

Keyword arguments override the preset's fields, as :meth:`RetryPolicy.replace` does (an
unknown one is its ``TypeError``). ``retry_transport.httpx2.presets`` is this module.
"""

from __future__ import annotations

from typing import Any, Final

from ._policy.policy import RetryPolicy

__all__ = ["anthropic", "openai"]

#: The OpenAI preset; the Anthropic one is it with 529 added.
_OPENAI: Final = RetryPolicy(
    max_attempts=3,
    retry_statuses={408, 409, 429, 500, 502, 503, 504},
    unapplied_statuses={408, 429},
    trust_should_retry=True,
    max_retry_after=120.0,
    base_delay=0.5,
    max_delay=8.0,
)
_ANTHROPIC: Final = _OPENAI.replace(retry_statuses=_OPENAI.retry_statuses | {529},
                                 unapplied_statuses={408, 429, 529})


def openai(**overrides: Any) -> RetryPolicy:
    """The policy for the OpenAI SDK (``openai.OpenAI(max_retries=0, http_client=...)``),
    with ``overrides`` applied."""
    return _OPENAI.replace(**overrides) if overrides else _OPENAI


def anthropic(**overrides: Any) -> RetryPolicy:
    """The policy for the Anthropic SDK (``anthropic.Anthropic(max_retries=0,
    http_client=...)``): the OpenAI preset's, with 529 (overloaded) retried and taken as
    unapplied, as the Anthropic API sends it before acting on a request; ``overrides``
    applied."""
    return _ANTHROPIC.replace(**overrides) if overrides else _ANTHROPIC
