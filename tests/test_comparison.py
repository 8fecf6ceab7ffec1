"""storeprobe.comparison and `storeprobe compare`: exact verdicts on constructed Results."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from statistics import NormalDist

import pytest

from storeprobe import (
    Code,
    ConfigurationError,
    Environment,
    Notice,
    Result,
    Sample,
    Step,
    Workload,
    dump_results,
)
from storeprobe.cli import main
from storeprobe.comparison import (
    MIN_REPEATS,
    ProbeIdentity,
    Report,
    compare_results,
    parse_threshold,
    repeats_needed,
)
from storeprobe.render import REGRESSED, render_regressions

SMALL = Workload.small()  # 4 MiB: 1 s is 4 MiB/s


def env(label: str | None = None, hostname: str = "h") -> Environment:
    return Environment(hostname=hostname, cpu_count=2, platform="p", python="3.11", label=label)


def result(
    seconds: Sequence[float],
    *,
    workload: Workload = SMALL,
    operation: str = "upload",
    url: str = "s3://bucket/dir",
    backend: str = "obstore",
    streams: int = 1,
    label: str | None = None,
    hostname: str = "h",
    errors: int = 0,
    step: Step | None = None,
) -> Result:
    """One repeat per entry of ``seconds``, each moving the whole workload."""
    return Result(
        operation=operation,  # type: ignore[arg-type]
        workload=workload,
        url=url,
        protocol="s3",
        backend=backend,
        streams=streams,
        effective_streams=streams,
        strategy="objects",
        samples=[
            Sample(
                nbytes=workload.total_bytes,
                elapsed_ns=round(s * 1e9),
                latencies_ns=[1],
                max_in_flight=streams,
            )
            for s in seconds
        ],
        errors=[
            Notice(code=Code.TIMEOUT, message="timed out", fix="wait", repeat=i + 1)
            for i in range(errors)
        ],
        environment=env(label, hostname),
        step=step,
    )


def only(report: Report) -> object:
    assert len(report.rows) == 1, report.rows
    return report.rows[0]


# -- verdicts ----------------------------------------------------------------------------
def test_twice_as_slow_is_slower_exactly_and_regressed() -> None:
    report = compare_results([result([1.0, 1.0, 1.0])], [result([2.0, 2.0, 2.0])], fail_slower=0.05)
    row = report.rows[0]
    assert row.base_median == pytest.approx(4 * 1024**2)
    assert row.new_median == pytest.approx(2 * 1024**2)
    assert (row.ratio, row.low, row.high) == (0.5, 0.5, 0.5)
    assert row.verdict == "slower"
    assert row.regressed
    assert report.failed
    assert report.regressions == (row,)
    assert row.unit == "B/s"


def test_twice_as_fast_is_faster_and_never_a_regression() -> None:
    report = compare_results([result([1.0, 1.0, 1.0])], [result([0.5, 0.5, 0.5])], fail_slower=0.05)
    row = report.rows[0]
    assert (row.ratio, row.verdict, row.regressed) == (2.0, "faster", False)
    assert not report.failed


def test_the_same_figures_are_no_significant_difference() -> None:
    report = compare_results([result([1.0, 1.01, 1.02])], [result([1.0, 1.01, 1.02])])
    row = report.rows[0]
    assert row.ratio == 1.0
    assert row.low is not None
    assert row.high is not None
    assert row.low < 1 < row.high
    assert row.verdict == "no significant difference"
    assert not row.regressed


def test_slower_within_the_threshold_is_slower_but_not_regressed() -> None:
    report = compare_results([result([1.0] * 3)], [result([1 / 0.97] * 3)], fail_slower=0.05)
    row = report.rows[0]
    assert row.ratio == pytest.approx(0.97)
    assert row.verdict == "slower"
    assert not row.regressed
    assert not report.failed


def test_without_a_threshold_nothing_regresses() -> None:
    report = compare_results([result([1.0] * 3)], [result([10.0] * 3)])
    assert report.rows[0].verdict == "slower"
    assert not report.rows[0].regressed
    assert not report.failed


# Exact rates: a 950 000 000-byte object in 0.95 s is 1e9 B/s, in 1 s 9.5e8 B/s, so the
# ratio is the double nearest 0.95, the same as 1 - 0.05.
BIG = Workload(count=1, size=950_000_000)


def boundary(new_ns: int) -> Report:
    def exact(elapsed_ns: int) -> Result:
        return Result(
            operation="upload",
            workload=BIG,
            url="s3://bucket/dir",
            protocol="s3",
            backend="obstore",
            streams=1,
            effective_streams=1,
            strategy="objects",
            samples=[
                Sample(nbytes=BIG.total_bytes, elapsed_ns=elapsed_ns, latencies_ns=[1])
                for _ in range(3)
            ],
            environment=env(),
        )

    return compare_results([exact(950_000_000)], [exact(new_ns)], fail_slower=0.05)


def test_slower_by_exactly_the_threshold_is_not_a_regression() -> None:
    row = boundary(1_000_000_000).rows[0]
    assert row.ratio == row.high == 1 - 0.05
    assert row.verdict == "slower"
    assert not row.regressed  # "more than 5 %": 5 % itself passes


def test_slower_by_a_hair_more_than_the_threshold_is_a_regression() -> None:
    row = boundary(1_000_000_001).rows[0]
    assert row.high is not None
    assert row.high < 1 - 0.05
    assert row.regressed


def test_an_interval_reaching_above_the_threshold_is_not_a_regression() -> None:
    # new rates 0.9, 0.9, 0.99 of base: median 0.9, but a quarter of the resampled
    # medians are 0.99, so the interval's upper bound is 0.99: not beyond 0.95
    base = result([1.0] * 3)
    new = result([1 / 0.9, 1 / 0.9, 1 / 0.99])
    row = compare_results([base], [new], fail_slower=0.05).rows[0]
    assert row.ratio == pytest.approx(0.9)
    assert row.high == pytest.approx(0.99)
    assert row.verdict == "slower"
    assert not row.regressed


def test_metadata_probes_compare_operations_per_second() -> None:
    workload = Workload(count=1000, size=1, name="1000 × 0 B")
    base = result([0.5] * 3, workload=workload, operation="head")
    new = result([1.0] * 3, workload=workload, operation="head")
    row = compare_results([base], [new], fail_slower=0.1).rows[0]
    assert row.unit == "ops/s"
    assert (row.base_median, row.new_median, row.ratio) == (2000.0, 1000.0, 0.5)
    assert row.regressed
    assert "ops/s" in render_regressions(compare_results([base], [new]), "markdown")


# -- too few repeats ------------------------------------------------------------------------
def test_fewer_than_three_repeats_is_inconclusive_and_says_how_many() -> None:
    report = compare_results([result([1.0, 1.0])], [result([10.0, 10.0, 10.0])], fail_slower=0.05)
    row = report.rows[0]
    assert row.verdict == "inconclusive"
    assert (row.low, row.high) == (None, None)
    assert row.ratio == pytest.approx(0.1)  # the point estimate is still shown
    assert not row.regressed
    assert not report.failed
    assert (row.base_repeats, row.new_repeats) == (2, 3)
    assert row.repeats_needed == MIN_REPEATS  # no spread seen: the minimum
    text = report.render("text")
    assert "inconclusive: 2 and 3 repeats; a verdict needs at least 3 on each side" in text


def test_a_probe_whose_repeats_all_failed_is_inconclusive() -> None:
    report = compare_results([result([1.0] * 3)], [result([], errors=3)], fail_slower=0.05)
    row = report.rows[0]
    assert (row.verdict, row.new_repeats, row.new_median, row.ratio) == (
        "inconclusive",
        0,
        None,
        None,
    )
    assert "failed" in report.render("markdown")
    json.loads(report.render("json"))


def test_repeats_needed_follows_the_spread() -> None:
    rates = [1.0, 1.2, 0.8, 1.1, 0.9]
    mean = sum(rates) / 5
    cv = math.sqrt(sum((r - mean) ** 2 for r in rates) / 4) / mean
    z = NormalDist().inv_cdf(0.975)
    # one side without spread: the other side's is used for both
    expected = math.ceil((z / 0.05) ** 2 * math.pi / 2 * 2 * cv**2)
    assert repeats_needed([1.0], rates, resolution=0.05, confidence=0.95) == expected
    both = math.ceil((z / 0.05) ** 2 * math.pi / 2 * 2 * cv**2)
    assert repeats_needed(rates, rates, resolution=0.05, confidence=0.95) == both
    assert repeats_needed([1.0], [2.0], resolution=0.05, confidence=0.95) == MIN_REPEATS
    assert repeats_needed([1.0] * 3, [1.0] * 3, resolution=0.05, confidence=0.95) == MIN_REPEATS


def test_inconclusive_with_spread_names_the_repeats_the_spread_needs() -> None:
    base = result([1.0, 1.25])
    new = result([1.0, 1.0, 1.0])
    row = compare_results([base], [new], fail_slower=0.05).rows[0]
    assert row.verdict == "inconclusive"
    assert row.repeats_needed > MIN_REPEATS
    assert row.repeats_needed == 60  # cv 0.157 and 0: ⌈(1.96 / 0.05)² · π/2 · 0.157²⌉
    assert str(row).endswith(
        "inconclusive: 2 and 3 repeats; a verdict needs at least 3 on each side, about 60 to "
        "tell 5% apart at this spread"
    )
    assert row.to_dict()["resolution"] == 0.05


# -- matching ---------------------------------------------------------------------------------
def test_unmatched_probes_are_listed_on_each_side() -> None:
    base = [
        result([1.0] * 3),
        result([1.0] * 3, operation="download"),
    ]
    new = [
        result([1.0] * 3),
        result([1.0] * 3, streams=4),
    ]
    report = compare_results(base, new)
    assert [row.identity.probe for row in report.rows] == ["upload small"]
    assert [(i.probe, i.streams) for i in report.unmatched_base] == [("download small", 1)]
    assert [(i.probe, i.streams) for i in report.unmatched_new] == [("upload small", 4)]
    text = report.render("text")
    assert "only in base (no match in new): 1 probe" in text
    assert "only in new (no match in base): 1 probe" in text


@pytest.mark.parametrize(
    "changed",
    [
        {"url": "s3://other/dir"},
        {"backend": "s3fs"},
        {"workload": Workload(count=256, size=16 * 1024)},  # same shape, another label
        {"workload": Workload.large()},
        {"streams": 2},
        {"operation": "download"},
        {"label": "ec2"},
    ],
)
def test_each_part_of_the_identity_keeps_probes_apart(changed: dict[str, object]) -> None:
    report = compare_results([result([1.0] * 3)], [result([1.0] * 3, **changed)])  # type: ignore[arg-type]
    assert report.rows == ()
    assert len(report.unmatched_base) == len(report.unmatched_new) == 1


def test_the_payload_seed_and_the_host_do_not_matter_and_no_label_matches_no_label() -> None:
    base = result([1.0] * 3, workload=Workload.small(seed=1), hostname="laptop")
    new = result([2.0] * 3, workload=Workload.small(seed=2), hostname="ci-runner")
    report = compare_results([base], [new])
    assert len(report.rows) == 1
    assert report.rows[0].identity.environment is None
    labelled = compare_results(
        [result([1.0] * 3, label="ec2")], [result([1.0] * 3, label="ec2", hostname="x")]
    )
    assert labelled.rows[0].identity.environment == "ec2"


def test_several_results_of_one_probe_on_a_side_are_pooled() -> None:
    base = [result([1.0, 1.0]), result([1.0])]  # one file appended to twice
    report = compare_results(base, [result([2.0] * 3)], fail_slower=0.05)
    row = report.rows[0]
    assert row.base_repeats == 3
    assert row.verdict == "slower"
    assert row.regressed


def backup_step() -> Step:
    return Step(
        scenario="backup-restore",
        method="files",
        kind="backup",
        number=1,
        version=0,
        dataset="tree",
        dataset_bytes=10,
        changed_bytes=10,
        moved_bytes=10,
        incremental=False,
    )


def test_backup_steps_are_excluded_and_counted() -> None:
    step = backup_step()
    report = compare_results(
        [result([1.0] * 3), result([1.0], step=step)], [result([1.0] * 3), result([2.0], step=step)]
    )
    assert len(report.rows) == 1
    assert report.excluded_steps == 2
    assert (report.unmatched_base, report.unmatched_new) == ((), ())
    assert "2 backup-scenario steps not compared" in report.render("markdown")
    assert report.to_dict()["excluded_steps"] == 2


def test_identity_of_a_result() -> None:
    identity = ProbeIdentity.of(result([1.0], backend="s3fs", streams=4, label="home"))
    assert identity.target == "s3://bucket/dir (s3fs)"
    assert str(identity) == "upload small on s3://bucket/dir (s3fs), 4 streams [home]"


# -- thresholds and bad input -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "value"),
    [("5%", 0.05), ("0.05", 0.05), ("2.5%", 0.025), (" 10 % ", 0.10), (".5", 0.5), ("99%", 0.99)],
)
def test_thresholds_are_percentages_or_fractions(text: str, value: float) -> None:
    assert parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize(
    "text", ["5", "-5%", "abc", "0", "0%", "100%", "1", "1.5", "5 percent", ""]
)
def test_bad_thresholds_name_the_accepted_forms(text: str) -> None:
    with pytest.raises(ConfigurationError, match=r"'5%' or a fraction such as '0\.05'"):
        parse_threshold(text)


@pytest.mark.parametrize("value", [0, 1, 1.5, -0.05, True, "5%"])
def test_compare_results_refuses_a_bad_fail_slower(value: object) -> None:
    with pytest.raises(ConfigurationError, match="fail_slower"):
        compare_results([], [], fail_slower=value)  # type: ignore[arg-type]


def test_compare_results_refuses_what_is_not_a_result() -> None:
    with pytest.raises(ConfigurationError, match="Results"):
        compare_results(["upload small"], [])  # type: ignore[list-item]


# -- rendering ------------------------------------------------------------------------------------
@pytest.fixture
def mixed() -> Report:
    base = [
        result([1.0] * 3),
        result([1.0] * 3, operation="download"),
        result([1.0] * 3, streams=8),
    ]
    new = [
        result([2.0] * 3),
        result([0.5] * 3, operation="download"),
        result([1.0] * 3, streams=16),
    ]
    return compare_results(base, new, fail_slower=0.05)


def test_markdown_marks_regressions_and_states_the_rule(mixed: Report) -> None:
    text = mixed.render("markdown")
    lines = [line for line in text.splitlines() if line.startswith("| s3://")]
    assert f"slower {REGRESSED}" in lines[0]
    assert "4096.00" in lines[0]
    assert "2048.00" in lines[0]
    assert "0.500" in lines[0]
    assert "faster" in lines[1]
    assert REGRESSED not in lines[1]
    assert "95% interval" in text
    assert "slower by more than 5%" in text
    assert "new against base: 2 probes compared, 1 regressed" in text


def test_units_follow_the_option(mixed: Report) -> None:
    assert "| MiB/s |" in mixed.render("markdown", unit="MiB/s")
    with pytest.raises(ConfigurationError):
        mixed.render("markdown", unit="GB/s")
    with pytest.raises(ConfigurationError, match="json"):
        mixed.render("yaml")


def test_csv_has_one_row_per_probe_with_its_status(mixed: Report) -> None:
    rows = list(csv.DictReader(io.StringIO(mixed.render("csv"))))
    assert [row["status"] for row in rows] == [
        "compared",
        "compared",
        "only-in-base",
        "only-in-new",
    ]
    assert rows[0]["verdict"] == "slower"
    assert rows[0]["regressed"] == "1"
    assert rows[0]["ratio"] == "0.5000"
    assert rows[0]["unit"] == "KiB/s"
    assert rows[0]["base"] == "4096.00"
    assert rows[2]["streams"] == "8"
    assert rows[2]["verdict"] == ""


def test_json_is_the_documented_dict(mixed: Report) -> None:
    document = json.loads(mixed.render("json"))
    assert document == mixed.to_dict()
    assert set(document) == {
        "schema",
        "version",
        "confidence",
        "fail_slower",
        "min_repeats",
        "failed",
        "rows",
        "unmatched_base",
        "unmatched_new",
        "excluded_steps",
    }
    assert document["schema"] == "storeprobe.comparison"
    assert document["version"] == 1
    assert document["failed"] is True
    assert document["fail_slower"] == 0.05
    first = document["rows"][0]
    assert first["verdict"] == "slower"
    assert first["regressed"] is True
    assert first["base_median"] == 4 * 1024**2
    assert first["unit"] == "B/s"
    assert document["unmatched_base"][0]["streams"] == 8


def test_html_and_text(mixed: Report) -> None:
    assert mixed.render("html").startswith("<table><caption>new against base")
    assert mixed._repr_html_() == mixed.render("html")
    assert str(mixed) == mixed.render("text")
    assert repr(mixed) == "<Report 2 compared, 1 regressed, 1 only in base, 1 only in new>"


# -- the command line ------------------------------------------------------------------------
def write(path: Path, results: list[Result]) -> str:
    path.write_text(dump_results(results))
    return str(path)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    return {
        "base": write(tmp_path / "base.json", [result([1.0] * 3)]),
        "slower": write(tmp_path / "slower.json", [result([2.0] * 3)]),
        "same": write(tmp_path / "same.json", [result([1.0, 1.01, 1.02])]),
        "faster": write(tmp_path / "faster.json", [result([0.5] * 3)]),
    }


def test_cli_exits_1_on_a_regression(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", files["base"], files["slower"], "--fail-slower", "5%"]) == 1
    out, err = capsys.readouterr()
    assert f"slower {REGRESSED}" in out
    assert "1 of 1 probes slower by more than 5%" in err


@pytest.mark.parametrize(
    ("new", "threshold"), [("faster", "5%"), ("same", "0.05"), ("slower", None)]
)
def test_cli_exits_0_without_a_regression(
    files: dict[str, str], new: str, threshold: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = [] if threshold is None else ["--fail-slower", threshold]
    assert main(["compare", files["base"], files[new], *extra]) == 0
    assert "new against base" in capsys.readouterr().out


@pytest.mark.parametrize("bad", ["5", "-5%", "abc", "150%"])
def test_cli_exits_2_on_a_bad_threshold(
    files: dict[str, str], bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", files["base"], files["slower"], f"--fail-slower={bad}"]) == 2
    err = capsys.readouterr().err
    assert "'5%'" in err
    assert "'0.05'" in err


def test_cli_exits_2_on_a_missing_or_bad_file(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", files["base"], str(tmp_path / "missing.json")]) == 2
    assert "no such results file" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{}")
    assert main(["compare", str(tmp_path / "bad.json"), files["base"]]) == 2
    with pytest.raises(SystemExit) as exited:
        main(["compare", files["base"]])
    assert exited.value.code == 2


@pytest.mark.parametrize("fmt", ["markdown", "csv", "json", "html", "text"])
def test_cli_formats_parse(
    files: dict[str, str], fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", files["base"], files["slower"], "--format", fmt]) == 0
    out = capsys.readouterr().out
    if fmt == "json":
        assert json.loads(out)["rows"][0]["verdict"] == "slower"
    elif fmt == "csv":
        assert next(csv.DictReader(io.StringIO(out)))["ratio"] == "0.5000"
    else:
        assert "0.500" in out


def test_cli_exits_2_when_only_backup_steps_would_match(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write(tmp_path / "base.json", [result([1.0], step=backup_step())])
    new = write(tmp_path / "new.json", [result([2.0], step=backup_step())])
    assert main(["compare", base, new, "--fail-slower", "5%"]) == 2
    err = capsys.readouterr().err
    assert "0 compared (2 backup steps are never compared: one sample each)" in err


@pytest.mark.parametrize("threshold", [["--fail-slower", "5%"], []])
def test_cli_exits_2_when_nothing_matches(
    files: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    threshold: list[str],
) -> None:
    other = write(tmp_path / "other.json", [result([1.0] * 3, url="s3://other")])
    assert (
        main(["compare", files["base"], other, *threshold]) == 2
    )  # a gate never passes on nothing
    out, err = capsys.readouterr()
    assert "only in base" in out
    assert "only in new" in out
    assert "storeprobe: error: no probe of NEW matches one of BASE, 0 compared" in err
