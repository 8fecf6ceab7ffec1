"""storeprobe.comparison and `storeprobe compare`: exact verdicts on constructed Results."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from storeprobe import (
    Code,
    ConfigurationError,
    Environment,
    Notice,
    Result,
    Sample,
    Step,
    Subject,
    Workload,
    dump_results,
)
from storeprobe.cli import main
from storeprobe.comparison import ProbeIdentity, Report, compare_results, parse_threshold
from storeprobe.document import legacy_subject
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
        subject=legacy_subject(operation, workload, step=step is not None),
        workload=workload if step is None and operation in ("upload", "download") else None,
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


def history(seconds: Sequence[float], runs: int = 3, **kw: object) -> list[Result]:
    """``runs`` identical base runs (no spread between them: exact verdicts)."""
    return [result(seconds, **kw) for _ in range(runs)]  # type: ignore[arg-type]


# -- verdicts ----------------------------------------------------------------------------
def test_twice_as_slow_is_slower_exactly_and_regressed() -> None:
    report = compare_results(history([1.0] * 3), [result([2.0] * 3)], fail_slower=0.05)
    row = report.rows[0]
    assert row.base_median == pytest.approx(4 * 1024**2)
    assert row.new_median == pytest.approx(2 * 1024**2)
    assert (row.ratio, row.low, row.high) == pytest.approx((0.5, 0.5, 0.5), rel=1e-12)
    assert (row.base_runs, row.new_runs, row.base_repeats, row.new_repeats) == (3, 1, 9, 3)
    assert row.verdict == "slower"
    assert row.regressed
    assert report.failed
    assert report.regressions == (row,)
    assert row.unit == "B/s"


def test_twice_as_fast_is_not_slower_and_never_a_regression() -> None:
    report = compare_results(history([1.0] * 3), [result([0.5] * 3)], fail_slower=0.05)
    row = report.rows[0]
    assert row.ratio == pytest.approx(2.0, rel=1e-12)
    assert (row.verdict, row.regressed) == ("not slower", False)
    assert not report.failed


def test_runs_that_differ_widen_the_interval() -> None:
    # the same new run: slower against steady base runs, inconclusive against base runs
    # that differ from one another by ±20 % (each run's repeats agree closely)
    new = [result([1.3] * 3)]
    steady = compare_results(history([1.0] * 3, runs=4), new, fail_slower=0.05).rows[0]
    varied = [result([s] * 3) for s in (0.8, 1.2, 1.0, 0.85)]
    wide = compare_results(varied, new, fail_slower=0.05).rows[0]
    assert steady.verdict == "slower"
    assert wide.verdict == "inconclusive"
    assert wide.low is not None
    assert wide.high is not None
    assert wide.low < 0.95 < wide.high
    assert wide.run_spread is not None
    assert wide.run_spread > 0.15


def test_slower_within_the_threshold_is_not_slower() -> None:
    report = compare_results(history([1.0] * 3), [result([1 / 0.97] * 3)], fail_slower=0.05)
    row = report.rows[0]
    assert row.ratio == pytest.approx(0.97)
    assert row.verdict == "not slower"
    assert not row.regressed
    assert not report.failed


def test_without_a_threshold_slower_is_shown_but_nothing_regresses() -> None:
    report = compare_results(history([1.0] * 3), [result([10.0] * 3)])
    assert report.rows[0].verdict == "slower"
    assert report.rows[0].threshold == 0.0
    assert not report.rows[0].regressed
    assert not report.failed


# Exact rates: a 950 000 000-byte object in 0.95 s is 1e9 B/s, in 1 s 9.5e8 B/s, so the
# ratio is the double nearest 0.95, the same as 1 - 0.05.
BIG = Workload(count=1, size=950_000_000)


def boundary(new_ns: int) -> Report:
    def exact(elapsed_ns: int) -> Result:
        return Result(
            operation="upload",
            subject=Subject.of(BIG),
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

    base = [exact(950_000_000) for _ in range(3)]
    return compare_results(base, [exact(new_ns)], fail_slower=0.05)


def test_slower_by_exactly_the_threshold_is_not_a_regression() -> None:
    row = boundary(1_000_000_000).rows[0]
    assert row.ratio == pytest.approx(1 - 0.05, rel=1e-12)
    assert row.verdict == "not slower"  # "more than 5 %": 5 % itself passes
    assert not row.regressed


def test_slower_by_a_hair_more_than_the_threshold_is_a_regression() -> None:
    row = boundary(1_000_000_100).rows[0]
    assert row.high is not None
    assert row.high < 1 - 0.05
    assert row.regressed


def test_metadata_probes_compare_operations_per_second() -> None:
    workload = Workload(count=1000, size=1, name="1000 × 0 B")
    base = history([0.5] * 3, workload=workload, operation="head")
    new = [result([1.0] * 3, workload=workload, operation="head")]
    row = compare_results(base, new, fail_slower=0.1).rows[0]
    assert row.unit == "ops/s"
    assert (row.base_median, row.new_median, row.ratio) == pytest.approx((2000.0, 1000.0, 0.5))
    assert row.regressed
    assert "ops/s" in render_regressions(compare_results(base, new), "markdown")


# -- too little evidence ----------------------------------------------------------------------
def test_one_base_run_is_inconclusive_whatever_the_difference() -> None:
    # the false alarms of issue 25: one base run of 3 repeats says nothing of how much a
    # second run differs from a first
    report = compare_results([result([1.0] * 3)], [result([10.0] * 3)], fail_slower=0.05)
    row = report.rows[0]
    assert row.verdict == "inconclusive"
    assert (row.low, row.high) == (None, None)
    assert row.ratio == pytest.approx(0.1)  # the point estimate is still shown
    assert not row.regressed
    assert not report.failed
    assert report.inconclusive == (row,)
    assert (row.base_runs, row.new_runs) == (1, 1)
    text = report.render("text")
    assert "inconclusive: 1 base run and 1 new run: how much separate runs differ is unknown" in (
        text
    )


def test_one_run_each_with_spread_names_the_least_runs_that_would_decide() -> None:
    row = compare_results(
        [result([1.0, 1.1, 0.9])], [result([2.0, 2.2, 1.8])], fail_slower=0.05
    ).rows[0]
    assert row.verdict == "inconclusive"
    assert row.base_runs_needed == 3
    assert str(row).endswith(
        "inconclusive (1 base run and 1 new run: how much separate runs differ is unknown; at "
        f"least 3 base runs in all or 3 new runs in all would decide it at a run-to-run spread "
        f"of {row.run_spread:.1%})"
    )
    assert row.to_dict()["base_runs_needed"] == 3


def test_a_probe_whose_repeats_all_failed_is_inconclusive() -> None:
    report = compare_results(history([1.0] * 3), [result([], errors=3)], fail_slower=0.05)
    row = report.rows[0]
    assert (row.verdict, row.new_repeats, row.new_median, row.ratio) == (
        "inconclusive",
        0,
        None,
        None,
    )
    assert "no successful repeat" in row.reason
    assert "failed" in report.render("markdown")
    json.loads(report.render("json"))


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


def test_each_result_of_a_probe_is_one_run() -> None:
    base = [result([1.0, 1.0]), result([1.0])]  # one file appended to twice: two runs
    report = compare_results(base, [result([2.0] * 3)], fail_slower=0.05)
    row = report.rows[0]
    assert (row.base_runs, row.base_repeats) == (2, 3)
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
        *history([1.0] * 3),
        *history([1.0] * 3, operation="download"),
        *history([1.0] * 3, streams=8),
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
    assert "not slower" in lines[1]
    assert REGRESSED not in lines[1]
    assert "| 3 + 1 |" in lines[0]
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
        "failed",
        "inconclusive",
        "rows",
        "unmatched_base",
        "unmatched_new",
        "excluded_steps",
    }
    assert document["schema"] == "storeprobe.comparison"
    assert document["version"] == 2
    assert document["failed"] is True
    assert document["fail_slower"] == 0.05
    first = document["rows"][0]
    assert first["verdict"] == "slower"
    assert first["regressed"] is True
    assert first["base_median"] == 4 * 1024**2
    assert first["unit"] == "B/s"
    assert (first["base_runs"], first["new_runs"], first["threshold"]) == (3, 1, 0.05)
    assert first["reason"] == "3 base runs and 1 new run: the whole interval lies below 0.950"
    assert document["unmatched_base"][0]["streams"] == 8


def test_html_and_text(mixed: Report) -> None:
    assert mixed.render("html").startswith("<table><caption>new against base")
    assert mixed._repr_html_() == mixed.render("html")
    assert str(mixed) == mixed.render("text")
    assert repr(mixed) == (
        "<Report 2 compared, 1 regressed, 0 inconclusive, 1 only in base, 1 only in new>"
    )


# -- the command line ------------------------------------------------------------------------
def write(path: Path, results: list[Result]) -> str:
    path.write_text(dump_results(results))
    return str(path)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    return {
        "base": write(tmp_path / "base.json", history([1.0] * 3)),
        "one": write(tmp_path / "one.json", [result([1.0] * 3)]),
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
    assert main(["compare", files["base"]]) == 2
    assert "'storeprobe compare BASE... NEW'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["compare"])
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


def test_cli_takes_base_runs_from_several_files_and_a_baseline_directory(
    tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [write(tmp_path / f"run{i}.json", [result([1.0] * 3)]) for i in range(3)]
    assert main(["compare", *runs, files["slower"], "--fail-slower", "5%"]) == 1
    assert "| 3 + 1 |" in capsys.readouterr().out
    directory = tmp_path / "main"
    directory.mkdir()
    for i in range(4):
        write(directory / f"{i:04d}.json", [result([1.0] * 3)])
    assert (
        main(["compare", "--baseline", str(directory), files["slower"], "--fail-slower", "5%"]) == 1
    )
    assert "| 4 + 1 |" in capsys.readouterr().out
    # --baseline and base files together: all are base runs
    assert main(["compare", "--baseline", str(directory), runs[0], files["same"]]) == 0
    assert "| 5 + 1 |" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("problem", "message"),
    [("missing", "is not a directory"), ("empty", "holds no *.json results file")],
)
def test_cli_refuses_a_baseline_that_is_not_a_directory_of_runs(
    tmp_path: Path,
    files: dict[str, str],
    problem: str,
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    directory = tmp_path / problem
    if problem == "empty":
        directory.mkdir()
    assert main(["compare", "--baseline", str(directory), files["slower"]]) == 2
    assert message in capsys.readouterr().err


def test_cli_one_base_run_is_inconclusive_exit_0_unless_asked_to_fail(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # ten times slower, but one base run: no evidence of how much runs differ
    assert main(["compare", files["one"], files["slower"], "--fail-slower", "5%"]) == 0
    out, err = capsys.readouterr()
    assert "inconclusive: 1 base run and 1 new run" in out
    assert "storeprobe: 1 of 1 probes inconclusive, not failing" in err
    assert (
        main(
            ["compare", files["one"], files["slower"], "--fail-slower", "5%", "--fail-inconclusive"]
        )
        == 3
    )
    assert "failing (--fail-inconclusive)" in capsys.readouterr().err
    assert main(["compare", files["base"], files["same"], "--fail-inconclusive"]) == 3
    assert main(["compare", files["base"], files["faster"], "--fail-inconclusive"]) == 0
