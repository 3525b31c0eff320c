"""Fixtures for the real-server tests: servers on 127.0.0.1, started and stopped here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.real.servers import RawServer, ScriptedHTTPServer, closed_port


@pytest.fixture(scope="session")
def _http_server() -> Iterator[ScriptedHTTPServer]:
    server = ScriptedHTTPServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def http_server(_http_server: ScriptedHTTPServer) -> ScriptedHTTPServer:
    """The scripted HTTP/1.1 server, with its scripts and records cleared for this test."""
    _http_server.reset()
    return _http_server


@pytest.fixture
def raw_server() -> Iterator[RawServer]:
    """A raw-socket server that misbehaves as each test scripts it."""
    server = RawServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def refused_url() -> str:
    """A URL on 127.0.0.1 whose port refuses connections."""
    return f"http://127.0.0.1:{closed_port()}/refused"
