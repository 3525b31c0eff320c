"""The leaves: what every tier uses and that imports nothing of the package.

``fork`` (locks renewed in a forked child), ``validate`` (the checks of arguments),
``models`` (``RetryInfo``, ``Attempt``, ``StopReason``, events and stats), ``flavour`` (what
the core needs of httpx or httpx2), ``errors`` (the package's httpx errors) and ``contact``
(the ``From`` header).
"""
