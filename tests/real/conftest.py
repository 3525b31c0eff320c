"""Fixtures for the real-server tests: servers on 127.0.0.1, started and stopped here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.real.redis_server import DelayingProxy, HungRedis, RedisServer
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


# -- Redis (tests/real/test_redis_store.py) ---------------------------------------------


@pytest.fixture(scope="session")
def _redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_server(_redis_server: RedisServer) -> RedisServer:
    """A throwaway ``redis-server`` on 127.0.0.1 shared by the session's tests (each test
    uses keys of its own prefix). Skips when ``redis-server`` is missing, unless
    ``RETRY_TRANSPORT_REQUIRE_REDIS=1``: then it fails."""
    return _redis_server


@pytest.fixture
def own_redis_server() -> Iterator[RedisServer]:
    """A ``redis-server`` of this test's own, which it may kill, restart or freeze."""
    server = RedisServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def hung_redis() -> Iterator[HungRedis]:
    """A "Redis" that accepts connections and never answers."""
    server = HungRedis().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def delaying_proxy(redis_server: RedisServer) -> Iterator[DelayingProxy]:
    """A proxy in front of the session's Redis that holds each reply ``delay`` seconds
    (0 until the test sets it)."""
    proxy = DelayingProxy(redis_server.port).start()
    try:
        yield proxy
    finally:
        proxy.stop()
