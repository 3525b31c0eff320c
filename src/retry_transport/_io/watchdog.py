"""The thread that ends a sync read stalled past its ``idle_timeout``.

An async read is bounded by a cancel scope (``idle.py``); a sync one blocks in the socket,
and nothing in its own thread can end it. So each sync read of a body bounded by
``idle_timeout`` arms an :class:`Alarm` with the time its silence may last, and disarms it
when the read returns. One daemon thread per process (started at the first alarm, ended once
no alarm has been armed for :data:`LINGER` seconds) sleeps until the earliest alarm is due,
and then *fires* it: it shuts the response's socket down (``shutdown(SHUT_RDWR)``, which
wakes a read blocked on it on every platform, where closing the socket from another thread
may not), or, for a body with no socket to reach (an HTTP/2 stream, a mock's or an
application's body), closes the body itself. The reading thread, woken with an error or an
end, sees that its alarm fired and raises the stall; the response is closed in that thread.

Time here is the real monotonic clock: the silence being bounded is the network's. The alarm
fires under the thread's lock, so a reader that disarms it afterwards knows the firing is
over before it closes the response (no shutdown can then meet a socket reused since).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

from .._base.fork import module_locks

__all__ = ["WATCHDOG", "Alarm", "Watchdog"]

#: Seconds the thread waits with no alarm armed before it ends (the next alarm starts one).
LINGER: Final = 30.0


class Alarm:
    """One body's alarm: ``fire`` ends its read; ``at`` is when, while armed."""

    __slots__ = ("at", "fire", "fired")

    def __init__(self, fire: Callable[[], None]) -> None:
        self.fire = fire
        self.at = 0.0
        self.fired = False


class Watchdog:
    """The alarms armed, and the thread that fires those that come due."""

    def __init__(self) -> None:
        self._renew_locks()

    def _renew_locks(self) -> None:
        """A fresh state: at construction, and in a forked child (the parent's thread and
        its alarms are not there)."""
        self._cond = threading.Condition(threading.Lock())
        self._armed: set[Alarm] = set()
        self._thread: threading.Thread | None = None
        self._wakes = float("inf")  # when the thread wakes next (inf: when notified)

    def arm(self, alarm: Alarm, at: float) -> None:
        """Fire ``alarm`` at ``at`` (``time.monotonic()``) unless disarmed before."""
        with self._cond:
            alarm.at = at
            alarm.fired = False
            self._armed.add(alarm)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="retry-transport-idle-watchdog")
                self._thread.start()
            elif at < self._wakes:
                self._cond.notify()

    def disarm(self, alarm: Alarm) -> bool:
        """Disarm ``alarm``: whether it fired (its read was ended, or is to be)."""
        with self._cond:
            self._armed.discard(alarm)
            return alarm.fired

    def _run(self) -> None:
        cond, armed = self._cond, self._armed
        with cond:
            while True:
                if not armed:
                    self._wakes = float("inf")
                    if not cond.wait(LINGER) and not armed:
                        self._thread = None
                        return
                    continue
                now = time.monotonic()
                due = [alarm for alarm in armed if alarm.at <= now]
                for alarm in due:
                    armed.discard(alarm)
                    alarm.fired = True
                    try:
                        alarm.fire()
                    except Exception:  # a socket already closed: the read has ended anyway
                        pass
                if armed:
                    self._wakes = min(alarm.at for alarm in armed)
                    cond.wait(self._wakes - now)


#: The process's watchdog.
WATCHDOG: Final = Watchdog()
module_locks(WATCHDOG._renew_locks)  # a forked child starts with no thread and no alarm
