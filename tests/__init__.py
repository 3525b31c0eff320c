"""The suite, one folder per tier of the package, lowest first.

``rules/``: the pure rules as tables (reading the wire, the rule order, the policy, the
observer, counting, forks). ``guards/``: each guard's component on its own. ``call/``: one
request's decisions driven with fakes, and the success path's guards against extra work.
``transport/``: the behaviours through the transports, in the 6-mode matrix (httpx and
httpx2, sync, asyncio and trio) with one representative row of each table
(``tests/tables.py``). ``tools/``: the simulator, the middlewares, OpenTelemetry, testing
mode, the examples. ``contracts/``: the layout, the exports, the docs' examples and figures,
the generated sync loop. ``real/``: against real servers on 127.0.0.1. Shared: ``harness``
(one fake clock, one scripted transport per mode), ``flavour``, ``tables``.
"""
