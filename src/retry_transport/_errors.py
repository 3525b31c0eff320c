"""Exceptions raised by the transports themselves."""

from __future__ import annotations

import httpx

__all__ = ["CooldownError"]


class CooldownError(httpx.TransportError):
    """The origin asked for quiet (``Retry-After`` on 429 or 503) and this request cannot wait.

    Raised before anything is sent, when the origin's remaining cooldown is longer than the
    request's ``max_retry_after`` or would run past its deadline. It subclasses
    ``httpx.TransportError``, so existing handlers of transport errors catch it.

    Attributes:
        origin: the origin that asked, as ``scheme://host:port``.
        remaining: seconds of quiet the origin still asks for.
    """

    def __init__(
        self, message: str, *, origin: str, remaining: float, request: httpx.Request
    ) -> None:
        super().__init__(message, request=request)
        self.origin = origin
        self.remaining = remaining

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only arguments: pickle and copy need to be told how to rebuild it.
        return (_rebuild, (str(self), self.origin, self.remaining, self.request), self.__dict__)


def _rebuild(message: str, origin: str, remaining: float, request: httpx.Request) -> CooldownError:
    return CooldownError(message, origin=origin, remaining=remaining, request=request)
