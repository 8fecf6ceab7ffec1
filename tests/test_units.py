from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storeprobe import UnitError, format_rate, format_size, parse_size
from storeprobe.render import rate
from storeprobe.units import (
    GiB,
    KiB,
    auto_rate_unit,
    kib_per_s,
    mib_per_s,
    mibit_per_s,
    significant,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16KiB", 16 * 1024),
        ("256MiB", 256 * 1024**2),
        ("2GiB", 2 * 1024**3),
        ("1TiB", 1024**4),
        ("16kB", 16_000),
        ("5MB", 5_000_000),
        ("3GB", 3_000_000_000),
        ("1TB", 10**12),
        ("4096", 4096),
        ("7B", 7),
        (4096, 4096),
    ],
)
def test_parse_size_exact(text: str | int, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("16 KB", "cannot parse"),
        ("16KB", "ambiguous"),
        ("16K", "ambiguous"),
        ("16kb", "ambiguous"),
        ("1.5MiB", "cannot parse"),
        ("MiB", "cannot parse"),
        ("", "cannot parse"),
        ("-5MiB", "cannot parse"),
        ("16 KiB", "cannot parse"),
        ("16Kib", "unknown unit"),
        ("16XiB", "unknown unit"),
    ],
)
def test_parse_size_rejects(text: str, fragment: str) -> None:
    with pytest.raises(UnitError, match=fragment) as info:
        parse_size(text)
    assert isinstance(info.value, ValueError)


def test_parse_size_rejects_non_int_types() -> None:
    with pytest.raises(UnitError):
        parse_size(True)
    with pytest.raises(UnitError):
        parse_size(1.5)  # type: ignore[arg-type]


@given(
    st.integers(min_value=0, max_value=2**40),
    st.sampled_from(["B", "KiB", "MiB", "GiB", "kB", "MB", "GB"]),
)
def test_parse_size_roundtrip(number: int, unit: str) -> None:
    factor = {
        "B": 1,
        "KiB": 1024,
        "MiB": 1024**2,
        "GiB": 1024**3,
        "kB": 1000,
        "MB": 10**6,
        "GB": 10**9,
    }
    assert parse_size(f"{number}{unit}") == number * factor[unit]


@given(st.integers(min_value=1, max_value=2**50))
def test_format_size_is_exact(nbytes: int) -> None:
    number, unit = format_size(nbytes).split()
    factor = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}[unit]
    assert int(number) * factor == nbytes


def test_rates_are_1024_based() -> None:
    assert kib_per_s(1024) == 1.0
    assert mib_per_s(1024**2) == 1.0
    assert mibit_per_s(1024**2) == 8.0
    assert format_rate(1024 * 803.05) == "803.05 KiB/s"
    assert format_rate(3 * 1024**2) == "3.00 MiB/s"
    assert format_rate(1024**2, "Mibit/s") == "8.00 Mibit/s"
    with pytest.raises(UnitError):
        format_rate(1.0, "MB/s")


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (264140.09, "264140"),
        (1150.4, "1150"),
        (257.94, "257.9"),
        (25.794, "25.79"),
        (2.5794, "2.579"),
        (0.25794, "0.258"),
        (0.0025794, "0.00258"),
        (0.0, "0"),
    ],
)
def test_significant_shows_3_to_4_digits(value: float, shown: str) -> None:
    assert significant(value) == shown


def test_auto_rate_unit_reaches_gib() -> None:
    assert auto_rate_unit(264140.09 * KiB) == "MiB/s"
    assert auto_rate_unit(3 * GiB) == "GiB/s"
    assert format_rate(3 * GiB) == "3.00 GiB/s"
    assert rate(264140.09 * KiB) == "257.9 MiB/s"
