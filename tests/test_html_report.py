"""The HTML report: self-contained, secret-free, reproducible, and drawn by a real browser."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import time
import warnings
from html.parser import HTMLParser
from pathlib import Path

import attrs
import numpy as np
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from storeprobe import Probe, Result, ResultSet
from storeprobe.cli import main
from storeprobe.html_report import METHOD, html_report, run_command
from storeprobe.render import CROWN, TIE
from tests.test_secrets import SENTINELS, WORKLOADS, _leaves

FIXTURE = Path(__file__).parent / "fixtures" / "results-v1.json"


class _References(HTMLParser):
    """Every tag, every URL-valued attribute and every style text of a document."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.urls: list[tuple[str, str, str]] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._in_style = tag == "style"
        for name, value in attrs:
            if value is None:
                continue
            if name in ("src", "href", "xlink:href", "srcset", "data", "action", "poster"):
                self.urls.append((tag, name, value))
            if name == "style":
                self.styles.append(value)

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)


def _parse(document: str) -> _References:
    parser = _References()
    parser.feed(document)
    parser.close()
    return parser


def _report() -> str:
    results = ResultSet.load(FIXTURE)
    return html_report(results, title="fixture report", command=run_command(results))


def test_report_references_nothing_outside_itself() -> None:
    document = _report()
    found = _parse(document)
    assert "svg" in found.tags  # the charts are inline
    assert "script" not in found.tags
    assert "link" not in found.tags
    assert "img" not in found.tags
    for tag, name, value in found.urls:
        # only in-document references (#id, as SVG uses) or data: URIs
        assert value.startswith(("#", "data:")), (tag, name, value)
    for style in found.styles:
        assert "@import" not in style
        for target in re.findall(r"url\(\s*['\"]?([^'\")]*)", style):
            assert target.startswith(("#", "data:")), style
    # the only URLs left are the SVG namespaces (names, never fetched)
    assert set(re.findall(r"https?://[^\"'\s]*", document)) <= {
        "http://www.w3.org/2000/svg",
        "http://www.w3.org/1999/xlink",
    }
    assert "<text" not in document  # chart text drawn as paths: no font needed


def test_report_contains_every_part() -> None:
    document = _report()
    assert document.startswith("<!DOCTYPE html>")
    assert "<title>fixture report</title>" in document
    assert "<caption>upload 4 × 1 KiB, 1 stream</caption>" in document
    assert "fastest in its column" in document  # the crown legend
    assert "unclassified: high variation" in document  # notices with their codes
    assert '<li class="error">error: ' in document  # folded under its result
    assert "fixture-machine" in document
    assert "3.11.7" in document
    assert "fsspec 2026.9.0" in document
    assert html.escape(METHOD) in document
    assert "storeprobe run memory://v1fixture --streams 1" in document


class _Outline(HTMLParser):
    """The report's structure: headings in order, sections, legends, folded notices."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[tuple[str, str]] = []  # (tag, text)
        self.legends: list[str] = []
        self.details: list[tuple[str, list[str]]] = []  # (summary, notice items)
        self.environments: list[str] = []  # h3 titles inside section.environment
        self.loose_notices: list[str] = []  # <li> with a notice outside any <details>
        self.cells: list[str] = []  # every comparison-table cell's text
        self._stack: list[tuple[str, str]] = []  # (tag, class)
        self._text: list[str] = []

    def _inside(self, tag: str, cls: str | None = None) -> bool:
        return any(t == tag and (cls is None or c == cls) for t, c in self._stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("meta", "br", "hr", "img", "input", "link"):
            return
        self._stack.append((tag, dict(attrs).get("class") or ""))
        self._text = []
        if tag == "details":
            self.details.append(("", []))

    def handle_endtag(self, tag: str) -> None:
        text = "".join(self._text).strip()
        while self._stack:
            open_tag, cls = self._stack.pop()
            if open_tag == tag:
                break
        if tag in ("h1", "h2", "h3"):
            self.headings.append((tag, text))
            if tag == "h3" and self._inside("section", "environment"):
                self.environments.append(text)
        elif tag == "p" and cls == "legend":
            self.legends.append(text)
        elif tag == "summary" and self._inside("details"):
            self.details[-1] = (text, self.details[-1][1])
        elif tag == "li" and cls in ("warning", "error"):
            if self._inside("details"):
                self.details[-1][1].append(text)
            else:
                self.loose_notices.append(text)
        elif tag == "td" and self._inside("section") and not self._inside("svg"):
            self.cells.append(text)

    def handle_data(self, data: str) -> None:
        self._text.append(data)


def _outline(document: str) -> _Outline:
    outline = _Outline()
    outline.feed(document)
    outline.close()
    return outline


def _many_seconds(results: ResultSet, machines: dict[str, int]) -> list[Result]:
    """Copies of the fixture's results as if measured over many seconds on some machines."""
    made: list[Result] = []
    for label, seconds in machines.items():
        for second in range(seconds):
            for result in results:
                env = attrs.evolve(
                    result.environment, label=label, utc=f"2026-11-30T15:08:{second:02d}+00:00"
                )
                made.append(attrs.evolve(result, environment=env))
    return made


def test_report_structure_from_its_dom() -> None:
    """Comparison and charts first, one legend, one block per machine, notices folded."""
    fixture = ResultSet.load(FIXTURE)
    results = _many_seconds(fixture, {"laptop": 11, "server": 3})
    outline = _outline(html_report(results))
    h2 = [text for tag, text in outline.headings if tag == "h2"]
    assert h2[:2] == ["Comparison", "Charts"]
    assert h2.index("Every result, its errors and warnings") > h2.index("Charts")
    assert len(outline.legends) == 1
    assert "fastest in its column" in outline.legends[0]
    assert outline.environments == ["laptop", "server"]
    assert outline.loose_notices == []
    # one fold per result that has notices, each holding that result's notices
    assert len(outline.details) == len(results)
    for (summary, items), result in zip(outline.details, results, strict=True):
        assert summary.startswith(f"{result.operation} ")
        assert len(items) == len(result.errors) + len(result.warnings)
        assert all(item.startswith(("warning: ", "error: ")) for item in items)


def test_report_honours_unit_and_plain() -> None:
    results = ResultSet.load(FIXTURE)
    kib = _outline(html_report(results, unit="KiB/s"))
    mibit = _outline(html_report(results, unit="Mibit/s", crown="*", tie="~"))
    assert any("KiB/s" in cell for cell in kib.cells)
    assert not any("Mibit/s" in cell for cell in kib.cells)
    assert any("Mibit/s" in cell for cell in mibit.cells)
    document = html_report(results, unit="Mibit/s", crown="*", tie="~")
    assert not any(cell.endswith(CROWN) for cell in _outline(document).cells)
    assert TIE not in document
    assert "*: fastest in its column" in _outline(document).legends[0]


def test_cli_report_html_honours_unit_plain_and_by(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    args = ["report", str(FIXTURE), "--html", str(target), "--unit", "Mibit/s", "--plain"]
    assert main([*args, "--by", "probe"]) == 0
    outline = _outline(target.read_text(encoding="utf-8"))
    assert any("Mibit/s" in cell for cell in outline.cells)
    assert outline.legends[0].startswith("*: fastest")


def test_repr_html_shows_tables_and_notices() -> None:
    summary = ResultSet.load(FIXTURE)._repr_html_()
    assert "<table>" in summary
    assert "warning: upload 4 × 1 KiB on memory://v1fixture" in summary
    assert "error: download" in summary
    assert ResultSet([])._repr_html_() == "<p>(no results)</p>"


def test_run_command_has_placeholders_never_option_values() -> None:
    results = ResultSet.load(FIXTURE)
    remote = [
        attrs.evolve(result, url="s3://bucket/dir", protocol="s3", backend="obstore")
        for result in results
    ]
    command = run_command(remote)
    assert command == (
        "storeprobe run s3://bucket/dir --streams 1 --workload 4x1KiB --repeats 2 "
        "--client obstore --label fixture-machine --seed 0 -o KEY=..."
    )
    assert run_command(results).endswith("--seed 0")  # memory:// needs no options


def test_sentinel_secrets_never_reach_the_html() -> None:
    MemoryFileSystem.store.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        probe = Probe.from_url("memory://secrets", SENTINELS, streams=2, repeats=1)
        results = probe.run(WORKLOADS)
    document = html_report(results, command=run_command(results))
    for secret in _leaves(SENTINELS):
        assert secret not in document
    assert "SENTINEL" not in document


def test_cli_report_writes_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "report.html"
    assert main(["report", str(FIXTURE), "--html", str(target)]) == 0
    assert f"HTML report written to {target}" in capsys.readouterr().err
    document = target.read_text(encoding="utf-8")
    assert "<svg" in document
    assert "storeprobe run memory://v1fixture" in document


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    """A real browser draws the report offline to a screenshot that is not blank."""
    chromium = shutil.which("chromium")
    assert chromium is not None, "chromium is missing: tests/setup.sh installs it (apt)"
    page = tmp_path / "report.html"
    page.write_text(_report(), encoding="utf-8")
    shot = tmp_path / "report.png"
    started = time.monotonic()
    run = subprocess.run(
        [
            chromium,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1280,2000",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert shot.is_file(), f"no screenshot after {elapsed:.1f} s: {run.stderr[-2000:]}"
    import matplotlib.image

    pixels = np.asarray(matplotlib.image.imread(shot))
    assert pixels.shape[:2] == (2000, 1280)
    colours = np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)
    assert len(colours) > 50  # text, tables and the charts' colours, not one blank fill
    assert float(pixels.var()) > 0
    # the chart's blue bars (Okabe-Ito #0072B2) made it onto the page
    blue = np.array([0x00, 0x72, 0xB2]) / 255
    assert np.any(np.all(np.abs(pixels[..., :3] - blue) < 0.02, axis=-1))
