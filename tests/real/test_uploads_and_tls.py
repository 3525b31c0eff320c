"""Multipart uploads and TLS against real servers on 127.0.0.1: what each attempt's file part
carried, byte for byte, and certificates that no retry can fix. Each test runs sync, and
async on asyncio and trio."""

from __future__ import annotations

import email.parser
import email.policy
import io
import logging
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import trustme

from tests.flavour import httpx, rt
from tests.real.clients import Outcome, Waits
from tests.real.servers import Reply, ScriptedHTTPServer, Seen, TLSScriptedHTTPServer

pytestmark = [pytest.mark.real, pytest.mark.usefixtures("flavour")]

DATA = bytes(range(256)) * 40  # 10,240 bytes, every byte value


class SeekWithoutSeekable:
    """A file-like object with ``seek`` and ``tell`` but no ``seekable()``."""

    def __init__(self, data: bytes) -> None:
        self._buffer = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self._buffer.read(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._buffer.seek(offset, whence)

    def tell(self) -> int:
        return self._buffer.tell()


class SeekRefused(SeekWithoutSeekable):
    """Says it is seekable, but refuses to seek (a pipe behind a wrapper)."""

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        raise io.UnsupportedOperation("seek")


class Unseekable(SeekWithoutSeekable):
    """Says plainly that it cannot seek."""

    def seekable(self) -> bool:
        return False


def file_part(seen: Seen, name: str = "upload") -> bytes:
    """The bytes of the form part ``name`` in one multipart request the server received."""
    head = f"Content-Type: {seen.header('content-type')}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + seen.body)
    for part in message.iter_parts():
        if part.get_param("name", header="content-disposition") == name:
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)
            return payload
    raise AssertionError(f"no part named {name!r}")


def upload(mode: str, url: str, file: Any, **kwargs: Any) -> Outcome:
    """PUT ``file`` as a multipart upload through a real retry transport."""
    recorder = Waits()
    files = {"upload": ("data.bin", file, "application/octet-stream")}
    if mode == "sync":
        transport = rt.RetryTransport(sleep=recorder.sleep, **kwargs)
        with httpx.Client(transport=transport, timeout=2.0) as client:
            try:
                return Outcome(client.put(url, files=files), None, transport, recorder.waits)
            except Exception as exc:
                return Outcome(None, exc, transport, recorder.waits)

    async def main() -> Outcome:
        transport = rt.AsyncRetryTransport(sleep=recorder.asleep, **kwargs)
        async with httpx.AsyncClient(transport=transport, timeout=2.0) as client:
            try:
                response = await client.put(url, files=files)
            except Exception as exc:
                return Outcome(None, exc, transport, recorder.waits)
            return Outcome(response, None, transport, recorder.waits)

    return anyio.run(main, backend=mode)


MODES = ["sync", "asyncio", "trio"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", [SeekWithoutSeekable, SeekRefused, Unseekable])
def test_a_file_part_that_cannot_prove_its_rewind_is_sent_once(
    http_server: ScriptedHTTPServer, mode: str, kind: type[SeekWithoutSeekable]
) -> None:
    """A file that cannot be shown to rewind is never re-sent (it would go out empty)."""
    url = http_server.script("/upload", Reply(503))
    outcome = upload(mode, url, kind(DATA))
    assert outcome.status == 503
    assert outcome.info.stop_reason is rt.StopReason.BODY_NOT_REPLAYABLE
    seen = http_server.requests("/upload")
    assert len(seen) == 1
    assert file_part(seen[0]) == DATA


@pytest.mark.parametrize("mode", MODES)
def test_a_seekable_file_is_re_sent_whole(
    http_server: ScriptedHTTPServer, mode: str, tmp_path: Path
) -> None:
    """A real file, and a BytesIO, go out in full on every attempt."""
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    for make in (lambda: path.open("rb"), lambda: io.BytesIO(DATA)):
        http_server.reset()
        url = http_server.script("/upload", Reply(503), Reply(503))
        with make() as file:
            outcome = upload(mode, url, file)
        assert outcome.status == 200
        assert outcome.info.stop_reason is rt.StopReason.SUCCESS
        assert [len(file_part(seen)) for seen in http_server.requests("/upload")] == [
            len(DATA)
        ] * 3
        assert all(file_part(seen) == DATA for seen in http_server.requests("/upload"))


@pytest.mark.parametrize("mode", MODES)
def test_a_file_read_halfway_before_the_request_is_re_sent_from_its_start(
    http_server: ScriptedHTTPServer, mode: str
) -> None:
    """httpx sends a file part from its start; a retry does the same, never the tail."""
    file = io.BytesIO(DATA)
    file.seek(len(DATA) // 2)
    url = http_server.script("/upload", Reply(503))
    outcome = upload(mode, url, file)
    assert outcome.status == 200
    assert [file_part(seen) for seen in http_server.requests("/upload")] == [DATA, DATA]


# -- TLS ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls_server(authority: trustme.CA) -> Iterator[TLSScriptedHTTPServer]:
    """The scripted server on https://127.0.0.1, with a certificate from a throwaway CA."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    server = TLSScriptedHTTPServer(context).start()
    try:
        yield server
    finally:
        server.stop()


def tls_send(mode: str, url: str, verify: Any, **kwargs: Any) -> Outcome:
    recorder = Waits()
    if mode == "sync":
        transport = rt.RetryTransport(sleep=recorder.sleep, verify=verify, **kwargs)
        with httpx.Client(transport=transport, timeout=2.0) as client:
            try:
                return Outcome(client.get(url), None, transport, recorder.waits)
            except Exception as exc:
                return Outcome(None, exc, transport, recorder.waits)

    async def main() -> Outcome:
        transport = rt.AsyncRetryTransport(sleep=recorder.asleep, verify=verify, **kwargs)
        async with httpx.AsyncClient(transport=transport, timeout=2.0) as client:
            try:
                response = await client.get(url)
            except Exception as exc:
                return Outcome(None, exc, transport, recorder.waits)
            return Outcome(response, None, transport, recorder.waits)

    return anyio.run(main, backend=mode)


@pytest.mark.parametrize("mode", MODES)
def test_a_certificate_that_fails_verification_is_not_retried(
    tls_server: TLSScriptedHTTPServer, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An untrusted certificate is permanent: one handshake, no budget spent, no retry."""
    caplog.set_level(logging.INFO, logger="retry_transport")
    url = tls_server.script("/secure")
    outcome = tls_send(mode, url, verify=True, max_attempts=5)  # the system's CAs only
    assert isinstance(outcome.error, httpx.ConnectError)
    cause: BaseException | None = outcome.error
    while cause is not None and not isinstance(cause, ssl.SSLCertVerificationError):
        cause = cause.__cause__ or cause.__context__
    assert isinstance(cause, ssl.SSLCertVerificationError)
    info = outcome.info
    assert (info.attempts, info.stop_reason) == (1, rt.StopReason.NOT_RETRYABLE)
    assert outcome.waits == []
    assert tls_server.connections == 1
    budget = outcome.transport.budget
    assert budget is not None and budget.tokens == budget.capacity
    assert "Retrying" not in caplog.text


@pytest.mark.parametrize("mode", MODES)
def test_a_trusted_certificate_still_retries_a_503(
    tls_server: TLSScriptedHTTPServer, mode: str, authority: trustme.CA
) -> None:
    """Over TLS that verifies, transient failures are retried as ever."""
    context = ssl.create_default_context()
    authority.configure_trust(context)
    url = tls_server.script("/secure", Reply(503))
    outcome = tls_send(mode, url, verify=context)
    assert outcome.status == 200
    assert outcome.info.attempts == 2
    assert tls_server.count("/secure") == 2
