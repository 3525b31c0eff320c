"""Exceptions raised by the transports themselves."""

from __future__ import annotations

from typing import Any

import httpx

__all__ = ["CooldownError", "CooldownErrorBase"]


class CooldownErrorBase(Exception):
    """What every flavour's ``CooldownError`` shares: the origin and the seconds left.

    Mixed in ahead of the flavour's ``TransportError``, whose constructor takes the request.
    """

    origin: str
    remaining: float

    def __init__(self, message: str, *, origin: str, remaining: float, request: Any) -> None:
        super().__init__(message, request=request)  # type: ignore[call-arg]
        self.origin = origin
        self.remaining = remaining

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only arguments: pickle and copy need to be told how to rebuild it.
        return (
            _rebuild,
            (type(self), str(self), self.origin, self.remaining, self.request),  # type: ignore[attr-defined]
            self.__dict__,
        )


def _rebuild(
    cls: type[CooldownErrorBase], message: str, origin: str, remaining: float, request: Any
) -> CooldownErrorBase:
    return cls(message, origin=origin, remaining=remaining, request=request)


class CooldownError(CooldownErrorBase, httpx.TransportError):
    """The origin asked for quiet (``Retry-After`` on 429 or 503) and this request cannot wait.

    Raised before anything is sent, when the origin's remaining cooldown is longer than the
    request's ``max_retry_after`` or would run past its deadline. It subclasses
    ``httpx.TransportError``, so existing handlers of transport errors catch it.

    Attributes:
        origin: the origin that asked, as ``scheme://host:port``.
        remaining: seconds of quiet the origin still asks for.
    """
