"""The I/O: ``drivers`` (the sync and async loops), ``hedge_loops`` (a hedged try's threads
or tasks), ``bodies`` (buffering and draining bodies) and ``transports`` (the httpx
binding: ``RetryTransport``, ``AsyncRetryTransport`` and httpx's errors)."""
