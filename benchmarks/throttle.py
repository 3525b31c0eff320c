"""What an AdaptiveThrottle costs a success: the same requests through a transport without
a throttle and one with ``AdaptiveThrottle()`` (whose origin keeps up: nothing refused),
over ``MockTransport`` answering 200, side by side in one run::

    python benchmarks/throttle.py

While no origin's counts could refuse an attempt, first attempts go without asking the
throttle; each outcome is still counted (the origin spelt out, and an accept counted without
the throttle's lock).
"""

from __future__ import annotations

import statistics
import sys

import httpx
from hedging import sync_rounds  # benchmarks/, the script's own folder

import retry_transport as rt

ROUNDS = 21
REQUESTS = 4000


def main() -> int:
    arms = {
        "without": rt.RetryTransport(httpx.MockTransport(lambda r: httpx.Response(200))),
        "with": rt.RetryTransport(httpx.MockTransport(lambda r: httpx.Response(200)),
                                  throttle=rt.AdaptiveThrottle()),
    }
    results = sync_rounds(arms, ROUNDS, REQUESTS)
    differences = [b - a for a, b in zip(results["without"], results["with"], strict=True)]
    print(f"Python {sys.version.split()[0]}, {ROUNDS} rounds x {REQUESTS:,} requests per arm")
    print(f"  without a throttle {statistics.median(results['without']):6.2f} us/req, "
          f"with {statistics.median(results['with']):6.2f} us/req: "
          f"+{statistics.median(differences):.2f} us (median of the per-round differences)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
