"""The base every tier stands on, importing nothing from outside this folder.

``fork`` (locks renewed in a forked child), ``validate`` (the checks of arguments),
``models`` (``RetryInfo``, ``Attempt``, ``StopReason``, events and stats), ``flavour`` (what
the core needs of httpx or httpx2), ``errors`` (what each flavour's errors share, and the
factory that makes them), ``counting`` (lock-free counting, amortised pruning) and ``contact``
(the ``From`` header).
"""
