"""Small helpers shared by the tests: an injectable clock, a directory snapshot, seeds
whose payloads gcp-storage-emulator keeps intact, and child processes that take Ctrl-C."""

from __future__ import annotations

import contextlib
import hashlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from storeprobe import Result, Workload

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.patches import Rectangle

__all__ = ["StepClock", "bars", "gcs_emulator_seed", "interruptible_children", "tree"]


def payload(result: Result) -> Workload:
    """The workload a seed probe's Result moved: a seed probe (upload, download) always
    records one; other Results (metadata, steps, aggregates) have none."""
    assert result.workload is not None, f"{result.probe} records no workload"
    return result.workload


class StepClock:
    """A nanosecond clock that advances ``step`` each time it is read (thread-safe)."""

    def __init__(self, step: int = 10) -> None:
        self.now = 0
        self.step = step
        self.lock = threading.Lock()

    def __call__(self) -> int:
        with self.lock:
            self.now += self.step
            return self.now


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root``: relative path → SHA-256 of its bytes."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def bars(axes: Axes) -> list[Rectangle]:
    """The bars of a bar chart on ``axes``: its patches, each checked to be a Rectangle."""
    from matplotlib.patches import Rectangle

    drawn = list(axes.patches)
    assert all(isinstance(patch, Rectangle) for patch in drawn), drawn
    return [patch for patch in drawn if isinstance(patch, Rectangle)]


def _ends(size: int, part_size: int) -> list[int]:
    step = part_size or size
    return [*range(step, size, step), size]


def gcs_emulator_seed(*cuts: tuple[Workload, int], repeats: int = 2) -> int:
    """A seed whose payloads gcp-storage-emulator stores intact: none of the bodies it
    receives (each object, or each part of ``part_size`` bytes: ``cuts`` are
    ``(workload, part_size)``, ``part_size`` 0 for whole objects) ends with a byte
    ``\\r``. The emulator drops a trailing ``\\r`` from a simple upload's body (seen with
    gcp-storage-emulator 2026.7.19), so 1 object in 256 of random bytes comes back one
    byte short. A probe with ``seed=`` this value uses seeds ``seed`` ... ``seed +
    repeats - 1`` for its repeats."""
    for seed in range(1, 10_000):
        if all(
            workload.with_seed(seed + repeat).payload_bytes(index, end - 1, end) != b"\r"
            for workload, part_size in cuts
            for repeat in range(repeats)
            for index in range(workload.count)
            for end in _ends(workload.size, part_size)
        ):
            return seed
    raise AssertionError("no seed found")


@contextlib.contextmanager
def interruptible_children() -> Iterator[None]:
    """Processes started inside take SIGINT as Ctrl-C, however this one was started.

    A shell without job control (a script, ``.ci/run &``, a tool running ``cmd &``)
    starts a background job with SIGINT ignored, and an ignored signal stays ignored
    across ``fork`` and ``exec``: the suite's children then start with it ignored too,
    Python installs no KeyboardInterrupt handler in them (it keeps an inherited
    ``SIG_IGN``, as programs should), and a test's SIGINT is dropped while the child's
    run goes on. A signal this process *handles* is reset to its default by ``exec``,
    so while SIGINT is ignored here it is handled (``default_int_handler``) for the
    duration of the block: a child started inside begins with SIGINT at its default,
    as under an interactive shell. Main thread only (``signal.signal``).
    """
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
