from __future__ import annotations

from pathlib import Path

import pytest


def test_rate_bar_shows_the_windows_own_rate_in_1024_units() -> None:
    """Each repeat's window restarts the rate; sizes and rates are KiB/MiB, never MB."""
    import io

    from storeprobe.progress import RateBar

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
    execute = session_module.execute

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
