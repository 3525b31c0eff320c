"""Secrets never reach the transport's logs, hooks, exception notes or metadata: no
userinfo, no query string, no Authorization, Cookie or Proxy-Authorization value, for
requests that retry and give up against real servers."""

from __future__ import annotations

import base64
import logging
import sys
from typing import Any

import pytest

from tests.flavour import httpx, rt
from tests.real.clients import Waits, client_timeout
from tests.real.servers import RawServer, Reply, ScriptedHTTPServer

pytestmark = [pytest.mark.real, pytest.mark.usefixtures("flavour")]

USER, PASSWORD = "alice-userinfo", "hunter2-password"
SECRETS = [
    USER,
    PASSWORD,
    base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(),  # the Basic credentials
    "api_key",
    "s3cret-query",
    "t0ken-query",
    "bearer-s3cret",
    "cookie-s3cret",
    "proxy-s3cret",
    "?",
    "@",
]
HEADERS = {
    "Cookie": "session=cookie-s3cret",
    "Proxy-Authorization": "Basic proxy-s3cret",
}


def secret_url(base: str, path: str) -> str:
    scheme, rest = base.split("://")
    return f"{scheme}://{USER}:{PASSWORD}@{rest}{path}?api_key=s3cret-query&token=t0ken-query"


class Recorder:
    """Everything the transport said: its log records, hook events, exceptions."""

    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self.caplog = caplog
        self.events: list[rt.RetryEvent] = []
        self.errors: list[BaseException] = []
        self.infos: list[rt.RetryInfo] = []

    def hook(self, event: rt.RetryEvent) -> None:
        self.events.append(event)

    def transport(self, **kwargs: Any) -> rt.RetryTransport:
        return rt.RetryTransport(sleep=Waits().sleep, hooks=[self.hook], **kwargs)

    def request(self, client: httpx.Client, method: str, url: str, **kwargs: Any) -> None:
        try:
            response = client.request(method, url, **kwargs)
        except httpx.TransportError as exc:
            self.errors.append(exc)
            info = rt.retry_info(exc)
        else:
            info = rt.retry_info(response)
        assert info is not None
        self.infos.append(info)

    def said(self) -> str:
        records = [r for r in self.caplog.records if r.name.startswith("retry_transport")]
        parts = [self.caplog.text]
        for record in records:
            parts += [record.getMessage(), repr(record.args), repr(record.__dict__)]
        parts += [repr(event) for event in self.events]
        parts += [repr(info) for info in self.infos]
        for error in self.errors:
            parts += [str(error), repr(error), *getattr(error, "__notes__", [])]
        return "\n".join(parts)

    def check(self) -> None:
        text = self.said()
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} leaked"


def test_no_secrets_when_retrying_and_giving_up(
    http_server: ScriptedHTTPServer, raw_server: RawServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    recorder = Recorder(caplog)
    always_503 = secret_url(http_server.url, "/v1/always")
    http_server.script("/v1/always", then=Reply(503))
    flaky = secret_url(http_server.url, "/v1/flaky")
    http_server.script("/v1/flaky", Reply(502))
    resets = secret_url(raw_server.url, "/raw")
    raw_server.script(then="reset")
    transport = recorder.transport(cooldown=False)
    with httpx.Client(transport=transport, timeout=client_timeout()) as client:
        recorder.request(client, "GET", always_503, headers=HEADERS)  # retries, gives up
        recorder.request(client, "GET", flaky, headers=HEADERS)  # retries, succeeds
        recorder.request(client, "POST", always_503, headers=HEADERS)  # refused: WARNING
        recorder.request(client, "GET", always_503, headers=HEADERS,
                         extensions={"retry": False})  # disabled: DEBUG
        recorder.request(client, "GET", resets, headers=HEADERS)  # an error: notes
        auth = {**HEADERS, "Authorization": "Bearer bearer-s3cret"}
        plain = f"{http_server.url}/v1/always?api_key=s3cret-query"
        recorder.request(client, "DELETE", plain, headers=auth)
    # The scenarios happened: every level, both hook kinds, an exception with a note.
    levels = {r.levelno for r in caplog.records if r.name == "retry_transport"}
    assert levels == {logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR}
    assert {event.kind for event in recorder.events} == {"retry", "give_up"}
    assert [type(e) for e in recorder.errors] == [httpx.ReadError]
    if sys.version_info >= (3, 11):
        assert recorder.errors[0].__notes__
    assert "/v1/always" in caplog.text  # the path is what identifies the request
    assert all(e.url.endswith(("/v1/always", "/v1/flaky", "/raw")) for e in recorder.events)
    # the server did receive the secrets: they were sent, just never repeated to anyone else
    sent = http_server.requests("/v1/always")[0]
    assert sent.header("authorization") and sent.query.startswith("api_key=")
    recorder.check()


def test_no_secrets_in_a_cooldown_error(
    http_server: ScriptedHTTPServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The origin named by a CooldownError has no userinfo."""
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    recorder = Recorder(caplog)
    url = secret_url(http_server.url, "/v1/busy")
    http_server.script("/v1/busy", then=Reply(503, retry_after=("seconds", 30)))
    transport = recorder.transport(max_attempts=1)
    with httpx.Client(transport=transport, timeout=client_timeout()) as client:
        recorder.request(client, "GET", url, headers=HEADERS)  # starts a 30 s cooldown
        recorder.request(client, "GET", url, headers=HEADERS,
                         extensions={"retry": {"max_retry_after": 5}})
    assert isinstance(recorder.errors[0], rt.CooldownError)
    assert recorder.errors[0].origin == f"http://127.0.0.1:{http_server.server_port}"
    assert http_server.count("/v1/busy") == 1
    recorder.check()
