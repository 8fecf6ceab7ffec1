"""Progress drawn off the timed path.

Inside the timed window the engine only adds each request's bytes to a
:class:`~storeprobe.transfer.Meter` (one integer add). A :class:`Pump` thread reads the
meter at most ``rate`` times a second and tells an ``fsspec.callbacks.Callback`` (e.g.
``TqdmCallback``) with ``absolute_update``; drawing happens in that thread, never in a
request's path.

:class:`RateBar` is the bar the CLI draws: 1024-based sizes (``MiB``, not tqdm's
``MB``) and the probe's own rate, the bytes of the current window ÷ the time since it
began. tqdm's own rate is smoothed over the bar's whole life, across every repeat and
the untimed work between them (payload generation, verification, cleanup) and it counts
each repeat's restart from 0 as bytes going back: a 1150 MiB/s probe read 390 "MB/s".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import IO, Any

from fsspec.callbacks import Callback

from storeprobe.transfer import Meter
from storeprobe.units import auto_rate_unit, format_bytes, rate_in, significant

__all__ = ["MAX_UPDATES_PER_S", "Pump", "RateBar", "StepBar"]

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


class RateBar(Callback):  # type: ignore[misc]  # fsspec ships no type hints
    """A tqdm bar per measurement, in 1024-based units, showing the window's own rate.

    ``set_size`` starts a window (the :class:`Pump` calls it as each repeat begins);
    each update draws ``done / total`` and ``done ÷ (last change − window start)`` with
    the ``clock`` (seconds, ``time.monotonic`` by default). :meth:`start` names the next
    bar; :meth:`close` ends the current one.
    """

    def __init__(
        self,
        file: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        mininterval: float = 0.1,
    ) -> None:
        super().__init__()
        self.description = ""
        self.file = file
        self.clock = clock
        self.mininterval = mininterval
        self.bar: Any = None
        self._start = 0.0
        self._changed = 0.0
        self._done = 0

    def start(self, description: str) -> None:
        """Close the current bar; the next window opens one named ``description``."""
        self.close()
        self.description = description

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    @property
    def rate_text(self) -> str:
        """``"1150 MiB/s"``: the current window's bytes ÷ its time so far."""
        seconds = self._changed - self._start
        if seconds <= 0 or not self._done:
            return "- MiB/s"
        rate = self._done / seconds
        unit = auto_rate_unit(rate)
        return f"{significant(rate_in(rate, unit))} {unit}"

    def set_size(self, size: int) -> None:
        from tqdm import tqdm

        self.size = size
        self._start = self._changed = self.clock()
        self._done = 0
        if self.bar is None:
            self.bar = tqdm(
                total=size,
                desc=self.description,
                file=self.file,
                leave=False,
                mininterval=self.mininterval,
                bar_format="{desc}{postfix} {percentage:3.0f}%|{bar}|",
            )
        else:
            self.bar.reset(total=size)
        self._draw()

    def _draw(self) -> None:
        total = format_bytes(self.size or 0)
        self.bar.set_postfix_str(
            f"{format_bytes(self._done)}/{total}, {self.rate_text}", refresh=False
        )
        self.bar.n = self._done
        self.bar.refresh()

    def call(self, *args: Any, **kwargs: Any) -> None:
        if self.bar is None or self.value == self._done:
            return
        self._done = int(self.value)
        self._changed = self.clock()
        self._draw()


class StepBar:
    """A scenario's progress: one tqdm bar per backup or restore step, drawn only between
    its timed windows (the scenario calls it before or after a window, never from inside
    one, and no thread draws beside it).

    It shows the bytes the step's windows moved so far (told after each window) and the
    untimed work done for it (told as it goes: chunking and hashing a version's files,
    making bodies), each in 1024-based units. :meth:`start` opens the bar of a step;
    :meth:`close` ends it.
    """

    def __init__(self, file: IO[str] | None = None, mininterval: float = 0.1) -> None:
        self.file = file
        self.mininterval = mininterval
        self.bar: Any = None
        self.moved = 0
        self.windows = 0
        self.worked: dict[str, int] = {}

    def start(self, description: str) -> None:
        """Close the current bar and open one for the step ``description``."""
        from tqdm import tqdm

        self.close()
        self.moved, self.windows, self.worked = 0, 0, {}
        self.bar = tqdm(
            desc=description,
            file=self.file,
            leave=False,
            mininterval=self.mininterval,
            bar_format="{desc}: {postfix} [{elapsed}]",
        )
        self._draw()

    def window(self, moved: int) -> None:
        """A timed window has closed, having moved ``moved`` bytes (sent + received)."""
        self.moved += moved
        self.windows += 1
        self._draw()

    def work(self, what: str, done: int) -> None:
        """``done`` more bytes of untimed work ``what`` (e.g. ``"chunked"``)."""
        self.worked[what] = self.worked.get(what, 0) + done
        self._draw()

    def _draw(self) -> None:
        if self.bar is None:
            return
        parts = [f"{format_bytes(self.moved)} moved in {self.windows} windows"]
        parts += [f"{format_bytes(n)} {what}" for what, n in self.worked.items()]
        self.bar.set_postfix_str(", ".join(parts), refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        """End the current bar (it is cleared: the final table follows)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
