"""Retries happening: a sync client against a flaky service on 127.0.0.1.

The service answers 503 to two requests out of three (with ``Retry-After: 0`` on every
other failure) and 200 otherwise. Run it and watch the transport ride out the blips:

    python examples/flaky_service.py
"""

from __future__ import annotations

import logging
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

import retry_transport as rt


class Flaky(BaseHTTPRequestHandler):
    count = 0
    lock = threading.Lock()

    def do_GET(self) -> None:
        with Flaky.lock:
            Flaky.count += 1
            count = Flaky.count
        if count % 3:
            self.send_response(503)
            if count % 2:
                self.send_header("Retry-After", "0")
        else:
            self.send_response(200)
        body = f"request #{count}\n".encode()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep the output to what the client sees


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="  log: %(message)s", stream=sys.stdout)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    # Polled every 50 ms, the server stops at once on shutdown() (the default is 0.5 s).
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/items"
    transport = rt.RetryTransport(max_attempts=4, base_delay=0.05, max_delay=0.5)
    try:
        with httpx.Client(transport=transport) as client:
            for _ in range(3):
                response = client.get(url)
                info = rt.retry_info(response)
                assert info is not None
                print(
                    f"{response.status_code} {response.text.strip()!r}: {info.attempts} attempts, "
                    f"waited {info.total_wait:.3f} s, statuses "
                    f"{[a.status for a in info.history]}, stop reason {info.stop_reason}"
                )
        print(f"stats: {transport.stats}")
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
