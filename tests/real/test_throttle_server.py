"""Adaptive throttling against a real overloaded server on 127.0.0.1.

The server accepts ``CAPACITY`` requests per second and answers 503 at once beyond that.
Four client threads offer it ``OFFERED`` requests per second in all, nearly five times its
capacity, evenly paced, for ``DURATION`` seconds through one ``RetryTransport`` with an
``AdaptiveThrottle``. Once the throttle has learnt the server's acceptance rate (from
``STEADY_FROM`` seconds on), the server must receive at most ``RATIO_BOUND`` times what it
accepts, where it would receive all 120 per second without the throttle, and it must still
accept at least ``SHARE_BOUND`` of its capacity: the throttle sheds the doomed requests,
not the ones the server could have served.

With ``k = 2`` the throttle lets through about twice what the server accepts: the
probability of a local refusal settles at ``(120 - 2 * 25) / 120``, so about 50 requests
per second reach the server and 25 are accepted. The default two-minute window is longer
than the run, so the counts cover the whole run, the first second of full overload
included.

All counts are the server's own, per second of ``time.monotonic`` since the clients'
start (one process: one clock for the server and the clients).
"""

from __future__ import annotations

import random
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest

import retry_transport as rt
from tests.real.servers import BOUND, LocalHTTPServer

pytestmark = pytest.mark.real

#: The server: a token bucket refilled at CAPACITY tokens per second, BURST deep (full at
#: the start). A request that finds a token takes it and is answered 200 after SERVICE
#: seconds; one that finds none is answered 503 at once, without ``Retry-After`` (so no
#: cooldown holds the client: the throttle alone acts).
#:
#: A bucket, not fixed 40 ms slots of one request each: what reaches the server is the
#: paced stream thinned at random by the throttle, and at 50 requests per second about one
#: 40 ms slot in thirteen would receive nothing, capacity lost to the slot model rather
#: than to the throttle. A bucket five deep keeps unused capacity for 200 ms, as real rate
#: limiters do, and still accepts at most ``CAPACITY * t + BURST`` requests in any ``t``
#: seconds.
CAPACITY = 25.0
BURST = 5.0
SERVICE = 0.0015
#: The clients: THREADS threads sharing one client, OFFERED requests per second in all,
#: for DURATION seconds.
THREADS = 4
OFFERED = 120
DURATION = 12
#: The product requirement, from STEADY_FROM seconds to the end: the server receives at
#: most RATIO_BOUND times what it accepts, and accepts at least SHARE_BOUND of CAPACITY.
STEADY_FROM = 4
RATIO_BOUND = 2.6
SHARE_BOUND = 0.9
SEED = 20160415


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True
    timeout = BOUND  # an idle keep-alive connection ends by itself
    server: OverloadedServer

    def do_GET(self) -> None:
        if self.server.admit():
            time.sleep(SERVICE)
            self._answer(200, b"ok")
        else:
            self._answer(503, b"busy")

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response_only(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class OverloadedServer(LocalHTTPServer):
    """The token-bucket server, counting per second what it received and what it accepted."""

    def __init__(self) -> None:
        super().__init__(_Handler)
        self._lock = threading.Lock()
        self._tokens = BURST
        self._refilled = time.monotonic()
        self.start_at = time.monotonic()
        # one slot per second of the run, and one for stragglers after it
        self.received = [0] * (DURATION + 1)
        self.accepted = [0] * (DURATION + 1)

    def admit(self) -> bool:
        with self._lock:
            now = time.monotonic()
            self._tokens = min(BURST, self._tokens + (now - self._refilled) * CAPACITY)
            self._refilled = now
            second = min(DURATION, max(0, int(now - self.start_at)))
            self.received[second] += 1
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            self.accepted[second] += 1
            return True


def _offer(client: httpx.Client, url: str, start: float, index: int,
           outcomes: dict[str, int], errors: list[BaseException],
           lock: threading.Lock) -> None:
    """Thread ``index``'s share of the load: one request every THREADS / OFFERED seconds,
    on a schedule of its own offset by ``index / OFFERED``, so that the threads together
    send evenly. A request that starts late (a starved thread) goes at once: the offered
    total stays the same."""
    mine: dict[str, int] = {"ok": 0, "rejected": 0, "throttled": 0, "late": 0}
    period = THREADS / OFFERED
    for n in range(DURATION * OFFERED // THREADS):
        due = start + index / OFFERED + n * period
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif delay < -period:
            mine["late"] += 1
        try:
            status = client.get(url).status_code
        except rt.ThrottledError:
            mine["throttled"] += 1
        except httpx.HTTPError as error:
            with lock:
                errors.append(error)
        else:
            mine["ok" if status == 200 else "rejected"] += 1
    with lock:
        for key, value in mine.items():
            outcomes[key] += value


def test_throttle_keeps_an_overloaded_server_at_twice_what_it_accepts() -> None:
    throttle = rt.AdaptiveThrottle(rng=random.Random(SEED))
    # max_attempts=1: each request is one attempt, so the server receives exactly what the
    # throttle lets through of the load the threads offer, and that load stays paced. With
    # the default retries, each 503 would be retried after a backoff that blocks its thread
    # (bursts when it catches up), and the retry budget would shape the load as well: the
    # test would measure the budget and the backoff along with the throttle. (Retries are
    # judged by the throttle too, so its bound does not depend on them.)
    transport = rt.RetryTransport(throttle=throttle, max_attempts=1)
    server = OverloadedServer().start()
    outcomes = {"ok": 0, "rejected": 0, "throttled": 0, "late": 0}
    errors: list[BaseException] = []
    lock = threading.Lock()
    try:
        with httpx.Client(transport=transport, timeout=httpx.Timeout(2.0)) as client:
            url = server.url + "/work"
            start = time.monotonic() + 0.05  # every thread started before the first send
            server.start_at = start
            threads = [
                threading.Thread(target=_offer, daemon=True,
                                 args=(client, url, start, index, outcomes, errors, lock))
                for index in range(THREADS)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(DURATION + 3 * BOUND)
            assert not any(thread.is_alive() for thread in threads)
    finally:
        server.stop()

    stats = transport.stats
    received = server.received[STEADY_FROM:DURATION]
    accepted = server.accepted[STEADY_FROM:DURATION]
    seconds = DURATION - STEADY_FROM
    unthrottled = OFFERED * seconds  # what the server would have received without it
    ratio = sum(received) / max(1, sum(accepted))
    share = sum(accepted) / (CAPACITY * seconds)
    worst = max(r / max(1, a) for r, a in zip(received, accepted, strict=True))
    report = (
        f"per second from {STEADY_FROM} s: received {received}, accepted {accepted}; "
        f"received/accepted {ratio:.2f} (bound {RATIO_BOUND}; worst second {worst:.2f}), "
        f"accepted {sum(accepted) / seconds:.1f}/s = {share:.0%} of {CAPACITY:g}/s "
        f"(bound {SHARE_BOUND:.0%}); without the throttle the server would have received "
        f"{unthrottled} ({OFFERED}/s, {unthrottled / max(1, sum(accepted)):.1f} times what "
        f"it accepted), it received {sum(received)}; seconds 0-{STEADY_FROM - 1}: received "
        f"{server.received[:STEADY_FROM]}, accepted {server.accepted[:STEADY_FROM]}; "
        f"client: {outcomes}, stats.throttled {stats.throttled}, "
        f"throttle counts {throttle.counts(url)}, probability "
        f"{throttle.probability(url):.3f}, errors {errors[:3]!r}"
    )
    print(report)  # shown with -s: the numbers of a passing run
    assert not errors, report
    # the throttle did refuse requests, and each refusal was a ThrottledError
    assert stats.throttled > 0, report
    assert stats.throttled == outcomes["throttled"], report
    # everything sent reached the server
    assert sum(server.received) == outcomes["ok"] + outcomes["rejected"], report
    assert sum(received) <= RATIO_BOUND * sum(accepted), report
    assert share >= SHARE_BOUND, report
