"""What the decision classes' own tests drive them with: a transport's controller built from
its options, a clock the test moves, and a guard that records what a call asks and tells it.
Nothing here sends, sleeps or starts a thread."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from retry_transport import RetryEvent, StopReason
from retry_transport._call.controller import Controller
from retry_transport._call.options import OPTIONS, Settings
from retry_transport._call.quick import QuickPath
from retry_transport._guards.seam import AttemptKind, CallView, Guard, Refusal
from retry_transport._io.transports import HTTPX
from retry_transport._policy.policy import RetryPolicy
from retry_transport._policy.rules import ORDER, Outcome

#: The URL every request of these tests goes to.
URL = "https://api.example.com/items"


class Clock:
    """The transport's monotonic clock: it reads ``now``, which the test moves."""

    now = 0.0

    def __call__(self) -> float:
        return self.now


def controller(policy: RetryPolicy | None = None, *, guards: tuple[Guard, ...] = (),
               **options: Any) -> Controller:
    """A transport's controller, as a driver builds it from its keywords (no budget, no
    cooldowns, a seeded ``rng`` unless given), with ``guards`` admitting every attempt
    before the transport's own (each first attempt asked of them: no quick path)."""
    values: dict[str, Any] = {spec.name: spec.default for spec in OPTIONS}
    values.update({"budget": None, "cooldown": False, "rng": random.Random(0), **options})
    clock: Callable[[], float] = values.pop("clock", None) or Clock()
    control = Controller(policy or RetryPolicy(), flavour=HTTPX,
                         settings=Settings.checked({**values, "clock": None}), clock=clock)
    if guards:
        every = (*guards, *control.guards)
        control.guards = every
        control.learners = tuple(guard for guard in every if guard.learns)
        control.vetoes = tuple(sorted(
            (index for index, guard in enumerate(every) if guard.reason is not None),
            key=lambda index: ORDER.index(every[index].reason)))
        quick = control.quick  # never idle: the quick path asks them of each first attempt
        control.quick = QuickPath(every, control.policy, sends_as_is=quick._as_is,
                                  reads_quotas=quick.reads_quotas,
                                  requests=control.request_counter, sample=quick._sample,
                                  final_pairs=control.final_pairs, final=control.final,
                                  observer=control.observer, clock=control.clock)
    control.quick.opened()  # as a driver opens it once its first request is checked
    return control


def hooked(policy: RetryPolicy | None = None, **options: Any
           ) -> tuple[Controller, list[RetryEvent]]:
    """A controller (see :func:`controller`) and the events its hooks receive."""
    events: list[RetryEvent] = []
    return controller(policy, hooks=[events.append], **options), events


def verdict(outcome: Outcome | None) -> int | str | None:
    """An outcome as a spy logs it: its status, else its error's class name; ``None``: no
    verdict."""
    if outcome is None:
        return None
    return outcome.status if outcome.status is not None else outcome.error


class Spy(Guard):
    """A guard that records what a call asks and tells it. It admits every attempt with a
    ticket named ``name`` and the count of its admissions (``"t1"``, ``"t2"``...), refuses
    the kinds in ``refuse`` (as an open breaker does), and answers each veto with ``veto``;
    ``reason`` puts that veto in the rule order, ``health`` says whether it judges the
    origin."""

    def __init__(self, name: str = "t", *, reason: Any = None, veto: object = None,
                 health: bool = False, refuse: tuple[AttemptKind, ...] = ()) -> None:
        self.name = name
        self.reason = reason
        self.answer = veto
        self.health = health
        self.refuse = refuse
        self.admitted = 0
        self.log: list[tuple[Any, ...]] = []

    def admit(self, call: CallView, kind: AttemptKind, paid: object) -> object:
        self.log.append(("admit", kind.value, paid))
        if kind in self.refuse:
            return Refusal(StopReason.CIRCUIT_OPEN, "circuit_open",
                           f"{call.origin}: refused by a spy", origin=call.origin,
                           remaining=1.0)
        self.admitted += 1
        return f"{self.name}{self.admitted}"

    def settle(self, call: CallView, ticket: object, outcome: Outcome | None) -> None:
        self.log.append(("settle", ticket, verdict(outcome)))

    def veto(self, call: CallView, outcome: Outcome) -> object:
        self.log.append(("veto", verdict(outcome)))
        return self.answer

    def refund(self, call: CallView, paid: object) -> None:
        self.log.append(("refund", paid))
