"""The plain first attempt: most requests are sent once and answered with a final answer.

For them the drivers skip the :class:`~._call.core.RetryCall` altogether: :func:`plain_first`
says whether the first attempt may go as it is, and :func:`plain_final` whether what came
back ends the request. Anything else (an error, a response that is not final at once) is
handed to ``RetryCall(controller, request, plain=True)``, which takes over from that outcome.
"""

from __future__ import annotations

from .._leaves.flavour import Request, Response
from .._meaning import testmode
from .._meaning.deadlines import current as ambient_scope
from .._meaning.rules import final_at_once
from .._wire.http import attach
from .controller import Controller

__all__ = ["plain_final", "plain_first"]


def plain_first(controller: Controller, request: Request) -> bool:
    """Whether ``request``'s first attempt goes as it is, the guards' plain tickets given:
    the transport's own policy (no override, no testing mode, no ambient deadline), nothing
    to add to the request (``simple``), and every guard quiet, or plain for this request.
    Counts the request when so."""
    if (
        not controller.simple
        or testmode.active is not None
        or request.extensions.get("retry") is not None
        or ambient_scope() is not None
    ):
        return False
    for guard in controller.watched:
        if not guard.quiet and not guard.plain_for(request):
            return False
    next(controller.request_counter)
    return True


def plain_final(controller: Controller, request: Request, response: Response) -> bool:
    """After a plain first attempt: whether ``response`` ends the request at once; if so,
    its metadata is attached and the plain tickets are settled with its outcome."""
    status = response.status_code
    if not final_at_once(response, status, controller.policy, controller.pacing):
        return False
    info, outcome = controller.finals.get(status) or controller.final(status)
    try:  # attach()'s usual case, without the call
        response.extensions["retry"] = info
    except TypeError:  # a mapping that cannot be written to: attach() replaces it
        attach(response, info)
    if outcome.success:
        for tally in controller.tallies:
            tally()
        for guard in controller.untallied:
            guard.settle_plain(request, outcome)
    else:
        for guard in controller.plain_guards:
            guard.settle_plain(request, outcome)
    return True
