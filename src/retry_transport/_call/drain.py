"""Whether a response that is not handed over is read to its end before it is closed: a
small body read keeps its keep-alive connection in the pool instead of tearing it down (a
retry storm should not add connection handshakes to the load)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from .._wire.http import length

if TYPE_CHECKING:
    from .._base.flavour import Response

__all__ = ["DRAIN_MAX_BYTES", "DRAIN_MAX_SECONDS", "worth_draining"]

#: A discarded response whose declared body is at most this many bytes is read to the end
#: before it is closed, so its keep-alive connection goes back to the pool instead of being
#: torn down (a retry storm should not add connection handshakes to the load).
DRAIN_MAX_BYTES: Final = 64 * 1024
#: ... and draining it takes at most this many seconds: a body that trickles in (each chunk
#: just inside the read timeout) is dropped with its connection instead of holding the retry.
DRAIN_MAX_SECONDS: Final = 0.25


def worth_draining(progress: Any, response: Response, in_memory: type[Any]) -> bool:
    """Whether to read ``response``'s body before closing it: a small declared body
    (``DRAIN_MAX_BYTES``), not already in memory (``in_memory``: a mock's, an ASGI app's:
    no connection to keep), and no deadline on the request (``progress``, the call's
    ``Progress`` or ``None``: a slow body could outlast it)."""
    if progress is not None and (progress.deadline_at is not None
                                 or progress.ambient is not None):
        return False
    if isinstance(response.stream, in_memory):
        return False
    declared = length(response)
    return declared is not None and declared <= DRAIN_MAX_BYTES
