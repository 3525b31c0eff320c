"""A refusal sent inside a ``200``: the first events of an event stream, judged by the
policy's ``retry_event`` before the response is handed over.

Sans-I/O: the driver reads the body's raw chunks and feeds them to an :class:`EventJudge`,
which holds them (as they came) and shows each event they complete to ``retry_event``: while
it answers ``None`` the next chunk is read; ``False`` hands the response over with every
chunk held in front of the rest; ``True`` is an in-band refusal, which the call judges as
the attempt's outcome (:meth:`~.core.RetryCall.on_refusal`). Past :data:`MAX_HELD_EVENTS`
events or :data:`MAX_HELD_BYTES` bytes, the response is handed over unjudged.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any, Final

from .._base.flavour import Request, Response
from .._policy.policy import qualified_name
from .._wire.http import add_note
from .._wire.resumable import encoding, media_type
from .._wire.sse import EventReader, ServerSentEvent

__all__ = ["MAX_HELD_BYTES", "MAX_HELD_EVENTS", "EventJudge", "judged", "label"]

#: The most events held back while ``retry_event`` answers ``None``.
MAX_HELD_EVENTS: Final = 64
#: The most bytes of a body held back before it is handed over unjudged.
MAX_HELD_BYTES: Final = 256 * 1024
#: The longest part of :func:`label` kept from an event's name or data.
_LABEL_PART: Final = 100


def judged(response: Response) -> bool:
    """Whether ``retry_event`` judges ``response``'s events: a ``2xx`` whose body is a
    ``text/event-stream`` of its bytes (one under a content coding is handed over
    unjudged: its raw bytes are not the events)."""
    return (200 <= response.status_code < 300
            and media_type(response) == "text/event-stream" and not encoding(response))


class EventJudge:
    """One response's first events, judged by ``judge`` (the policy's ``retry_event``)."""

    __slots__ = ("_counted", "_judge", "_reader", "event", "held", "raised")

    def __init__(self, judge: Callable[[ServerSentEvent], bool | None], request: Request
                 ) -> None:
        self._judge = judge
        last_id = request.headers.get("last-event-id")  # what the server goes on from
        self._reader = EventReader(last_id or None)
        #: The chunks read so far, as they came: handed over in front of the rest.
        self.held: list[bytes] = []
        #: The event ``retry_event`` refused the response for (its answer was ``True``).
        self.event: ServerSentEvent | None = None
        #: What ``retry_event`` raised (with a note naming it), to be raised by the driver
        #: once the response is closed.
        self.raised: Exception | None = None
        self._counted = 0  # the events judged

    def feed(self, chunk: bytes) -> bool | None:
        """Hold ``chunk`` and judge the events it completes: ``True`` refused (see
        ``event``), ``False`` to hand over (content began, a limit was passed, or
        ``retry_event`` raised: see ``raised``), ``None`` to read on."""
        self.held.append(chunk)
        reader = self._reader
        for event, end in reader.feed(chunk):
            if end > MAX_HELD_BYTES:
                return False  # past the limit: unjudged
            answer = self._ask(event)
            if answer is not None:
                if answer:
                    self.event = event
                return answer
            self._counted += 1
            if self._counted >= MAX_HELD_EVENTS:
                return False
        if reader.offset > MAX_HELD_BYTES:
            return False
        return None

    def _ask(self, event: ServerSentEvent) -> bool | None:
        """``retry_event``'s answer for ``event``; what it raises, or an answer of another
        kind (a ``TypeError``), is kept in ``raised`` with a note naming it, and the answer
        is ``False``."""
        judge = self._judge
        try:
            answer: object = judge(event)
        except Exception as exc:
            add_note(exc, "retry-transport: raised by the policy's retry_event "
                          f"({qualified_name(judge)})")
            self.raised = exc
            return False
        if answer is None or answer is True or answer is False:
            return answer
        message = f"retry_event must return True, False or None, got {answer!r}"
        if inspect.isawaitable(answer):  # a plain function calling an async one
            close = getattr(answer, "close", None)
            if callable(close):
                close()  # never awaited: closed, so no "never awaited" warning follows
            message += " (an awaitable: retry_event is called, never awaited)"
        error = TypeError(message)
        add_note(error, f"retry-transport: the policy's retry_event is {qualified_name(judge)}")
        self.raised = error
        return False


def label(event: ServerSentEvent) -> str:
    """What ``Attempt.event`` says of a refusing event: its name and, when its data is a
    JSON object that names one, its error code or type (``"error/overloaded_error"``):
    the first string of ``error.code``, ``error.type``, ``response.error.code`` and
    ``code``."""
    name = event.event[:_LABEL_PART]
    try:
        data = json.loads(event.data)
    except ValueError:
        return name
    found = _named(data)
    return name if found is None else f"{name}/{found[:_LABEL_PART]}"


def _named(data: Any) -> str | None:
    """The error code or type a JSON value names (see :func:`label`), or ``None``."""
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    response = data.get("response")
    inner = response.get("error") if isinstance(response, dict) else None
    for value in (_get(error, "code"), _get(error, "type"), _get(inner, "code"),
                  data.get("code")):
        if isinstance(value, str) and value:
            return value
    return None


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None
