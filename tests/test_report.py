"""ResultSet tables, files, pandas, HTML and plots, from constructed Results."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from fsspec.callbacks import Callback

from storeprobe import (
    SCHEMA_VERSION,
    ConfigurationError,
    Environment,
    Probe,
    Result,
    ResultSet,
    Sample,
    Subject,
    Workload,
)
from storeprobe.plot import plot_probes, plot_streams
from tests.helpers import bars


def env(label: str, hostname: str = "h") -> Environment:
    return Environment(hostname=hostname, cpu_count=2, platform="p", python="3.11", label=label)


def result(
    url: str,
    label: str,
    seconds: float,
    *,
    workload: Workload | None = None,
    operation: str = "upload",
    streams: int = 1,
    backend: str = "obstore",
    protocol: str = "s3",
    jitter: tuple[float, ...] = (1.0, 1.01, 1.02),
    hostname: str = "h",
) -> Result:
    """Repeats at ``seconds`` × each jitter factor: the best is ``seconds`` exactly."""
    workload = workload or Workload.small()
    return Result(
        operation=operation,  # type: ignore[arg-type]
        subject=Subject.of(workload),
        workload=workload,
        url=url,
        protocol=protocol,
        backend=backend,
        streams=streams,
        effective_streams=streams,
        strategy="objects",
        samples=[
            Sample(
                nbytes=workload.total_bytes,
                elapsed_ns=round(seconds * factor * 1e9),
                latencies_ns=[1],
                max_in_flight=streams,
            )
            for factor in jitter
        ],
        environment=env(label, hostname),
    )


@pytest.fixture
def two_by_two() -> ResultSet:
    # 4 MiB small workload: 1 s = 4096 KiB/s, 2 s = 2048 KiB/s, 0.5 s = 8192 KiB/s
    return ResultSet(
        [
            result("s3://a", "home", 1.0),
            result("s3://b", "home", 2.0),
            result("s3://a", "ec2", 2.0),
            result("s3://b", "ec2", 0.5),
        ]
    )


def test_table_by_environment_values_units_and_winner(two_by_two: ResultSet) -> None:
    table = two_by_two.table(by="environment")
    lines = table.splitlines()
    assert lines[0] == "**upload small, 1 stream**"
    assert [cell.strip() for cell in lines[2].split("|")[1:-1]] == [
        "target",
        "home (KiB/s)",
        "ec2 (KiB/s)",
    ]
    row_a = [cell.strip() for cell in lines[4].split("|")[1:-1]]
    row_b = [cell.strip() for cell in lines[5].split("|")[1:-1]]
    assert row_a == ["s3://a", "4096 fastest", "2048"]
    assert row_b == ["s3://b", "2048", "8192 fastest"]
    assert lines[3].endswith(":|")  # numbers right-aligned
    assert lines[6] == ""
    assert lines[7].startswith("fastest: fastest in its column and significantly faster")
    assert "≈" in lines[7]
    assert "8192 *" in two_by_two.table(crown="*")


def test_crown_only_when_significantly_faster_else_a_tie_mark() -> None:
    # 1 % apart with 1-2 % noise over 3 repeats: no crown
    close = ResultSet(
        [
            result("s3://a", "home", 1.0, jitter=(1.0, 1.02, 1.04)),
            result("s3://b", "home", 1.01, jitter=(1.0, 0.995, 1.02)),
            result("s3://c", "home", 3.0),
        ]
    )
    rows = [
        [cell.strip() for cell in line.split("|")[1:-1]] for line in close.table().splitlines()[4:7]
    ]
    assert rows == [
        ["s3://a", "4096 ≈"],
        ["s3://b", "4076 ≈"],  # 4096 / (1.01 × 0.995)
        ["s3://c", "1365"],  # significantly slower than the best: no mark
    ]
    assert "~" in close.table(tie="~")
    # one repeat each cannot tell noise from a difference
    single = ResultSet(
        [
            result("s3://a", "home", 1.0, jitter=(1.0,)),
            result("s3://b", "home", 2.0, jitter=(1.0,)),
        ]
    )
    body = single.table().split("\n\n")[1]  # title, table, legend
    assert "fastest" not in body
    assert "4096 ≈" in body
    # a real difference over 3 repeats is crowned
    clear = ResultSet([result("s3://a", "home", 1.0), result("s3://b", "home", 2.0)])
    assert "4096 fastest" in clear.table()
    assert "≈" not in clear.table().split("\n\n")[1]


def test_machines_are_never_merged() -> None:
    two_machines = ResultSet(
        [
            result("s3://a", "laptop", 1.0),
            result("s3://a", "vm", 0.5),
            result("s3://a", "laptop", 0.5, operation="download"),
            result("s3://a", "vm", 2.0, operation="download"),
        ]
    )
    lines = two_machines.table(by="probe").splitlines()
    assert lines[0] == "**all probes (laptop, vm)**"
    header = [cell.strip() for cell in lines[2].split("|")[1:-1]]
    assert header == [
        "target",
        "environment",
        "upload small, 1 stream (KiB/s)",
        "download small, 1 stream (KiB/s)",
    ]
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in lines[4:6]]
    assert rows == [
        ["s3://a", "laptop", "4096", "8192 fastest"],
        ["s3://a", "vm", "8192 fastest", "2048"],
    ]
    # two hosts under one label stay apart too
    same_label = ResultSet(
        [
            result("s3://a", "ci", 1.0, hostname="runner-1"),
            result("s3://a", "ci", 2.0, hostname="runner-2"),
        ]
    )
    header_line = same_label.table().splitlines()[2]
    assert "ci @ runner-1 (KiB/s)" in header_line
    assert "ci @ runner-2 (KiB/s)" in header_line
    rows_csv = list(csv.DictReader(io.StringIO(two_machines.table(by="probe", format="csv"))))
    assert {(r["target"], r["environment"]) for r in rows_csv} == {
        ("s3://a", "laptop"),
        ("s3://a", "vm"),
    }


def test_units_for_tables(two_by_two: ResultSet) -> None:
    def first_row(table: str) -> list[str]:
        return [cell.strip() for cell in table.splitlines()[4].split("|")[1:-1]]

    assert first_row(two_by_two.table(unit="MiB/s")) == ["s3://a", "4.000 fastest", "2.000"]
    assert "home (MiB/s)" in two_by_two.table(unit="MiB/s")
    assert first_row(two_by_two.table(unit="Mibit/s")) == ["s3://a", "32.00 fastest", "16.00"]
    # auto: by magnitude (the largest figure of the table is 8 MiB/s)
    assert first_row(two_by_two.table(unit="auto")) == ["s3://a", "4.000 fastest", "2.000"]
    slow = ResultSet([result("s3://a", "home", 8.0)])
    assert "home (KiB/s)" in slow.table(unit="auto")
    with pytest.raises(ConfigurationError, match="Mibit/s"):
        two_by_two.table(unit="MB/s")


def test_text_and_html_tables(two_by_two: ResultSet) -> None:
    text = two_by_two.table(format="text").splitlines()
    assert text[0] == "upload small, 1 stream"
    assert text[1].split() == ["target", "home", "(KiB/s)", "ec2", "(KiB/s)"]
    assert text[3].split() == ["s3://a", "4096", "fastest", "2048"]
    page = two_by_two.table(format="html")
    assert page.count("<tr>") == 3
    assert "<caption>upload small, 1 stream</caption>" in page
    with pytest.raises(ConfigurationError, match="format must be one of"):
        two_by_two.table(format="latex")


def test_table_by_probe_puts_streams_side_by_side() -> None:
    large = Workload.large()
    results = ResultSet(
        [
            result("s3://a", "home", 1.0),
            result("s3://a", "home", 0.5, streams=4),
            result("s3://a", "home", 2.0, workload=large, operation="download"),
            result(
                "gs://c",
                "home",
                1.0,
                workload=large,
                operation="download",
                backend="gcsfs",
                protocol="gs",
            ),
        ]
    )
    lines = results.table(by="probe").splitlines()
    header = [cell.strip() for cell in lines[2].split("|")[1:-1]]
    assert header == [
        "target",
        "upload small, 1 stream (KiB/s)",
        "upload small, 4 streams (KiB/s)",
        "download large, 1 stream (MiB/s)",
    ]
    assert [c.strip() for c in lines[4].split("|")[1:-1]] == [
        "s3://a",
        "4096",
        "8192",
        "128.0",
    ]
    assert [c.strip() for c in lines[5].split("|")[1:-1]] == ["gs://c", "", "", "256.0 fastest"]


def test_csv_parses_back(two_by_two: ResultSet) -> None:
    rows = list(csv.DictReader(io.StringIO(two_by_two.table(format="csv"))))
    assert len(rows) == 4
    winners = {(r["target"], r["column"]) for r in rows if r["winner"] == "1"}
    assert winners == {("s3://a", "home"), ("s3://b", "ec2")}
    assert {r["mark"] for r in rows} == {"fastest", ""}
    assert {r["unit"] for r in rows} == {"KiB/s"}
    assert sorted(float(r["value"]) for r in rows) == [2048.0, 2048.0, 4096.0, 8192.0]


def test_best_of_several_runs_and_backend_in_label() -> None:
    results = ResultSet(
        [
            result("s3://a", "home", 2.0),
            result("s3://a", "home", 1.0),
            result("s3://a", "home", 0.25, backend="s3fs"),
        ]
    )
    assert results.targets == ["s3://a", "s3://a (s3fs)"]
    table = results.table()
    assert "4096" in table
    assert "16384 fastest" in table


def test_save_appends_and_never_loses_earlier_runs(tmp_path: Path, two_by_two: ResultSet) -> None:
    path = tmp_path / "results.json"
    ResultSet(two_by_two.results[:2]).save(path)
    ResultSet(two_by_two.results[2:]).save(path)
    ResultSet(two_by_two.results[2:]).save(path)  # the same results again: kept once
    assert ResultSet.load(path).results == two_by_two.results
    assert ResultSet.from_json(path) == two_by_two
    assert json.loads(path.read_text())["version"] == SCHEMA_VERSION
    path.write_text('{"schema": "storeprobe.results", "version": 7, "results": []}')
    with pytest.raises(ValueError, match="version 7"):
        two_by_two.save(path)
    assert 'version": 7' in path.read_text()  # an unreadable file is never overwritten


def test_filter_and_merge(two_by_two: ResultSet) -> None:
    assert len(two_by_two.filter(environment="home")) == 2
    assert len(two_by_two.filter(url="s3://b", environment="ec2")) == 1
    assert len(two_by_two.filter(lambda r: r.kib_per_s > 3000)) == 2
    assert len(two_by_two.merge(two_by_two)) == 4
    assert two_by_two.environments == ["home", "ec2"]
    with pytest.raises(ConfigurationError):
        ResultSet(["not a result"])  # type: ignore[list-item]


def test_a_result_set_is_immutable(two_by_two: ResultSet) -> None:
    extra = result("s3://c", "home", 1.0)
    bigger = two_by_two.add(extra, [extra])
    assert len(two_by_two) == 4
    assert len(bigger) == 6
    assert bigger[4:] == ResultSet([extra, extra])
    assert two_by_two.merge([extra]) == ResultSet([*two_by_two, extra])
    assert len(two_by_two.filter(environment="home")) == 2
    assert len(two_by_two) == 4
    with pytest.raises(AttributeError):
        two_by_two.results = ()  # type: ignore[misc]
    assert isinstance(two_by_two.results, tuple)
    assert hash(two_by_two) == hash(ResultSet(list(two_by_two)))


def test_printing_a_result_set_prints_its_table(two_by_two: ResultSet) -> None:
    lines = str(two_by_two).splitlines()
    assert [cell.strip() for cell in lines[0].split("|")[1:-1]] == [
        "target",
        "environment",
        "probe",
        "workload",
        "unit",
        "streams",
        "best",
        "median",
        "ok/repeats",
    ]
    assert [cell.strip() for cell in lines[2].split("|")[1:-1]] == [
        "s3://a",
        "home",
        "upload small",
        "256 × 16 KiB",
        "KiB/s",
        "1",
        "4096",
        "4055",
        "3/3",
    ]
    assert len(lines) == 2 + 4
    assert repr(two_by_two) == "<ResultSet 4 results, 2 targets>"
    assert str(ResultSet()) == "(no results)"
    assert "| 4.000 |" in two_by_two.summary(unit="MiB/s")


def test_to_pandas_one_tidy_row_per_result(two_by_two: ResultSet) -> None:
    frame = two_by_two.to_pandas()
    assert len(frame) == 4
    assert list(frame["environment"]) == ["home", "home", "ec2", "ec2"]
    assert list(frame["kib_per_s"]) == [4096.0, 2048.0, 2048.0, 8192.0]


def test_html_reprs(two_by_two: ResultSet) -> None:
    shown = two_by_two._repr_html_()
    # the crowned comparison tables, then one row per result (4, plus its header row)
    assert shown.index("fastest in its column") < shown.index("ok/repeats")
    summary = shown[shown.index("ok/repeats") :]
    assert summary.count("<tr>") == 4
    assert "<td>ec2</td>" in shown
    assert "4096 KiB/s" in two_by_two[0]._repr_html_()
    assert "<script>" not in result("s3://<script>", "x", 1.0)._repr_html_()


def test_saturation_point() -> None:
    sweep = ResultSet(
        [
            result("s3://a", "home", seconds, streams=streams)
            for streams, seconds in [(1, 4.0), (2, 2.0), (4, 1.02), (8, 1.0), (16, 1.01)]
        ]
    )
    assert sweep.saturation() == 4  # 1/1.02 ≥ 0.95 of the best
    assert sweep.saturation(1.0) == 8
    assert str(sweep.sweep_saturation()) == (
        "saturation: 4 streams reach 95% of the best throughput (tried 1–16)"
    )
    with pytest.raises(ConfigurationError):
        sweep.add(result("s3://other", "home", 1.0)).saturation()


def test_fresh_payload_seeds_are_the_same_probe() -> None:
    import attrs

    seeded = [
        attrs.evolve(result("s3://a", "home", seconds, streams=streams), workload=workload)
        for streams, seconds, workload in [
            (1, 2.0, Workload(count=256, size="16KiB", name="small", seed=11)),
            (2, 1.0, Workload(count=256, size="16KiB", name="small", seed=22)),
            (4, 1.0, Workload(count=256, size="16KiB", name="small", seed=33)),
        ]
    ]
    sweep = ResultSet(seeded)
    assert sweep.saturation() == 2
    assert str(sweep.sweep_saturation()).startswith("saturation: 2 streams reach 95%")
    tables = ResultSet([seeded[1], attrs.evolve(seeded[2], streams=2, url="s3://b")]).table()
    assert tables.count("**upload small, 2 streams**") == 1  # one table, two rows
    one = ResultSet([result("s3://a", "home", 1.0, streams=s) for s in (1, 2)])
    assert str(one.sweep_saturation()).startswith("saturation: 1 stream reaches 95%")


def test_no_saturation_claimed_at_the_largest_count_tried() -> None:
    rising = ResultSet(
        [
            result("s3://a", "home", seconds, streams=streams)
            for streams, seconds in [(1, 4.0), (2, 2.0), (4, 1.0)]
        ]
    )
    assert rising.saturation() is None
    found = rising.sweep_saturation()
    assert found is not None
    assert (found.streams, found.tried) == (None, (1, 2, 4))
    assert str(found).startswith("no saturation within 1–4 streams")
    assert ResultSet([result("s3://a", "home", 1.0)]).saturation() is None
    assert ResultSet().sweep_saturation() is None


def test_sweep_runs_each_stream_count(tmp_path: Path) -> None:
    probe = Probe.from_url(str(tmp_path), repeats=1)
    sweep = probe.sweep("upload", Workload(count=8, size="4KiB"), streams=[1, 2, 4])
    assert [r.streams for r in sweep] == [1, 2, 4]
    assert sweep.saturation() in (1, 2, None)  # 4, the largest count, is never claimed
    with pytest.raises(ConfigurationError):
        probe.sweep("upload", Workload.small(), streams=[1, 0])


class Recorder(Callback):  # type: ignore[misc]  # fsspec ships no type hints
    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []
        self.updates = 0

    def set_size(self, size: int) -> None:
        super().set_size(size)
        self.sizes.append(size)

    def call(self, *args: object, **kwargs: object) -> None:
        self.updates += 1


def test_progress_goes_through_an_fsspec_callback(tmp_path: Path) -> None:
    import time

    recorder = Recorder()
    probe = Probe.from_url(str(tmp_path), repeats=2, callback=recorder)
    started = time.monotonic()
    probe.download(Workload(count=8, size="4KiB"))
    wall = time.monotonic() - started
    assert recorder.sizes == [32768, 32768]  # each timed repeat's bytes
    assert recorder.value == 32768  # told the end of the last repeat
    # at most 10 updates a second, plus per repeat the size, the start and the end
    assert 2 <= recorder.updates <= 3 * 2 + 10 * wall + 1


def test_plots_are_written(tmp_path: Path, two_by_two: ResultSet) -> None:
    figure = plot_probes(two_by_two)
    figure.savefig(tmp_path / "bars.png")
    figure.savefig(tmp_path / "bars.svg")
    sweep = [result("s3://a", "home", 4.0 / s, streams=s) for s in (1, 2, 4, 8)]
    plot_streams(sweep).savefig(tmp_path / "streams.png")
    for name in ("bars.png", "bars.svg", "streams.png"):
        assert (tmp_path / name).stat().st_size > 1000
    assert (tmp_path / "bars.png").read_bytes().startswith(b"\x89PNG")
    with pytest.raises(ConfigurationError):
        plot_probes([])
    # axis units come from the same rules as tables
    assert figure.axes[0].get_ylabel() == "KiB/s"
    assert plot_probes(two_by_two, unit="Mibit/s").axes[0].get_ylabel() == "Mibit/s"
    by_probe = plot_probes(two_by_two, unit="MiB/s").axes[0]
    assert sorted(round(p.get_height(), 2) for p in bars(by_probe)) == [2.0, 2.0, 4.0, 8.0]
    assert plot_streams(sweep, unit="auto").axes[0].get_ylabel() == "MiB/s"  # up to 8 MiB/s
    mixed = [*sweep, result("s3://a", "home", 1.0, workload=Workload.large())]
    with pytest.raises(ConfigurationError, match="one unit"):
        plot_streams(mixed)
    assert plot_streams(mixed, unit="MiB/s").axes[0].get_ylabel() == "MiB/s"


def test_window_too_short_figure_is_never_crowned() -> None:
    """A figure flagged window-too-short gets no mark, even when it is the fastest."""
    from attrs import evolve

    from storeprobe.notices import Code, Notice

    short = Notice(code=Code.WINDOW_TOO_SHORT, message="0.5 ms is too short to time reliably")
    fast = evolve(result("s3://a", "home", 1.0), warnings=[short])
    slow = result("s3://b", "home", 2.0)
    slower = result("s3://c", "home", 4.0)
    body = ResultSet([fast, slow, slower]).table().split("\n\n")[1]
    assert "fastest" not in body
    assert "≈" not in body
    # a flagged runner-up is never part of a tie either
    tied = ResultSet(
        [
            result("s3://a", "home", 1.0, jitter=(1.0,)),
            evolve(result("s3://b", "home", 1.0, jitter=(1.0,)), warnings=[short]),
        ]
    ).table()
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in tied.splitlines()[4:6]]
    assert rows == [["s3://a", "4096 ≈"], ["s3://b", "4096"]]
    assert "window-too-short is never marked" in tied


def test_text_columns_align_in_terminal_cells() -> None:
    """Widths are terminal columns (wcwidth): a wide character counts two."""
    from wcwidth import wcswidth

    from storeprobe.render import Cell, Table, render_tables

    table = Table(
        title="",
        header=["target", "rate"],
        units=["", "KiB/s"],
        rows=[
            [Cell(text="s3://東京"), Cell(text="1.000", value=1.0, mark="👑")],
            [Cell(text="s3://ab"), Cell(text="2.000", value=2.0)],
        ],
    )
    for format in ("text", "markdown"):
        lines = [line for line in render_tables([table], format).splitlines() if line]
        widths = {wcswidth(line) for line in lines}
        assert len(widths) == 1, (format, lines)


def test_latency_table_shows_objects_per_s_percentiles_and_ttfb() -> None:
    """Objects/s of the best repeat, p50/p90/p99 of every request in ms, with n."""
    from attrs import evolve

    from storeprobe.render import latency_table, render_tables

    workload = Workload(count=100, size=1024)
    # 100 requests of 1..100 ms: p50 = 50.5 ms, p90 = 90.1 ms, p99 = 99.01 ms
    latencies = [ms * 1_000_000 for ms in range(1, 101)]
    sample = Sample(
        nbytes=workload.total_bytes,
        elapsed_ns=500_000_000,
        latencies_ns=latencies,
        ttfb_ns=[ns // 2 for ns in latencies],
        max_in_flight=1,
    )
    measured = evolve(
        result("s3://a", "home", 0.5, workload=workload, operation="download"), samples=[sample]
    )
    table = latency_table([measured])
    row = [cell.text for cell in table.rows[0]]
    assert table.header[:5] == ("probe", "objects/s", "p50", "p90", "p99")
    figures = ["200.0", "50.50", "90.10", "99.01", "25.25", "45.05", "49.51", "100"]
    assert row == [f"download {workload.label}", *figures]  # TTFB p99: 0.5 × 99.01
    # one object: no objects/s; one request supports no percentile; no TTFB on uploads
    single = result("s3://a", "home", 1.0, workload=Workload.large(), jitter=(1.0,))
    cells = [cell.text for cell in latency_table([single]).rows[0]]
    assert cells[1:] == ["-", "-", "-", "-", "-", "-", "-", "1"]
    assert "TTFB p99 (ms)" in render_tables([latency_table([measured, single])], "markdown")


def test_shared_legend_printed_once_under_the_last_table(two_by_two: ResultSet) -> None:
    """Eight tables with one rule: the rule once, at the end (markdown and text)."""
    several = ResultSet([*two_by_two, result("s3://a", "home", 1.0, streams=4)])
    for format in ("markdown", "text"):
        shown = several.table(format=format)
        assert shown.count("fastest in its column") == 1
        assert shown.rstrip().endswith("Figures are the best repeat.")
