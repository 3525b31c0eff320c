"""Fixtures for the real-server tests: servers on 127.0.0.1, started and stopped here."""

from __future__ import annotations

import gc
import importlib
import os
import ssl
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import retry_transport as rt
from tests.real.redis_server import DelayingProxy, HungRedis, RedisServer, redis_module
from tests.real.servers import RawServer, ScriptedHTTPServer, closed_port

#: The modules whose ``create_ssl_context`` builds every ``HTTPTransport``'s SSL context.
_SSL_MODULES = ("httpx._transports.default", "httpx2._transports.default")


def _shared_default(create: Callable[..., ssl.SSLContext]) -> Callable[..., ssl.SSLContext]:
    """``create``, except that the default verification (``verify=True``, no ``cert``) is
    built once per setting of the environment it reads, and that context handed out
    again: the same CA bundle, the same checks."""
    built: dict[tuple[Any, ...], ssl.SSLContext] = {}

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True,
                           **kwargs: Any) -> ssl.SSLContext:
        if verify is not True or cert is not None or kwargs:
            return create(verify=verify, cert=cert, trust_env=trust_env, **kwargs)
        key = (trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if key not in built:
            built[key] = create(verify=verify, cert=cert, trust_env=trust_env)
        return built[key]

    return create_ssl_context


@pytest.fixture(scope="package", autouse=True)
def _one_ca_bundle_load() -> Iterator[None]:
    """Every ``HTTPTransport`` built with the default ``verify=True`` loads the CA bundle
    into a new SSL context (20-30 ms), even for the http:// URLs of these tests: that was
    a third of a test's time here. The tests of this package (the patch ends with them)
    build that context once per flavour and share it. Nothing a test checks depends on
    it: each transport is built as before and verifies as before; only the bundle is not
    read again. A context passed as ``verify=``, or ``verify=False``, goes through as
    ever."""
    with pytest.MonkeyPatch.context() as patch:
        for name in _SSL_MODULES:
            try:
                module = importlib.import_module(name)
            except ImportError:  # httpx2 needs Python 3.11
                continue
            create = getattr(module, "create_ssl_context", None)
            if create is not None:  # a library that moved it: slower, as correct
                patch.setattr(module, "create_ssl_context", _shared_default(create))
        yield


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


@pytest.fixture
def prefix() -> str:
    """A key prefix of this test's own."""
    return f"rt-test:{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def stores(request: pytest.FixtureRequest, prefix: str) -> Iterator[Callable[..., Any]]:
    """Makes RedisStores on this test's prefix (on the session's Redis unless given a URL);
    every one is closed at the end."""
    redis_module()  # skips (or fails, in CI) without the redis package
    made: list[Any] = []

    def make(url: str | None = None, **kwargs: Any) -> Any:
        if url is None:
            url = request.getfixturevalue("redis_server").url
        kwargs.setdefault("prefix", prefix)
        store = rt.RedisStore(url, **kwargs)
        made.append(store)
        return store

    try:
        yield make
    finally:
        for store in made:
            store.close()


@pytest.fixture
def frozen_heap() -> Iterator[None]:
    """The tests' ``gc.collect()`` calls are there to free what the test itself made
    (responses, connections, the cycles among them) before descriptors are counted or
    ResourceWarnings looked for. Everything that existed before the test, most of it the
    rest of the session (some 300,000 objects in a whole run, 0.18 s a collection against
    0.03 s for this file alone), is frozen for the test's length (``gc.freeze``): a
    collection does not look at it again. The test's own objects are collected exactly as
    before; an old object kept alive could only add descriptors, never hide any."""
    if not hasattr(gc, "freeze"):  # not CPython
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
