"""Downloads over a flaky link: a large file, a connection that drops every so often, and
an application that starts a failed download again from the beginning, with and without
resumable bodies (``Resume``). The model (:func:`run_downloads`):

* ``downloads`` (100) independent downloads of a ``size``-byte file (100 MB), all started
  at t = 0, each by an application of its own with a real ``AsyncRetryTransport`` of its
  own (``RetryPolicy()``, the default ``RetryBudget()``; ``resume``: ``None`` or
  ``Resume()``) over a link of its own. Each download is a ``GET`` handed to the
  transport's ``handle_async_request`` as a client hands it, its body read with
  ``aiter_raw()`` (the client itself is left out: it adds nothing to what is measured).
* The link carries ``bandwidth`` bytes a second (10 MB/s) and drops the connection after
  an exponentially distributed number of bytes, ``mean_drop`` (20 MB) on average, whatever
  the connection: the body being read then raises ``httpx.ReadError``. Each request waits
  ``round_trip`` (0.1 s) for its response's headers.
* The server: the file has a strong ``ETag``; a ``Range`` with a matching ``If-Range`` is
  answered ``206`` with those bytes, as any file server does.
* The application: when an error reaches it, it starts the download again from the
  beginning, at once, up to ``tries`` (10) times in all; then it gives up.
* Counting: bytes that crossed the link, downloads completed, the virtual time each took
  from t = 0 to its last byte, the resumptions (``retry_info``) and the restarts.
* Determinism: download ``i``'s drops are drawn from ``random.Random(f"downloads:{seed}:
  {i}")``, so every configuration meets the same link; the jitter from a seeded generator.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

import httpx

from retry_transport import AsyncRetryTransport, Resume, retry_info

from . import _virtual as virtual
from ._virtual import run_jumping

__all__ = ["DOWNLOAD_RESUMES", "DownloadsResult", "run_downloads"]

_URL: Final = httpx.URL("http://files.sim/big.bin")
_ETAG: Final = '"big-1"'
#: The link hands the body on in pieces of this many bytes (each one a wait).
_PIECE: Final = 4 * 1024 * 1024
#: What the link carries: slices of one buffer, never a copy.
_ZEROS: Final = memoryview(bytes(_PIECE))

#: The command's configurations: (label, resume).
DOWNLOAD_RESUMES: Final[tuple[tuple[str, Resume | None], ...]] = (
    ("none", None),
    ("Resume()", Resume()),
)


@dataclass(frozen=True, slots=True)
class DownloadsResult:
    """One configuration's downloads over the flaky link.

    Attributes:
        resume: the transports' ``resume=``.
        seed: the run's seed.
        downloads: downloads started.
        size: the file's size in bytes.
        mean_drop: the link's mean bytes between drops.
        bandwidth: the link's bytes a second.
        tries: the most times the application starts a download.
        transferred: bytes that crossed the link, all downloads together.
        times: per completed download, seconds from t = 0 to its last byte, in order.
        resumes: resumptions, all downloads together.
        most_resumes: the most resumptions of one download (of all its tries).
        restarts: downloads started again by the application, all together.
        failed: downloads given up after ``tries``.
    """

    resume: Resume | None
    seed: int
    downloads: int
    size: int
    mean_drop: float
    bandwidth: float
    tries: int
    transferred: int
    times: tuple[float, ...]
    resumes: int
    restarts: int
    failed: int
    most_resumes: int = 0


class _Link(httpx.AsyncBaseTransport):
    """One download's server, over a link that drops the connection every so often."""

    def __init__(self, size: int, mean_drop: float, bandwidth: float, round_trip: float,
                 rng: random.Random) -> None:
        self.size, self.bandwidth, self.round_trip = size, bandwidth, round_trip
        self.mean_drop, self.rng = mean_drop, rng
        self.until_drop = rng.expovariate(1 / mean_drop)  # bytes before the next drop
        self.transferred = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await virtual.sleep(self.round_trip)
        first, status = 0, 200
        asked = request.headers.get("range")
        if asked is not None and request.headers.get("if-range") == _ETAG:
            first, status = int(asked.removeprefix("bytes=").partition("-")[0]), 206
        headers = {"etag": _ETAG, "content-length": str(self.size - first)}
        if status == 206:
            headers["content-range"] = f"bytes {first}-{self.size - 1}/{self.size}"
        return httpx.Response(status, headers=headers, stream=_Body(self, first))


class _Body(httpx.AsyncByteStream):
    """The bytes from ``first`` on, at the link's pace, until the link drops."""

    def __init__(self, link: _Link, first: int) -> None:
        self.link, self.first = link, first

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        link, at = self.link, self.first
        while at < link.size:
            piece = min(_PIECE, link.size - at)
            dropped = link.until_drop < piece
            if dropped:
                piece = int(link.until_drop)
            await virtual.sleep(piece / link.bandwidth)
            link.transferred += piece
            at += piece
            if dropped:
                link.until_drop = link.rng.expovariate(1 / link.mean_drop)
                if piece:
                    yield _ZEROS[:piece]
                raise httpx.ReadError("the link dropped the connection")
            link.until_drop -= piece
            yield _ZEROS if piece == _PIECE else _ZEROS[:piece]

    async def aclose(self) -> None:
        pass


def run_downloads(resume: Resume | None, *, seed: int = 0, downloads: int = 100,
                  size: int = 100_000_000, mean_drop: float = 20_000_000,
                  bandwidth: float = 10_000_000, round_trip: float = 0.1,
                  tries: int = 10) -> DownloadsResult:
    """Run ``downloads`` downloads over flaky links with ``resume`` (see the module)."""
    links = [_Link(size, mean_drop, bandwidth, round_trip, random.Random(f"downloads:{seed}:{i}"))
             for i in range(downloads)]
    times: list[float | None] = [None] * downloads
    counts = {"restarts": 0}
    each = [0] * downloads  # resumptions per download

    async def download(index: int) -> None:
        transport = AsyncRetryTransport(links[index], resume=resume,
                                        rng=random.Random(f"jitter:{seed}:{index}"))
        for attempt in range(tries):
            if attempt:
                counts["restarts"] += 1
            response = await transport.handle_async_request(virtual.get(_URL))
            try:
                async for _ in response.aiter_raw():
                    pass
            except httpx.TransportError as exc:
                info = retry_info(exc)
                each[index] += info.resumes if info is not None else 0
                continue
            finally:
                await response.aclose()
            info = retry_info(response)
            each[index] += info.resumes if info is not None else 0
            times[index] = virtual.now()
            return

    async def main() -> None:
        async with virtual.task_group() as nursery:
            for index in range(downloads):
                nursery.start_soon(download, index)

    run_jumping(main)
    done = tuple(t for t in times if t is not None)
    return DownloadsResult(
        resume=resume, seed=seed, downloads=downloads, size=size, mean_drop=mean_drop,
        bandwidth=bandwidth, tries=tries, transferred=sum(link.transferred for link in links),
        times=done, resumes=sum(each), restarts=counts["restarts"],
        failed=downloads - len(done), most_resumes=max(each, default=0))
