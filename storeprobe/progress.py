"""Progress drawn off the timed path.

Inside the timed window the engine only adds each request's bytes to a
:class:`~storeprobe.transfer.Meter` (one integer add). A :class:`Pump` thread reads the
meter at most ``rate`` times a second and tells an ``fsspec.callbacks.Callback`` (e.g.
``TqdmCallback``) with ``absolute_update``; drawing happens in that thread, never in a
request's path.
"""

from __future__ import annotations

import threading
from types import TracebackType

from fsspec.callbacks import Callback

from storeprobe.transfer import Meter

__all__ = ["MAX_UPDATES_PER_S", "Pump"]

#: most progress updates per second
MAX_UPDATES_PER_S = 10.0


class Pump:
    """Feeds ``callback`` from ``meter`` from its own thread while in a ``with`` block."""

    def __init__(self, meter: Meter, callback: Callback, rate: float = MAX_UPDATES_PER_S) -> None:
        self.meter = meter
        self.callback = callback
        self.period = 1.0 / rate
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="storeprobe-progress", daemon=True)

    def _loop(self) -> None:
        shown = -1
        while not self._stop.wait(self.period):
            done = self.meter.done
            if done != shown:
                self.callback.absolute_update(done)
                shown = done

    def __enter__(self) -> Pump:
        self.callback.set_size(self.meter.total)
        self.callback.absolute_update(0)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.callback.absolute_update(self.meter.done)
