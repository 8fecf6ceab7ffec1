"""Small helpers shared by the tests: an injectable clock and a directory snapshot."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

__all__ = ["StepClock", "tree"]


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
