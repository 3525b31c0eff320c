"""One request's decisions, and what a transport keeps for them.

``core`` (the state machine of a request), ``progress`` (what happened to it beyond a quick
first attempt), ``drain`` (whether a response not handed over is read to its end), ``quick``
(the quick path: a first attempt sent as it is and answered at once), ``timeleft`` (its
deadline), ``hedged_call`` (a hedged try's decisions), ``controller`` (what a transport
keeps: settings, guards, counters), ``options`` (every transport keyword, declared once),
``hedging`` (``Hedging`` and its delays), ``latency`` (each origin's latency), ``resume``
(``Resume``, the settings of resumable bodies), ``resumption`` (a broken body's decisions,
from its first break on), ``hints`` (what would have saved a body that broke in the caller's
hands), ``idle`` (what a body handed over counts as progress, and what its stall says) and
``inband`` (a refusal sent inside a ``200``: an event stream's first events judged).
"""
