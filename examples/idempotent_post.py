"""A POST made safe to retry with an Idempotency-Key, against a server that deduplicates.

The server processes each key once and replays the stored result for retries (as Stripe
does). The first attempt's response is lost on the way back (a 502 from a gateway after the
charge went through), so the retry is what tells the client the charge succeeded, and the
customer is charged once.

    python examples/idempotent_post.py
"""

from __future__ import annotations

import httpx

import retry_transport as rt

charges: list[bytes] = []
results: dict[str, httpx.Response] = {}
lost_first_answer = True


def payments(request: httpx.Request) -> httpx.Response:
    global lost_first_answer
    key = request.headers.get("idempotency-key")
    if key is not None and key in results:
        return results[key]  # a retry: replay the first result, charge nothing
    charges.append(request.content)
    result = httpx.Response(201, json={"charge": len(charges)})
    if key is not None:
        results[key] = result
    if lost_first_answer:
        lost_first_answer = False
        return httpx.Response(502)  # the charge happened, the answer did not get through
    return result


def main() -> None:
    global lost_first_answer
    transport = rt.RetryTransport(httpx.MockTransport(payments), sleep=lambda s: None)
    with httpx.Client(transport=transport) as client:
        response = client.post("https://pay.example.com/charges", content=b"10 EUR")
        print(f"without a key: {response.status_code} ({rt.retry_info(response).stop_reason}),"  # type: ignore[union-attr]
              f" charges so far {len(charges)}: the client cannot know, and does not resend")

        lost_first_answer = True
        response = client.post("https://pay.example.com/charges", content=b"20 EUR",
                               headers={"Idempotency-Key": '"order-1234"'})
        info = rt.retry_info(response)
        assert info is not None
        print(f"with a key: {response.status_code} {response.json()} after {info.attempts} "
              f"attempts, charges so far {len(charges)}: charged once")

    auto = rt.RetryTransport(httpx.MockTransport(payments), sleep=lambda s: None,
                             auto_idempotency_key=True)
    lost_first_answer = True
    with httpx.Client(transport=auto) as client:
        response = client.post("https://pay.example.com/charges", content=b"30 EUR")
        print(f"auto key {response.request.headers['idempotency-key']}: {response.status_code}, "
              f"charges so far {len(charges)}")


if __name__ == "__main__":
    main()
