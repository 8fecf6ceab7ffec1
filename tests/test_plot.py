"""Charts checked from the Figure objects (bar heights, whiskers, marks, units), not pixels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.colors import to_hex

from storeprobe import ConfigurationError, Environment, Result, Sample, Workload
from storeprobe.document import legacy_subject
from storeprobe.plot import (
    MEDIAN_KEY,
    OKABE_ITO,
    WHISKER_KEY,
    plot_backup,
    plot_probes,
    plot_streams,
    plot_timeline,
)
from storeprobe.step import Step
from tests.helpers import bars

S = 1_000_000_000
WORKLOAD = Workload.small()  # 4 MiB in all: 1 s = 4096 KiB/s


def env(label: str = "home", utc: str = "2026-11-30T10:00:00+00:00") -> Environment:
    return Environment(hostname="h", cpu_count=2, platform="p", python="3.11", label=label, utc=utc)


def result(
    url: str,
    seconds: tuple[float, ...],
    *,
    streams: int = 1,
    label: str = "home",
    workload: Workload = WORKLOAD,
    step: Step | None = None,
) -> Result:
    return Result(
        operation="upload",
        subject=legacy_subject("upload", workload, step=step is not None),
        workload=workload if step is None else None,
        url=url,
        protocol="s3",
        backend="obstore",
        streams=streams,
        effective_streams=streams,
        strategy="objects",
        samples=[
            Sample(nbytes=workload.total_bytes, elapsed_ns=round(s * S), latencies_ns=[1])
            for s in seconds
        ],
        environment=env(label),
        step=step,
    )


def lines(ax: Axes, gid: str) -> list[tuple[list[float], list[float]]]:
    return [
        (
            list(map(float, np.asarray(line.get_xdata()))),
            list(map(float, np.asarray(line.get_ydata()))),
        )
        for line in ax.lines
        if line.get_gid() == gid
    ]


def test_bars_whiskers_median_and_values() -> None:
    # s3://a: repeats of 1, 2 and 4 s = 4096, 2048, 1024 KiB/s; s3://b at 4 streams: 0.5 s
    figure = plot_probes(
        [result("s3://a", (2.0, 1.0, 4.0)), result("s3://b", (0.5, 0.5), streams=4)]
    )
    (ax,) = figure.axes
    assert ax.get_ylabel() == "KiB/s"
    assert ax.get_title() == "upload small"
    heights = sorted(round(p.get_height()) for p in bars(ax))
    assert heights == [4096, 8192]
    whiskers = lines(ax, "whisker")
    assert [sorted(ys) for _, ys in whiskers] == [[1024.0, 4096.0], [8192.0, 8192.0]]
    medians = lines(ax, "median")
    assert [ys for _, ys in medians] == [[2048.0, 2048.0], [8192.0, 8192.0]]
    texts = sorted(t.get_text() for t in ax.texts)
    assert texts == ["4,096", "8,192"]
    # one colour per stream count, from the Okabe–Ito palette, and a legend titled streams
    colours = {to_hex(p.get_facecolor()).upper() for p in ax.patches}
    assert colours == {OKABE_ITO[0].upper(), OKABE_ITO[1].upper()}
    (legend,) = figure.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "1 stream",
        "4 streams",
        WHISKER_KEY,
        MEDIAN_KEY,
    ]
    assert legend.get_title().get_text() == "streams"
    # plain numbers on the axis: no offset, no powers of ten
    figure.canvas.draw()
    assert ax.yaxis.get_offset_text().get_text() == ""
    assert all("e" not in t.get_text() for t in ax.get_yticklabels())
    assert figure.get_suptitle() == "throughput, best repeat — home — 2026-11-30"


def test_one_unit_per_panel_and_units_asked() -> None:
    results = [result("s3://a", (1.0,)), result("s3://a", (2.0,), workload=Workload.large())]
    small, large = plot_probes(results).axes
    assert (small.get_ylabel(), large.get_ylabel()) == ("KiB/s", "MiB/s")
    assert [round(p.get_height()) for p in bars(large)] == [
        round(Workload.large().total_bytes / 2 / 2**20)
    ]
    assert {ax.get_ylabel() for ax in plot_probes(results, unit="Mibit/s").axes} == {"Mibit/s"}


def test_by_environment_one_bar_per_environment_never_merged() -> None:
    results = [
        result("s3://a", (1.0,), label="home"),
        result("s3://a", (2.0,), label="ec2"),
        result("s3://a", (0.5,), label="ec2", streams=4),
    ]
    figure = plot_probes(results, by="environment", unit="MiB/s")
    (ax,) = figure.axes
    assert sorted(p.get_height() for p in bars(ax)) == [2.0, 4.0, 8.0]
    (legend,) = figure.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "ec2, 1 stream",
        "ec2, 4 streams",
        "home, 1 stream",
        WHISKER_KEY,
        MEDIAN_KEY,
    ]
    assert "home, ec2" in figure.get_suptitle()
    with pytest.raises(ConfigurationError, match="by must be"):
        plot_probes(results, by="target")  # type: ignore[arg-type]


def test_long_target_names_turn_the_bars_horizontal() -> None:
    url = "s3://a-rather-long-bucket-name/and/prefix"
    (ax,) = plot_probes([result(url, (1.0, 2.0)), result("s3://b", (2.0,))]).axes
    assert ax.get_xlabel() == "KiB/s"
    assert [t.get_text() for t in ax.get_yticklabels()] == [url, "s3://b"]
    assert sorted(round(p.get_width()) for p in bars(ax)) == [2048, 4096]
    (xs, ys), *_ = lines(ax, "whisker")
    assert sorted(xs) == [2048.0, 4096.0]
    assert ys[0] == ys[1]


def test_streams_saturation_marked() -> None:
    sweep = [result("s3://a", (4.0 / min(n, 4), 4.4 / min(n, 4)), streams=n) for n in (1, 2, 4, 8)]
    figure = plot_streams(sweep, unit="MiB/s")
    (ax,) = figure.axes
    (line,) = [line for line in ax.lines if line.get_gid() is None]
    assert np.asarray(line.get_xdata()).tolist() == [1, 2, 4, 8]
    assert np.asarray(line.get_ydata()).tolist() == [1.0, 2.0, 4.0, 4.0]
    assert lines(ax, "saturation") == [([4.0], [4.0])]
    assert any("saturates at 4" in t.get_text() for t in ax.texts)
    assert len(lines(ax, "whisker")) == 4
    # still rising at the last count: no mark
    rising = [result("s3://a", (4.0 / n,), streams=n) for n in (1, 2, 4)]
    assert lines(plot_streams(rising).axes[0], "saturation") == []


def step(label_kind: str, number: int, *, incremental: bool = True) -> Step:
    return Step(
        scenario="backup",
        method="files",
        kind=label_kind,  # type: ignore[arg-type]
        number=number,
        version=number - 1,
        dataset="tree",
        dataset_bytes=100,
        changed_bytes=100,
        moved_bytes=100,
        incremental=incremental,
    )


def test_backup_seconds_per_step_per_storage() -> None:
    results = [
        result("s3://a", (3.0, 4.0), step=step("backup", 1)),
        result("s3://a", (1.0,), step=step("backup", 2)),
        result("s3://a", (2.0,), step=step("restore", 1, incremental=False)),
        result("file:///d", (0.5,), step=step("backup", 1)),
        result("file:///d", (0.25,), step=step("backup", 2)),
    ]
    figure = plot_backup(results)
    (ax,) = figure.axes
    assert ax.get_ylabel() == "s"
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "backup 1",
        "backup 2",
        "restore 1 (full)",
    ]
    assert sorted(p.get_height() for p in bars(ax)) == [0.25, 0.5, 1.0, 2.0, 3.0]
    assert [sorted(ys) for _, ys in lines(ax, "whisker")] == [[3.0, 4.0]]
    assert ax.get_title() == "backup: tree"
    (legend,) = figure.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "files, s3://a, 1 stream",
        "files, file:///d, 1 stream",
        WHISKER_KEY,
        MEDIAN_KEY,
    ]
    with pytest.raises(ConfigurationError, match="no backup"):
        plot_backup([result("s3://a", (1.0,))])


def test_backup_one_bar_per_method_and_step_one_panel_for_every_version() -> None:
    """Two methods never share a bar; the versions of a dataset share one panel."""

    def version(method: str, kind: str, number: int) -> Step:
        made = attrs.evolve(step(kind, number), method=method)
        return attrs.evolve(made, dataset=f"tree v{made.version}: {number * 10} files")

    results = [
        result("s3://a", (3.0,), step=version("files", "backup", 1)),
        result("s3://a", (1.0,), step=version("files", "backup", 2)),
        result("s3://a", (6.0,), step=version("restic", "backup", 1)),
        result("s3://a", (0.5,), step=version("restic", "backup", 2)),
    ]
    figure = plot_backup(results)
    (ax,) = figure.axes  # one panel, though each version describes itself differently
    assert sorted(p.get_height() for p in bars(ax)) == [0.5, 1.0, 3.0, 6.0]
    (legend,) = figure.legends
    assert [t.get_text() for t in legend.get_texts()][:2] == ["files, 1 stream", "restic, 1 stream"]
    assert "1 later version" in ax.get_title()


def test_ticks_have_thousands_separators() -> None:
    figure = plot_probes(
        [result("s3://a", (1.0,), workload=Workload(count=1, size=2_500_000))], unit="KiB/s"
    )
    figure.canvas.draw()
    (ax,) = figure.axes
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert any("," in label for label in labels), labels
    assert not any("e" in label for label in labels)


def test_timeline_one_line_per_repeat() -> None:
    # 4 requests of 1 s, back to back: 1, 2, 1 and 1 MiB
    sizes = [2**20, 2**21, 2**20, 2**20]
    sample = Sample(
        nbytes=sum(sizes),
        elapsed_ns=4 * S,
        latencies_ns=[S] * 4,
        offsets_ns=[0, S, 2 * S, 3 * S],
        request_bytes=sizes,
    )
    probe = attrs.evolve(
        result("s3://a", (1.0,), workload=Workload.large()), samples=[sample, sample]
    )
    figure = plot_timeline(probe, slice_ns=S)
    (ax,) = figure.axes
    assert ax.get_ylabel() == "MiB/s"
    assert [line.get_label() for line in ax.lines] == ["repeat 1", "repeat 2"]
    assert np.asarray(ax.lines[0].get_xdata()).tolist() == [0.5, 1.5, 2.5, 3.5]
    assert np.allclose(ax.lines[0].get_ydata(), [1, 2, 1, 1])
    assert "1000 ms" in ax.get_xlabel()
    assert np.asarray(plot_timeline(probe).axes[0].lines[0].get_xdata()).size == 20  # 200 ms slices
    with pytest.raises(ConfigurationError, match="per-request records"):
        plot_timeline(result("s3://a", (1.0,)))


def test_charts_save(tmp_path: Path) -> None:
    figure = plot_probes([result("s3://a", (1.0, 2.0)), result("s3://b", (2.0,), streams=2)])
    figure.savefig(tmp_path / "bars.svg")
    assert (tmp_path / "bars.svg").read_text().lstrip().startswith("<?xml")
    with pytest.raises(ConfigurationError, match="nothing to plot"):
        plot_probes([result("s3://a", ())])


def test_cli_report_plot_of_backup_steps_draws_the_backup_chart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``report --plot`` of backup results: a bar per method and step, not one merged bar."""
    from matplotlib.figure import Figure

    from storeprobe import ResultSet
    from storeprobe.cli import main

    restic = attrs.evolve(step("backup", 1), method="restic")
    results = [
        result("s3://a", (3.0,), step=step("backup", 1)),
        result("s3://a", (6.0,), step=restic),
    ]
    ResultSet(results).save(tmp_path / "backup.json")
    drawn: list[Figure] = []
    original = Figure.savefig

    def keep(self: Figure, *args: Any, **kwargs: Any) -> None:  # watch, then draw for real
        drawn.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    chart = tmp_path / "b.png"
    assert main(["report", str(tmp_path / "backup.json"), "--plot", str(chart)]) == 0
    (figure,) = drawn
    (ax,) = figure.axes
    assert sorted(p.get_height() for p in bars(ax)) == [3.0, 6.0]
    assert chart.read_bytes().startswith(b"\x89PNG")
