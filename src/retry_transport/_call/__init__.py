"""One request's decisions, and what a transport keeps for them.

``core`` (the state machine of a request), ``quick`` (the quick path: a first attempt sent
as it is and answered at once), ``timeleft`` (its deadline), ``hedged_call`` (a hedged
try's decisions), ``controller`` (what a transport keeps: settings, guards, counters),
``options`` (every transport keyword, declared once), ``hedging`` (``Hedging`` and its
delays) and ``latency`` (each origin's latency).
"""
