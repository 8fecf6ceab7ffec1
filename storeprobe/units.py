"""Units: the one place that parses sizes and formats sizes and rates.

Sizes are parsed strictly. Binary units are powers of 1024 (``KiB``, ``MiB``, ``GiB``,
``TiB``), decimal units powers of 1000 (``kB``, ``MB``, ``GB``, ``TB``). ``KB``, ``K``,
``M``, fractions and spaces are refused, because people mean different things by them.

Rates are always reported in 1024-based units: KiB/s = B/s ÷ 1024, MiB/s = B/s ÷ 1024²,
Mibit/s = 8 · B/s ÷ 1024².
"""

from __future__ import annotations

import re

from storeprobe.errors import UnitError

__all__ = [
    "RATE_CONVERTERS",
    "GiB",
    "KiB",
    "MiB",
    "auto_rate_unit",
    "format_bytes",
    "format_rate",
    "format_size",
    "gib_per_s",
    "kib_per_s",
    "mib_per_s",
    "mibit_per_s",
    "parse_size",
    "rate_in",
    "significant",
]

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4

_MULTIPLIERS: dict[str, int] = {
    "": 1,
    "B": 1,
    "KiB": KiB,
    "MiB": MiB,
    "GiB": GiB,
    "TiB": TiB,
    "kB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
}
_SIZE = re.compile(r"(?P<number>[0-9]+)(?P<unit>[A-Za-z]*)")


def parse_size(text: str | int) -> int:
    """Return the number of bytes in ``text`` (``"16KiB"`` → 16384, ``"16kB"`` → 16000).

    An ``int`` is taken as bytes. Raises :class:`UnitError` for anything malformed or
    ambiguous, with the accepted forms in the message.
    """
    if isinstance(text, bool):
        raise UnitError(f"size must be an int of bytes or a string like '16KiB', not {text!r}")
    if isinstance(text, int):
        return text
    if not isinstance(text, str):
        raise UnitError(
            f"size must be an int of bytes or a string like '16KiB', not {type(text).__name__}"
        )
    match = _SIZE.fullmatch(text)
    hint = (
        "write an integer and a unit with no space: B, KiB, MiB, GiB, TiB (1024-based) "
        "or kB, MB, GB, TB (1000-based), e.g. '16KiB' or '256MiB'"
    )
    if match is None:
        raise UnitError(f"cannot parse size {text!r}: {hint}")
    unit = match["unit"]
    if unit not in _MULTIPLIERS:
        if unit.upper() in {"K", "KB", "M", "G", "T"} or unit.lower() in {"kb", "mb", "gb", "tb"}:
            raise UnitError(
                f"size {text!r} is ambiguous: say 'KiB'/'MiB'/'GiB' for 1024-based "
                f"or 'kB'/'MB'/'GB' for 1000-based units"
            )
        raise UnitError(f"unknown unit {unit!r} in size {text!r}: {hint}")
    return int(match["number"]) * _MULTIPLIERS[unit]


def kib_per_s(bytes_per_s: float) -> float:
    """Convert bytes per second to KiB/s (÷ 1024)."""
    return bytes_per_s / KiB


def mib_per_s(bytes_per_s: float) -> float:
    """Convert bytes per second to MiB/s (÷ 1024²)."""
    return bytes_per_s / MiB


def mibit_per_s(bytes_per_s: float) -> float:
    """Convert bytes per second to Mibit/s (8 · B/s ÷ 1024²)."""
    return 8 * bytes_per_s / MiB


def gib_per_s(bytes_per_s: float) -> float:
    """Convert bytes per second to GiB/s (÷ 1024³)."""
    return bytes_per_s / GiB


def significant(value: float) -> str:
    """A figure with 3 to 4 significant digits, never in exponent form.

    ``264140.09`` → ``"264140"``, ``1150.4`` → ``"1150"``, ``257.94`` → ``"257.9"``,
    ``25.794`` → ``"25.79"``, ``2.5794`` → ``"2.579"``, ``0.25794`` → ``"0.258"``.
    """
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    size = abs(value)
    if size >= 1000:
        return f"{value:.0f}"
    if size >= 100:
        return f"{value:.1f}"
    if size >= 10:
        return f"{value:.2f}"
    if size >= 1 or size == 0:
        return f"{value:.3f}" if size else "0"
    digits = 2
    while size * 10 ** (digits + 1) < 100 and digits < 12:
        digits += 1
    return f"{value:.{digits + 1}f}"


def format_bytes(nbytes: float) -> str:
    """A byte count to two decimals in the largest binary unit it reaches:
    ``4219053`` → ``"4.02 MiB"``, ``512`` → ``"512 B"``."""
    for unit, factor in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(nbytes) >= factor:
            return f"{nbytes / factor:.2f} {unit}"
    return f"{nbytes:.0f} B"


def format_size(nbytes: int) -> str:
    """Format a byte count exactly when it is a whole number of a binary unit.

    ``16384`` → ``"16 KiB"``, ``268435456`` → ``"256 MiB"``, ``1000`` → ``"1000 B"``.
    """
    for unit, factor in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor} {unit}"
    return f"{nbytes} B"


#: the 1024-based rate units, each with its converter from B/s
RATE_CONVERTERS = {
    "KiB/s": kib_per_s,
    "MiB/s": mib_per_s,
    "GiB/s": gib_per_s,
    "Mibit/s": mibit_per_s,
}


def rate_in(bytes_per_s: float, unit: str) -> float:
    """``bytes_per_s`` (B/s) in ``unit``: ``"KiB/s"``, ``"MiB/s"``, ``"GiB/s"`` or ``"Mibit/s"``."""
    if unit not in RATE_CONVERTERS:
        raise UnitError(f"unknown rate unit {unit!r}: use one of {', '.join(RATE_CONVERTERS)}")
    return RATE_CONVERTERS[unit](bytes_per_s)


def auto_rate_unit(bytes_per_s: float) -> str:
    """The unit a rate reads best in: GiB/s from 1 GiB/s up, MiB/s from 1 MiB/s up,
    otherwise KiB/s (so the figure has at most 4 digits before the point)."""
    if bytes_per_s >= GiB:
        return "GiB/s"
    return "MiB/s" if bytes_per_s >= MiB else "KiB/s"


def format_rate(bytes_per_s: float, unit: str = "auto") -> str:
    """Format a rate with two decimals in a 1024-based unit.

    ``unit`` is ``"KiB/s"``, ``"MiB/s"``, ``"Mibit/s"`` or ``"auto"`` (MiB/s from 1 MiB/s up,
    otherwise KiB/s).
    """
    if unit == "auto":
        unit = auto_rate_unit(bytes_per_s)
    return f"{rate_in(bytes_per_s, unit):.2f} {unit}"
