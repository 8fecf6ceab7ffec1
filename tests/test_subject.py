"""Subject: what a Result's figure counts, stored in the Result by whoever made it, and
read by every renderer; documents of schema 3 and before get the subject their workload
implied."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from storeprobe import (
    Image,
    Probe,
    Result,
    ResultSet,
    Sample,
    Settings,
    Sizes,
    Tree,
    Workload,
    dump_results,
    load_results,
    render,
)
from storeprobe.backup.scenario import step_subject
from storeprobe.comparison import compare_results
from storeprobe.distributed import aggregate_result
from storeprobe.distributed.worker import Spec
from storeprobe.document import READABLE_VERSIONS, SCHEMA_VERSION, legacy_subject
from storeprobe.errors import ResultFormatError
from storeprobe.html_report import run_command
from storeprobe.metadata import METADATA_OPERATIONS
from storeprobe.subject import Subject, Unit
from storeprobe.units import format_size

PACKAGE = Path(__file__).parent.parent / "storeprobe"
FIXTURES = Path(__file__).parent / "fixtures"


def _memory(name: str) -> str:
    from fsspec.implementations.memory import MemoryFileSystem

    MemoryFileSystem.store.clear()
    return f"memory://{name}"


# -- who makes a Result makes its subject ------------------------------------------------------
def test_a_seed_probe_counts_the_bytes_of_its_workload() -> None:
    workload = Workload(count=4, size="1KiB", seed=1, name="tiny")
    result = Probe.from_url(_memory("subject"), repeats=2).upload(workload)
    assert result.subject == Subject.of(workload)
    assert result.subject == Subject(
        unit=Unit.BYTES_PER_S,
        operations=4,
        label="tiny",
        shape="4 × 1 KiB",
        description="tiny (4 × 1 KiB)",
        object_size=1024,
    )
    assert result.workload == workload  # the payload, its seed with it
    assert result.probe == "upload tiny"
    rates = [result.subject.rate(s) for s in result.samples]
    assert rates == [s.bytes_per_s for s in result.samples]
    assert result.subject.rate_unit is Unit.BYTES_PER_S


def test_drawn_sizes_are_named_by_their_distribution() -> None:
    workload = Workload(count=6, sizes=Sizes.lognormal("2KiB", 0.8), seed=4)
    subject = Subject.of(workload)
    assert (subject.shape, subject.label) == ("6 × lognormal(2 KiB, σ 0.8)",) * 2
    assert subject.object_size == 2048  # the median


@pytest.mark.parametrize("operation", METADATA_OPERATIONS)
def test_a_metadata_probe_of_empty_objects_counts_operations_of_0_bytes(operation: str) -> None:
    result = Probe.from_url(_memory("meta"), repeats=2).metadata(operation, count=16, size=0)  # type: ignore[arg-type]
    assert result.ok, result.errors
    assert result.subject == Subject(
        unit=Unit.OPERATIONS_PER_S,
        operations=16,
        label="16 × 0 B",
        shape="16 × 0 B",
        description="16 × 0 B",
        object_size=0,
    )
    assert result.workload is None  # no payload is timed
    assert result.subject.per_operation
    best = min(result.samples, key=lambda s: s.elapsed_ns)
    assert result.subject.rate(best) == 16 / best.seconds
    assert result.subject.rate(Sample(nbytes=0, elapsed_ns=0, latencies_ns=[1])) == float("inf")
    # the JSON document keeps the 0 B and the missing workload
    (loaded,) = load_results(result.to_json())
    assert loaded == result
    assert loaded.subject.object_size == 0
    assert json.loads(result.to_json())["results"][0]["workload"] is None
    assert f"{operation} 16 × 0 B" in ResultSet([loaded]).table()


def test_a_step_counts_seconds_of_the_versions_files() -> None:
    tree = Tree.generate(5, Sizes.lognormal("3KiB", 1.0), seed=1)
    results = Probe.from_url(_memory("steps"), streams=2).backup_restore(
        tree, versions=2, method="files"
    )
    assert [r.probe for r in results] == [
        "backup tree v0",
        "backup tree v1",
        "restore tree v0",
        "restore tree v1",
    ]
    versions = [tree, tree.evolve()]
    for result in results:
        assert result.step is not None
        assert result.ok, result.errors
        version = versions[result.step.version]
        mean = -(-version.total_bytes // len(version.files))
        assert result.subject == Subject(
            unit=Unit.SECONDS_PER_STEP,
            operations=len(version.files),
            label=f"tree v{version.version}",
            shape=f"5 × {format_size(mean)}",
            description=f"tree v{version.version} (5 × {format_size(mean)})",
            object_size=mean,
        )
        assert result.workload is None
        # ranked by its payload bytes per second; its tables tell its seconds
        assert result.subject.rate_unit is Unit.BYTES_PER_S
        assert result.subject.rate(result.samples[0]) == result.samples[0].bytes_per_s
    assert load_results(dump_results(results)) == list(results)


def test_an_image_step_and_empty_files_are_named_truly() -> None:
    image = Image.create("64KiB", block_size="16KiB", seed=2)
    assert step_subject(image) == Subject(
        unit=Unit.SECONDS_PER_STEP,
        operations=1,  # one file, disk.img
        label="image v0",
        shape="1 × 64 KiB",
        description="image v0 (1 × 64 KiB)",
        object_size=64 * 1024,
    )
    empty = Tree.generate(3, Sizes.fixed(0), seed=1)
    assert step_subject(empty) == Subject(
        unit=Unit.SECONDS_PER_STEP,
        operations=3,
        label="tree v0",
        shape="3 × 0 B",
        description="tree v0 (3 × 0 B)",
        object_size=0,
    )


def test_a_distributed_aggregate_counts_the_whole_fleet() -> None:
    # the real two-worker run is tests/test_distributed.py; here the subject's arithmetic
    each = Workload(count=1000, sizes=Sizes.lognormal("16KiB", 1.5), seed=9, name="tree")
    spec = Spec(operation="upload", workload=each, settings=Settings())
    subject = aggregate_result.fleet_subject(spec, 3)
    assert subject == Subject(
        unit=Unit.BYTES_PER_S,
        operations=3000,
        label="3 workers × tree",
        shape="3000 × lognormal(16 KiB, σ 1.5)",
        description="3 workers × tree (3000 × lognormal(16 KiB, σ 1.5))",
        object_size=16 * 1024,
    )


def test_a_subject_refuses_negative_counts() -> None:
    with pytest.raises(ValueError, match="operations"):
        Subject(
            unit=Unit.BYTES_PER_S,
            operations=-1,
            label="x",
            shape="x",
            description="x",
            object_size=1,
        )
    with pytest.raises(ValueError, match="object_size"):
        Subject(
            unit=Unit.BYTES_PER_S,
            operations=1,
            label="x",
            shape="x",
            description="x",
            object_size=-1,
        )


# -- documents -------------------------------------------------------------------------------
def test_schema_4_writes_the_subject_and_reads_every_version() -> None:
    assert SCHEMA_VERSION == 4
    assert READABLE_VERSIONS == (1, 2, 3, 4)
    result = Probe.from_url(_memory("doc"), repeats=1).upload(Workload(count=2, size=8, seed=3))
    record = json.loads(result.to_json())["results"][0]
    assert record["subject"] == {
        "unit": "bytes/s",
        "operations": 2,
        "label": "2 × 8 B",
        "shape": "2 × 8 B",
        "description": "2 × 8 B",
        "object_size": 8,
    }
    del record["subject"]  # a version-4 record must carry it
    document = json.dumps({"schema": "storeprobe.results", "version": 4, "results": [record]})
    with pytest.raises(ResultFormatError, match="subject"):
        load_results(document)


def _shown(results: list[Result]) -> dict[str, Any]:
    """What storeprobe shows of ``results``: made by this function on the schema-3 code
    (commit 6300d60) for tests/fixtures/results-v3-shown.json."""
    rs = ResultSet(results)
    steps = [r for r in results if r.step is not None]
    comparison = compare_results(results, results)
    return {
        "probes": [r.probe for r in results],
        "subjects": [
            {
                "unit": r.subject.unit.value,
                "operations": r.subject.operations,
                "shape": r.subject.shape,
                "description": r.subject.description,
                "object_size": r.subject.object_size,
            }
            for r in results
        ],
        "lines": [str(r) for r in results],
        "summaries": [r.summary("auto") for r in results],
        "reprs": [repr(r) for r in results],
        "rate_units": [r.rate_unit for r in results],
        "objects_per_s": [r.objects_per_s for r in results],
        "tables": {
            f"{by} {fmt} {unit}": rs.table(by=by, format=fmt, unit=unit)
            for by in ("environment", "probe")
            for fmt in ("markdown", "csv", "text", "html")
            for unit in ("workload", "auto", "MiB/s")
        },
        "summary": rs.summary(),
        "backup": render.render_tables(render.backup_tables(steps), "markdown"),
        "comparison": comparison.render(),
        "comparison_json": comparison.to_dict(),
        "filter_small": [r.probe for r in rs.filter(workload="4 × 1 KiB")],
    }


def test_a_schema_3_document_shows_what_it_showed() -> None:
    # written by the schema-3 code: seed probes, drawn sizes, metadata of 0 B and 2 KiB,
    # backup and restore steps, a two-worker Dask aggregate
    results = load_results(FIXTURES / "results-v3.json")
    expected = json.loads((FIXTURES / "results-v3-shown.json").read_text(encoding="utf-8"))
    # one figure is mended: the size of empty metadata objects, which a schema-3 workload
    # could not hold (it said 1 B, and its label "8 × 0 B"), is 0 B
    for shown, probe in zip(expected["subjects"], expected["probes"], strict=True):
        if probe in ("head 8 × 0 B", "list 8 × 0 B"):
            assert shown["object_size"] == 1
            shown["object_size"] = 0
    for row in expected["comparison_json"]["rows"]:
        if row["workload"] == "8 × 0 B":
            assert row["size"] == 1
            row["size"] = 0
    assert _shown(results) == expected


def test_a_schema_3_document_keeps_only_true_workloads() -> None:
    results = load_results(FIXTURES / "results-v3.json")
    seeds = [r for r in results if r.operation in ("upload", "download") and r.fleet is None]
    assert [r.probe for r in seeds] == [
        "upload 4 × 1 KiB",
        "download 4 × 1 KiB",
        "upload big",
        "upload drawn",
    ]
    assert [r.workload for r in seeds] == [
        Workload(count=4, size="1KiB", seed=0),
        Workload(count=4, size="1KiB", seed=0),
        Workload(count=2, size="1MiB", seed=3, name="big"),
        Workload(count=6, sizes=Sizes.lognormal("2KiB", 0.8), seed=4, name="drawn"),
    ]
    # metadata probes, steps and the aggregate had made-up workloads: dropped
    assert [r.probe for r in results if r.workload is None] == [
        "head 8 × 0 B",
        "list 8 × 0 B",
        "delete 4 × 2 KiB",
        "backup tree v0",
        "backup tree v1",
        "restore tree v0",
        "restore tree v1",
        "upload 2 workers × 3 × 4 KiB",
    ]
    (aggregate,) = [r for r in results if r.fleet is not None]
    assert aggregate.fleet is not None
    members = [m.result for m in aggregate.fleet.members]
    assert [m.subject.label if m else None for m in members] == ["3 × 4 KiB"] * 2
    assert all(m is not None and m.workload is not None for m in members)
    assert aggregate.subject.operations == 6
    # written again, the document is schema 4 and reads back the same
    assert load_results(dump_results(results)) == results


def test_legacy_subjects_follow_the_old_rule() -> None:
    metadata = Workload(count=8, size=1, seed=0, name="8 × 0 B")
    assert legacy_subject("head", metadata, step=False).object_size == 0
    one_byte = Workload(count=8, size=1, seed=0, name="8 × 1 B")
    assert legacy_subject("list", one_byte, step=False).object_size == 1
    assert legacy_subject("backup", Workload.small(), step=True).unit is Unit.SECONDS_PER_STEP
    assert legacy_subject("download", Workload.small(), step=False) == Subject.of(Workload.small())


# -- nobody else decides the unit -------------------------------------------------------------
_SHOWN = ("render", "plot.py", "comparison.py", "html_report.py", "resultset.py")


def _names(path: Path) -> tuple[set[str], set[str]]:
    tree = ast.parse(path.read_text())
    literals = {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} | {
        node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
    }
    return literals, used


def test_renderers_plots_and_comparisons_never_name_metadata_operations() -> None:
    # what a figure counts is the subject's to say: no renderer tests for "head"...
    for name in _SHOWN:
        target = PACKAGE / name
        for path in sorted(target.rglob("*.py")) if target.is_dir() else [target]:
            literals, used = _names(path)
            named = literals & set(METADATA_OPERATIONS)
            assert not named, f"{path.name} tests operation names {named}: ask result.subject"
            assert "LEGACY_PER_OPERATION" not in used, f"{path.name} branches on operations"


def test_a_schema_3_baseline_matches_a_new_run() -> None:
    # what `storeprobe compare old.json new.json` matches: probes of the same subject
    base = load_results(FIXTURES / "results-v3.json")
    probe = Probe.from_url(_memory("v3fixture"), repeats=2)
    new = [
        probe.metadata("head", count=8, size=0),
        probe.metadata("delete", count=4, size="2KiB"),
        probe.upload(Workload(count=4, size="1KiB")),
    ]
    report = compare_results(base, new)
    assert [row.identity.probe for row in report.rows] == [
        "upload 4 × 1 KiB",
        "head 8 × 0 B",
        "delete 4 × 2 KiB",
    ]
    assert [row.unit for row in report.rows] == ["B/s", "ops/s", "ops/s"]
    assert not report.unmatched_new


def test_the_run_command_rebuilds_the_seed_probes_only() -> None:
    # metadata probes, steps and the aggregate have no payload workload to rebuild; a
    # schema-3 document's made-up ones ("8x1B", "6x4KiB" for 2 workers × 3) are gone
    results = load_results(FIXTURES / "results-v3.json")
    assert run_command(results) == (
        "storeprobe run memory://v3fixture --streams 1 --workload 4x1KiB --workload 2x1MiB "
        "--workload 6xlognormal:2KiB,0.8 --repeats 2"
    )
