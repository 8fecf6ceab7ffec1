"""Where the command line writes: output paths checked before any probe runs, and the
results file rewritten after every result.

:func:`check_output` refuses, before anything is measured, a path the command could not
write at the end: a missing or read-only directory, a directory where a file is meant,
an existing ``--json`` file that is not a storeprobe results document (it would be
refused only after the run, or worse, overwritten), a ``--plot`` suffix matplotlib cannot
write, an ``--html`` file not named ``.html``. :func:`save` writes results as each probe
finishes (the document is rewritten to a temporary name and renamed, so the file is
always whole), so an interrupt or a failing later target keeps what was measured.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from storeprobe.errors import ConfigurationError, ResultFormatError, StoreProbeError
from storeprobe.result import Result, load_results
from storeprobe.resultset import ResultSet

__all__ = ["OutputKind", "check_output", "save"]

#: what an output path receives: a results document (appended to), a chart, a report
OutputKind = Literal["results", "image", "html"]
_HTML_SUFFIXES = (".html", ".htm")


def check_output(path: Path, option: str, kind: OutputKind) -> None:
    """Raise :class:`ConfigurationError` (naming ``option``, the problem and the fix)
    unless ``path`` can be written as ``kind`` at the end of the command.

    The directory must exist and take a new file (tried, not guessed from permission
    bits, which root bypasses). An existing ``results`` file must be a storeprobe results
    document (the new results are added to it) or empty.
    """
    shown = f"{option} {str(path)!r}"
    if kind == "image":
        from storeprobe.plot import image_formats

        formats = image_formats()
        if path.suffix.lstrip(".").lower() not in formats:
            raise ConfigurationError(
                f"{shown}: a chart is saved as .png, .svg or .pdf (matplotlib writes "
                f"{', '.join(sorted(formats))}): name the file e.g. chart.png"
            )
    if kind == "html" and path.suffix.lower() not in _HTML_SUFFIXES:
        raise ConfigurationError(f"{shown}: the HTML report is named FILE.html, e.g. report.html")
    if path.is_dir():
        raise ConfigurationError(f"{shown} is a directory: give a file name in it")
    if path.exists() and not path.is_file():  # a device or a pipe (/dev/stdout): the
        # file is replaced whole at every save, which would replace the device's name
        raise ConfigurationError(f"{shown} is not a regular file: give a file name")
    folder = path.parent
    if not folder.is_dir():
        what = "is not a directory" if folder.exists() else "does not exist"
        raise ConfigurationError(
            f"{shown}: the directory {str(folder)!r} {what}: create it first "
            f"(mkdir -p {folder}) or write somewhere else"
        )
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{path.name}.", suffix=".check"):
            pass
        if path.exists():
            with path.open("ab"):  # opened, never written: a file we may not replace fails
                pass
    except OSError as exc:
        raise ConfigurationError(
            f"{shown}: cannot write there ({exc.strerror or exc}): choose a directory you "
            "can write to"
        ) from None
    if kind == "results" and path.is_file() and path.stat().st_size:
        try:
            load_results(path)
        except ResultFormatError as exc:
            raise ConfigurationError(
                f"{shown} already exists and the results cannot be added to it: {exc}. "
                "Give a new file name, or move that file away"
            ) from None


def save(results: Iterable[Result], path: Path, option: str = "--json") -> None:
    """Add ``results`` to the results file at ``path`` (its earlier results are kept),
    writing a temporary file and renaming it over ``path``; a write that fails (a full
    disk) is a :class:`StoreProbeError` naming the file."""
    try:
        ResultSet(results).save(path)
    except OSError as exc:
        raise StoreProbeError(
            f"cannot write {option} {str(path)!r} ({exc.strerror or exc}): the results "
            "measured so far are in the file as it was last written"
        ) from None
