"""A different policy per host, mounted the ordinary httpx way.

The search API is cheap to retry: more attempts, a short deadline. The payments API gets
few, slow retries and only for requests that carry an idempotency key (the default).

    python examples/mounts_per_host.py
"""

from __future__ import annotations

import httpx

import retry_transport as rt


def outage(request: httpx.Request) -> httpx.Response:
    return httpx.Response(503)


def main() -> None:
    service = httpx.MockTransport(outage)
    budget = rt.RetryBudget()  # one budget for the whole client: a wide outage stays bounded
    no_wait = {"sleep": lambda seconds: None}  # keep the example quick
    mounts: dict[str, httpx.BaseTransport] = {
        "https://search.example.com": rt.RetryTransport(
            service, max_attempts=5, base_delay=0.05, deadline=2.0, budget=budget, **no_wait
        ),
        "https://payments.example.com": rt.RetryTransport(
            service, max_attempts=2, base_delay=1.0, budget=budget, **no_wait
        ),
    }
    with httpx.Client(mounts=mounts) as client:
        for url, method in [
            ("https://search.example.com/q?term=shoes", "GET"),
            ("https://payments.example.com/charges", "POST"),
            ("https://payments.example.com/charges/ch_1", "GET"),
        ]:
            response = client.request(method, url)
            info = rt.retry_info(response)
            assert info is not None
            print(f"{method} {url.split('?')[0]}: {response.status_code}, "
                  f"{info.attempts} attempt(s), stop reason {info.stop_reason}")
    print(f"budget left: {budget.tokens} of {budget.capacity}")


if __name__ == "__main__":
    main()
