"""storeprobe.progress: the Pump that tells a callback what the engine's meter holds,
from its own thread, and the RateBar the CLI draws (1024-based, the window's own rate)."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import pytest
from fsspec.callbacks import Callback

from storeprobe.progress import Pump, RateBar
from storeprobe.transfer import Meter


def test_rate_bar_shows_the_windows_own_rate_in_1024_units() -> None:
    """Each repeat's window restarts the rate; sizes and rates are KiB/MiB, never MB."""
    now = [0.0]
    out = io.StringIO()
    bar = RateBar(file=out, clock=lambda: now[0], mininterval=0)
    bar.start("upload large")
    for repeat in range(2):
        now[0] += 30.0  # untimed work between repeats (payload, verification): not counted
        bar.set_size(1150 * 2**20)
        now[0] += 0.5
        bar.absolute_update(575 * 2**20)
        assert bar.rate_text == "1.123 GiB/s", repeat
        now[0] += 0.5
        bar.absolute_update(1150 * 2**20)
        assert bar.rate_text == "1.123 GiB/s", repeat
        now[0] += 0.1  # the pump's last, unchanged update moves no clock
        bar.absolute_update(1150 * 2**20)
        assert bar.rate_text == "1.123 GiB/s", repeat
    bar.close()
    drawn = out.getvalue()
    assert "1.123 GiB/s" in drawn
    assert "1.12 GiB" in drawn  # 1150 MiB, 1024-based
    assert "MB" not in drawn
    assert "upload large" in drawn


class _Told(Callback):  # type: ignore[misc]  # fsspec ships no type hints
    """Records every size and value a callback is told, and when a value arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []
        self.values: list[int] = []
        self.arrived = threading.Condition()

    def set_size(self, size: int) -> None:
        self.sizes.append(size)
        super().set_size(size)

    def absolute_update(self, value: int) -> None:
        with self.arrived:
            self.values.append(value)
            self.arrived.notify_all()
        super().absolute_update(value)

    def wait_for(self, value: int) -> bool:
        with self.arrived:
            return self.arrived.wait_for(lambda: value in self.values, timeout=10)


def test_the_pump_tells_the_size_then_zero_then_the_meter_as_it_moves() -> None:
    meter = Meter()
    meter.reset(3000)
    told = _Told()
    with Pump(meter, told, rate=200.0):
        assert told.sizes == [3000]
        assert told.values[:1] == [0]
        meter.done = 1000  # what the engine adds inside the window
        assert told.wait_for(1000)
        meter.done = 2500
        assert told.wait_for(2500)
        meter.done = 3000
    # the last update is the meter's final figure, told once the block ends
    assert told.values[-1] == 3000
    assert told.values == sorted(told.values)  # progress never goes back


def test_the_pump_does_not_redraw_a_meter_that_has_not_moved() -> None:
    meter = Meter()
    meter.reset(10)
    told = _Told()
    with Pump(meter, told, rate=200.0):
        meter.done = 5
        assert told.wait_for(5)
        time.sleep(0.2)  # about 40 periods with the meter standing still
        standing = told.values.count(5)
    assert standing == 1
    assert told.values[-1] == 5  # and the closing update


def test_the_pump_stops_its_thread_when_the_block_ends_even_on_an_error() -> None:
    meter = Meter()
    meter.reset(10)
    told = _Told()

    def failing_window() -> None:
        with Pump(meter, told, rate=200.0):
            meter.done = 7
            raise RuntimeError("window failed")

    with pytest.raises(RuntimeError, match="window failed"):
        failing_window()
    assert told.values[-1] == 7
    count = len(told.values)
    meter.done = 9
    time.sleep(0.05)
    assert len(told.values) == count  # nothing is told after the block


def test_the_rate_bar_shows_no_rate_before_its_first_bytes() -> None:
    out = io.StringIO()
    bar = RateBar(file=out, clock=lambda: 0.0, mininterval=0)
    bar.start("download small")
    bar.set_size(2**20)
    assert bar.rate_text == "- MiB/s"
    bar.close()
    assert "download small, 0 B/1.00 MiB, - MiB/s" in out.getvalue()


def test_the_rate_bar_driven_by_a_pump_ends_at_every_byte() -> None:
    now = [0.0]
    out = io.StringIO()
    bar = RateBar(file=out, clock=lambda: now[0], mininterval=0)
    bar.start("upload small")
    meter = Meter()
    meter.reset(4 * 2**20)
    with Pump(meter, bar, rate=200.0):
        now[0] = 2.0
        meter.done = 4 * 2**20
    assert bar.rate_text == "2.000 MiB/s"  # 4 MiB in the 2 s since the window began
    bar.close()
    drawn = out.getvalue()
    assert "4.00 MiB/4.00 MiB, 2.000 MiB/s" in drawn
    assert "upload small" in drawn


def test_scenario_progress_never_draws_inside_a_timed_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every step of a backup scenario shows progress (its start, each window's bytes once
    it closed, the bytes chunked), and none of it is drawn while a window is open: the
    engine's calls are wrapped to record when each window opens and closes, beside the
    progress events, and a real StepBar draws into a buffer at every event."""
    import io

    import storeprobe.backup.session as session_module
    from storeprobe import Image, Probe
    from storeprobe.progress import StepBar

    events: list[str] = []
    from storeprobe.execution import execute  # what the session calls

    def recorded(*args: object, **kwargs: object) -> object:
        events.append("open")
        try:
            return execute(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            events.append("close")

    monkeypatch.setattr(session_module, "execute", recorded)
    out = io.StringIO()

    class Recording(StepBar):
        def start(self, description: str) -> None:
            events.append(f"start {description}")
            super().start(description)

        def _draw(self) -> None:
            events.append("draw")
            super()._draw()

    image = Image.create("2MiB", block_size="64KiB", seed=3)
    (tmp_path / "disk").mkdir()
    results = Probe.from_url(str(tmp_path / "disk")).backup_restore(
        image,
        versions=2,
        method="chunks",
        chunk_size="256KiB",
        progress=Recording(file=out, mininterval=0),
    )
    assert all(r.ok for r in results), [r.errors for r in results]
    starts = [e for e in events if e.startswith("start")]
    assert starts == ["start backup 1 (chunks)", "start backup 2 (chunks)",
                      "start restore 1 (chunks)", "start restore 2 (chunks)"]  # fmt: skip
    assert events.count("open") == events.count("close") > 4
    inside = False
    for event in events:
        if event == "open":
            inside = True
        elif event == "close":
            inside = False
        else:
            assert not inside, f"{event} while a window was open"
    assert events.count("draw") > events.count("open")  # a draw after every window
    drawn = out.getvalue()
    assert "moved in" in drawn
    assert "chunked" in drawn
