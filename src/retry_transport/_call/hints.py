"""What would have saved a response body that broke in the caller's hands.

A response is handed over as soon as its headers arrive; an error while the caller then
reads its body (a connection dropped mid-body) reaches the caller as it is, since the
transport has let go of the request by then. Two options keep hold of it:
``retry_body_errors`` (the body read inside the retry loop, up to ``max_body_buffer``
bytes, and a break retried) and ``resume`` (a ``GET``'s body with a strong ``ETag``, or an
event stream, resumed where it broke). When one of them would have retried the request or
resumed its body, and neither is doing so already, the drivers hand the body over wrapped
(``_io/bodies.py``): a break a retry could fix carries the request's
:class:`~retry_transport.RetryInfo` and a note naming the option.

Decided here, sans-I/O: :func:`body_hint` at the hand-over, its cheapest tests first (most
bodies handed over are in memory, and never get this far); the note is written only when a
body breaks (:meth:`BodyHint.notice`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from .._policy.rules import classify_error, idempotent
from .._wire.http import length, remember, replayable, retry_info
from .._wire.resumable import plan

if TYPE_CHECKING:
    from .._base.flavour import Flavour, Request, Response
    from .._base.models import RetryInfo
    from .controller import Controller
    from .core import RetryCall

__all__ = ["BodyHint", "body_hint"]


class _Head(NamedTuple):
    """What :func:`~.._wire.resumable.plan` reads of a response, kept without the
    response (whose stream holds the hint: no reference cycle)."""

    status_code: int
    headers: object


def _resumable(response: Response | _Head) -> str | None:
    """How ``Resume()`` would resume the body: ``"ranges"``, ``"events"`` or ``None``."""
    how = plan(response, ranges=True, events=True)
    return None if how is None else "events" if how is True else "ranges"


class BodyHint:
    """A body handed over that ``retry_body_errors`` (``buffers``) or ``resume`` would have
    saved, and what its break needs: the request's metadata and what the note says
    (``head``: the response's status and headers, when ``Resume()`` may apply)."""

    __slots__ = ("buffers", "head", "info", "limit")

    def __init__(self, info: RetryInfo, buffers: bool, limit: int, head: _Head | None) -> None:
        self.info = info
        self.buffers = buffers
        self.limit = limit
        self.head = head

    def notice(self, exc: Exception, flavour: Flavour) -> None:
        """``exc`` broke the body: when a retry could fix it, it gets the request's
        metadata and the note, once (an error already noted is left as it is)."""
        if classify_error(exc, flavour).stop is None and retry_info(exc) is None:
            remember(exc, self.info, self.note())

    def note(self) -> str:
        """The note: the options that would have retried the request or resumed its body."""
        options = []
        if self.buffers:
            options.append(
                "retry_body_errors=True would have retried the request (the body is then "
                f"read before it is handed over, up to max_body_buffer={self.limit} bytes)")
        how = None if self.head is None else _resumable(self.head)
        if how is not None:
            by = ("by event ID (an event stream)" if how == "events"
                  else "by byte range (a strong ETag)")
            options.append(f"resume=Resume() would have resumed the body where it broke, {by}")
        return ("retry-transport: the body broke after the response was handed over, so the "
                "request was not retried; " + "; ".join(options))


def body_hint(controller: Controller, call: RetryCall | None, request: Request,
              stream: object, response: Response) -> BodyHint | None:
    """The hint for ``response``'s streamed body, the final answer to ``request`` (sent with
    the body ``stream``; ``call`` is ``None`` on the quick path), or ``None`` when neither
    option would have saved it: retries off for the request, or ``retry_body_errors`` would
    not have retried it (already on, no attempt left, a retryable status, a request that
    may not be sent again, a declared length over ``max_body_buffer``) and ``Resume()``
    would not have resumed it (already given, not a ``GET``, no strong ``ETag`` nor an
    event stream)."""
    if call is None:
        policy, enabled = controller.policy, True
    else:
        policy, enabled = call.policy, call.enabled
    info = retry_info(response)
    if not enabled or info is None:
        return None
    declared = length(response)
    buffers = (
        not policy.retry_body_errors
        and info.attempts < policy.max_attempts
        and response.status_code not in policy.retry_statuses
        and (declared is None or declared <= policy.max_body_buffer)
        and idempotent(request.method, request.headers, policy)
        and replayable(stream, controller.flavour)
    )
    resumes = controller.resume is None and request.method == "GET"
    if not buffers and (not resumes or _resumable(response) is None):
        return None
    return BodyHint(info, buffers, policy.max_body_buffer,
                    _Head(response.status_code, response.headers) if resumes else None)
