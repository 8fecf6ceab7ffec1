"""Subject: the unit of a Result's figure, decided in one place and read by every renderer."""

from __future__ import annotations

import ast
from pathlib import Path

import attrs
import pytest

from storeprobe import Environment, Result, Sample, Step, Workload
from storeprobe.subject import PER_OPERATION, Subject, Unit

PACKAGE = Path(__file__).parent.parent / "storeprobe"


def _result(operation: str, workload: Workload, *elapsed_ns: int) -> Result:
    return Result(
        operation=operation,  # type: ignore[arg-type]
        workload=workload,
        url="memory://bench",
        protocol="memory",
        backend="memory",
        streams=1,
        effective_streams=1,
        strategy="objects",
        samples=[
            Sample(nbytes=workload.total_bytes, elapsed_ns=ns, latencies_ns=[1])
            for ns in elapsed_ns
        ],
        environment=Environment(hostname="h", cpu_count=2, platform="p", python="3.11"),
    )


def test_a_transfer_counts_bytes_per_second() -> None:
    result = _result("download", Workload.small(), 2_000_000_000, 1_000_000_000)
    subject = result.subject
    assert subject == Subject(
        unit=Unit.BYTES_PER_S,
        operations=256,
        shape="256 × 16 KiB",
        description="small (256 × 16 KiB)",
        object_size=16 * 1024,
    )
    assert [subject.rate(s) for s in result.samples] == [s.bytes_per_s for s in result.samples]
    assert subject.rate_unit is Unit.BYTES_PER_S


@pytest.mark.parametrize("operation", PER_OPERATION)
def test_a_metadata_probe_counts_operations_per_second(operation: str) -> None:
    # a metadata workload's own name keeps its empty objects' 0 B
    result = _result(operation, Workload(count=16, size=1, name="16 × 0 B"), 500_000_000)
    subject = result.subject
    assert subject.unit is Unit.OPERATIONS_PER_S
    assert subject.per_operation
    assert (subject.shape, subject.description) == ("16 × 0 B", "16 × 0 B")
    assert subject.rate(result.samples[0]) == 32.0  # 16 operations in 0.5 s
    assert subject.rate(Sample(nbytes=0, elapsed_ns=0, latencies_ns=[1])) == float("inf")


def test_a_scenario_step_is_told_in_seconds_and_ranked_by_its_bytes() -> None:
    step = Step(
        scenario="backup-restore",
        method="files",
        kind="backup",
        number=1,
        version=0,
        dataset="tree v0",
        dataset_bytes=4096,
        changed_bytes=4096,
        moved_bytes=4096,
        incremental=False,
    )
    plain = _result("backup", Workload(count=4, size=1024, name="tree v0"), 1_000_000_000)
    result = attrs.evolve(plain, step=step)
    assert result.subject.unit is Unit.SECONDS_PER_STEP
    assert result.subject.rate_unit is Unit.BYTES_PER_S
    assert result.subject.rate(result.samples[0]) == 4096.0


_SHOWN = ("render", "plot.py", "comparison.py", "html_report.py")


def _literals(path: Path) -> set[str]:
    return {
        node.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_renderers_plots_and_comparisons_never_name_metadata_operations() -> None:
    # what a figure counts is the subject's to say: no renderer tests for "head"...
    for name in _SHOWN:
        target = PACKAGE / name
        for path in sorted(target.rglob("*.py")) if target.is_dir() else [target]:
            named = _literals(path) & set(PER_OPERATION)
            assert not named, f"{path.name} tests operation names {named}: ask result.subject"
            used = {
                node.id
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Name)
            } | {
                node.attr
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Attribute)
            }
            assert "PER_OPERATION" not in used, f"{path.name} branches on PER_OPERATION"
