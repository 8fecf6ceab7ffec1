"""storeprobe.verification: bytes read back compared with the payload regenerated from
(seed, index), sizes a HEAD reports, and the memory a workload needs; each error names
the object, the byte or the size, and what to do."""

from __future__ import annotations

import re

import numpy as np
import pytest

from storeprobe import Workload
from storeprobe.errors import ConfigurationError
from storeprobe.request import Kind, Outcome, Request
from storeprobe.staging import Staging
from storeprobe.verification import (
    VerificationError,
    available_memory,
    check_memory,
    check_sizes,
    prefaulted,
    verify_outcomes,
    verify_staged,
)

WORKLOAD = Workload(count=3, size="8KiB", seed=21)
NAMES = {f"run/{index}": index for index in range(3)}


def _gets() -> tuple[list[Request], list[Outcome]]:
    """Whole reads of every object, each outcome holding its true bytes."""
    requests = [Request(kind=Kind.GET, key=name) for name in NAMES]
    outcomes = [Outcome(data=WORKLOAD.payload_bytes(index)) for index in NAMES.values()]
    return requests, outcomes


def test_a_verification_error_is_an_os_error() -> None:
    assert issubclass(VerificationError, OSError)


def test_bytes_read_back_intact_pass() -> None:
    requests, outcomes = _gets()
    verify_outcomes(WORKLOAD, requests, outcomes, NAMES)


def test_ranges_of_one_object_are_checked_at_their_offsets() -> None:
    size = WORKLOAD.size_of(0)
    starts = range(0, size, 2048)
    requests = [Request(kind=Kind.GET, key="run/0", start=s, stop=s + 2048) for s in starts]
    outcomes = [Outcome(data=WORKLOAD.payload_bytes(0, s, s + 2048)) for s in starts]
    verify_outcomes(WORKLOAD, requests, outcomes, {"run/0": 0})
    # the same bytes at the wrong offsets differ
    with pytest.raises(VerificationError, match="object 0 differs from what was written"):
        verify_outcomes(WORKLOAD, requests, outcomes[::-1], {"run/0": 0})


def test_a_changed_byte_is_named_by_object_and_position() -> None:
    requests, outcomes = _gets()
    bad = bytearray(WORKLOAD.payload_bytes(1))
    bad[4321] ^= 1
    outcomes[1] = Outcome(data=bytes(bad))
    with pytest.raises(
        VerificationError,
        match="verification failed: object 1 differs from what was written at byte 4321",
    ):
        verify_outcomes(WORKLOAD, requests, outcomes, NAMES)


def test_a_short_read_is_named_with_both_lengths() -> None:
    requests, outcomes = _gets()
    outcomes[2] = Outcome(data=WORKLOAD.payload_bytes(2, 0, 8000))
    with pytest.raises(
        VerificationError,
        match="verification failed: object 2 read back 8000 bytes, wrote 8192",
    ):
        verify_outcomes(WORKLOAD, requests, outcomes, NAMES)


def test_a_read_that_returned_no_data_is_named() -> None:
    requests, outcomes = _gets()
    outcomes[0] = Outcome()
    with pytest.raises(VerificationError, match="object 0: no data was returned for offset 0"):
        verify_outcomes(WORKLOAD, requests, outcomes, NAMES)


def test_a_staged_object_is_checked_byte_for_byte() -> None:
    workload = Workload(count=1, size="3MiB", seed=8)  # more than one 1 MiB read
    staging = Staging.of_payload(workload, 0)
    try:
        verify_staged(workload, staging)
        staging.write(2 * 2**20 + 5, b"\x00" if workload.payload_bytes(0)[2**21 + 5] else b"\x01")
        with pytest.raises(
            VerificationError, match=f"object 0 differs from what was written at byte {2**21 + 5}"
        ):
            verify_staged(workload, staging)
    finally:
        staging.close()


def test_check_sizes_names_the_key_that_holds_the_wrong_size() -> None:
    requests = [Request(kind=Kind.HEAD, key=name) for name in NAMES]
    check_sizes(requests, [Outcome(size=8192)] * 3, 8192)
    check_sizes(requests[:2], [Outcome(size=10), Outcome(size=20)], [10, 20])
    with pytest.raises(
        VerificationError,
        match=re.escape(
            "run/1 holds 100 bytes after the setup upload, expected 8192: the storage did not "
            "keep what was written"
        ),
    ):
        check_sizes(requests, [Outcome(size=8192), Outcome(size=100), Outcome(size=8192)], 8192)


def test_check_memory_refuses_a_workload_that_needs_most_of_the_memory() -> None:
    available = available_memory()
    assert available is not None  # Linux: MemAvailable
    assert available > 0
    check_memory(WORKLOAD, 1024, "one repeat's payload")
    with pytest.raises(ConfigurationError) as refused:
        check_memory(WORKLOAD, available, "one repeat's payload")
    message = str(refused.value)
    assert WORKLOAD.describe() in message
    assert "(the probe holds one repeat's payload)" in message
    assert "use fewer or smaller objects, or more streams" in message


def test_prefaulted_is_a_zeroed_buffer_of_the_size_asked() -> None:
    for size in (0, 100, 3 * 4096 + 1):
        buffer = prefaulted(size)
        assert len(buffer) == size
        assert not np.frombuffer(buffer, np.uint8).any()
