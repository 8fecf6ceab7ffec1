"""Price sheets and bills: exact arithmetic on constructed and real Results, every shipped
sheet, bad sheets named field by field, a user's own sheet, and ``backup --prices``."""

from __future__ import annotations

import json
from decimal import Decimal, localcontext
from pathlib import Path

import pytest

from storeprobe import Environment, Probe, Result, Sample, Step, Workload
from storeprobe.cli import main
from storeprobe.cost import (
    Cost,
    Price,
    PriceSheet,
    RequestClass,
    load_prices,
    price_sheet_names,
    price_sheets,
    scenario_cost,
)
from storeprobe.dataset import Sizes, Tree
from storeprobe.document import legacy_subject
from storeprobe.errors import ConfigurationError
from storeprobe.render import money
from storeprobe.request import KINDS, Kind
from storeprobe.resultset import ResultSet
from tests.helpers import StepClock, tree

TREE_SMALL = Tree.generate(24, Sizes.fixed("4KiB"), seed=4)

GiB = 1 << 30
MiB = 1 << 20
SHIPPED = {
    "aws-s3",
    "azure-blob",
    "backblaze-b2",
    "cloudflare-r2",
    "digitalocean-spaces",
    "gcs",
    "idrive-e2",
    "wasabi",
}


def _sample(kinds: dict[str, int], received: int = 0) -> Sample:
    return Sample(
        nbytes=received,
        elapsed_ns=1_000,
        latencies_ns=[1] * sum(kinds.values()),
        requests_by_kind=kinds,
        bytes_received=received,
    )


def _result(
    *samples: Sample, space: int | None = None, number: int = 1, kind: str = "backup"
) -> Result:
    step = (
        None
        if space is None
        else Step(
            scenario="backup-restore",
            method="files",
            kind=kind,  # type: ignore[arg-type]
            number=number,
            version=number - 1,
            dataset="tree",
            dataset_bytes=1,
            changed_bytes=1,
            moved_bytes=1,
            incremental=number > 1,
            space_used=space,
        )
    )
    return Result(
        operation="backup" if step else "download",
        subject=legacy_subject("backup", Workload.small(), step=step is not None),
        workload=None if step else Workload.small(),
        url="file:///t",
        protocol="file",
        backend="local",
        streams=1,
        effective_streams=1,
        strategy="objects",
        samples=samples,
        environment=Environment(hostname="h", cpu_count=2, platform="p", python="3.11"),
        step=step,
    )


# -- exact bills -------------------------------------------------------------------------------
def test_a_step_bill_is_exact_at_s3_prices() -> None:
    kinds = {
        "put": 2500,
        "list": 2,
        "create-multipart": 1,
        "put-part": 52,
        "complete-multipart": 1,
        "get": 1000,
        "head": 250,
        "delete": 9,
    }
    result = _result(_sample(kinds, received=5 * GiB + MiB), space=3 * GiB)
    cost = result.cost(PriceSheet.shipped("aws-s3"))
    assert cost.requests == {"put-copy-post-list": 2556, "get-and-other": 1250, "free": 9}
    assert cost.request_costs == {
        "put-copy-post-list": Decimal("0.01278"),  # 2556 × 0.005 / 1000
        "get-and-other": Decimal("0.0005"),  # 1250 × 0.0004 / 1000
        "free": Decimal(0),
    }
    assert cost.egress_bytes == 5 * GiB + MiB
    assert cost.egress == Decimal("0.450087890625")  # (5 + 1/1024) GiB × 0.09
    assert cost.stored_bytes == 3 * GiB
    assert cost.storage_per_month == Decimal("0.069")  # 3 GiB × 0.023
    assert cost.minimum_storage == 0
    assert cost.requests_cost == Decimal("0.01328")
    assert cost.transfer == Decimal("0.463367890625")
    assert cost.total == Decimal("0.532367890625")
    assert cost.complete
    assert cost.currency == "USD"
    assert cost.to_dict()["total"] == "0.532367890625"
    assert str(cost) == "USD 0.532 at aws-s3: requests 0.0133, egress 0.450, storage 0.0690/month"


def test_every_repeat_is_billed_and_a_seed_probe_stores_nothing() -> None:
    result = _result(_sample({"get": 600}, received=GiB), _sample({"get": 400}, received=GiB))
    cost = result.cost(PriceSheet.shipped("gcs"))
    assert result.bytes_received == 2 * GiB
    assert cost.requests["class-b"] == 1000
    assert cost.request_costs["class-b"] == Decimal("0.0004")
    assert cost.egress == Decimal("0.24")  # 2 GiB × 0.12
    assert cost.stored_bytes is None
    assert cost.storage_per_month is None
    assert cost.total == Decimal("0.2404")


def test_b2_bills_listings_as_class_c_and_uploads_free() -> None:
    cost = _result(_sample({"list": 10, "put": 5000, "head": 5000}), space=0).cost(
        PriceSheet.shipped("backblaze-b2")
    )
    assert cost.request_costs == {
        "class-a": Decimal(0),
        "class-b": Decimal("0.002"),  # 5000 × 0.004 / 10 000
        "class-c": Decimal("0.00004"),  # 10 × 0.004 / 1000
    }
    assert cost.storage_per_month == 0


def test_a_minimum_storage_duration_bills_its_months() -> None:
    cost = _result(_sample({"put": 1}), space=1024 * GiB).cost(PriceSheet.shipped("wasabi"))
    assert cost.storage_per_month == Decimal("7.99")  # 1 TB = 1024 GB at $7.99 per TB
    assert cost.minimum_storage == Decimal("23.97")  # 90 days = 3 months
    assert cost.requests_cost == 0
    assert cost.egress == 0


def test_unknown_prices_are_named_and_left_out_of_the_sums() -> None:
    azure = PriceSheet.shipped("azure-blob")
    cost = _result(_sample({"put": 1000, "head": 3, "get": 1000}, received=GiB), space=GiB).cost(
        azure
    )
    assert cost.unpriced == ("requests.other", "egress")
    assert not cost.complete
    assert cost.request_costs["other"] is None
    assert cost.egress is None
    assert cost.total == Decimal("0.0055") + Decimal("0.00044") + Decimal("0.018")
    # a part not used is not unpriced, whatever its price
    assert _result(_sample({"put": 1}), space=0).cost(azure).complete


def test_a_kind_newer_than_the_sheet_is_counted_and_unpriced() -> None:
    cost = _result(_sample({"put": 1, "rename": 4})).cost(PriceSheet.shipped("aws-s3"))
    assert cost.requests["rename"] == 4
    assert cost.unpriced == ("requests.rename",)


def test_a_scenario_sums_requests_and_egress_and_stores_as_of_the_last_step() -> None:
    steps = [
        _result(_sample({"list": 1, "put": 1000}), space=GiB, number=1),
        _result(_sample({"list": 1, "put": 200}), space=2 * GiB, number=2),
        _result(_sample({"get": 1001}, received=GiB), space=2 * GiB, number=1, kind="restore"),
        _result(),  # a step that failed: no samples, no space measured
    ]
    r2 = PriceSheet.shipped("cloudflare-r2")
    total = scenario_cost(steps, r2)
    assert total.requests == {"class-a": 1202, "class-b": 1001, "free": 0}
    assert total.request_costs == {
        "class-a": Decimal("0.005409"),  # 1202 × 4.50 / 1 000 000
        "class-b": Decimal("0.00036036"),  # 1001 × 0.36 / 1 000 000
        "free": Decimal(0),
    }
    assert total.egress_bytes == GiB
    assert total.egress == 0
    assert total.stored_bytes == 2 * GiB
    assert total.storage_per_month == Decimal("0.030")
    assert total.total == Decimal("0.03576936")
    # the sum of the steps' one-off parts, and the last step's storage
    singles = [step.cost(r2) for step in steps[:3]]
    assert total.transfer == sum((c.transfer for c in singles), Decimal(0))
    assert total.storage_per_month == singles[-1].storage_per_month


def test_a_real_backup_is_billed_from_its_recorded_requests_and_space(tmp_path: Path) -> None:
    root = tmp_path / "target"
    root.mkdir()
    small = Tree.generate(5, Sizes.fixed("1KiB"), seed=1)
    probe = Probe.from_url(str(root), streams=1, clock=StepClock(10))
    backup, restore = probe.backup_restore(small, versions=1, method="files")
    assert backup.ok
    assert restore.ok
    assert backup.step is not None
    assert restore.step is not None
    s3 = PriceSheet.shipped("aws-s3")
    cost = backup.cost(s3)
    # 5 puts and a list; the HEADs of the two roots (rclone's, replayed by files)
    assert cost.requests == {"put-copy-post-list": 6, "get-and-other": 2, "free": 0}
    assert cost.request_costs["put-copy-post-list"] == Decimal("0.00003")
    space = backup.step.space_used
    assert space is not None
    assert space == small.total_bytes  # the five files, no manifest
    with localcontext() as context:
        context.prec = 60
        assert cost.storage_per_month == space * Decimal("0.023") / GiB
        received = restore.bytes_received
        assert received == restore.step.moved_bytes  # the 5 files
        assert restore.cost(s3).egress == received * Decimal("0.09") / GiB
    assert restore.cost(s3).requests["get-and-other"] == 6  # the root's HEAD and 5 GETs


def test_links_and_renames_are_counted_unpriced(tmp_path: Path) -> None:
    """A sheet need not place hard links and renames (file systems make them, object
    stores bill none); a bill that meets them names them unpriced instead of guessing."""
    versions = [TREE_SMALL, TREE_SMALL.evolve(seed=1)]
    results = Probe.from_url(str(tmp_path)).backup_restore(
        versions[0], versions=versions, method="rsnapshot", restore=[1]
    )
    second = results[1]
    assert second.samples[0].requests_by_kind["link"] > 0
    bill = second.cost(price_sheets()["aws-s3"])
    assert "requests.link" in bill.unpriced
    assert "requests.rename" in bill.unpriced
    assert not bill.complete


# -- shipped sheets ----------------------------------------------------------------------------
def test_every_shipped_sheet_loads_and_prices_every_kind_with_a_date_and_source() -> None:
    sheets = price_sheets()
    assert set(sheets) == set(price_sheet_names()) == SHIPPED
    for name, sheet in sheets.items():
        assert sheet.name == name
        assert sheet.currency == "USD"
        for kind in KINDS:
            if kind in (Kind.LINK, Kind.RENAME):  # file systems' own: no store bills them
                assert sheet.class_of(kind.value) is None, (name, kind)
            else:
                assert sheet.class_of(kind.value) is not None, (name, kind)
        for label, price in sheet.prices.items():
            assert price.source.startswith("https://"), (name, label)
            assert price.date <= sheet.date, (name, label)
            assert price.note, (name, label)  # what the source says, or why it is unknown
        assert sheet.source.startswith("https://")
    # the classes as each provider defines them
    assert sheets["aws-s3"].class_of("list") == sheets["aws-s3"].class_of("put")
    assert sheets["aws-s3"].class_of("head") == sheets["aws-s3"].class_of("get")
    assert sheets["backblaze-b2"].class_of("put") == sheets["backblaze-b2"].class_of("delete")
    for name in SHIPPED - {"backblaze-b2"}:  # B2 bills deletes with uploads: both free
        group = sheets[name].class_of("delete")
        assert group is not None, name
        assert group.per_1000.amount == 0, name
    assert sheets["wasabi"].minimum_storage_days == 90
    assert sheets["idrive-e2"].minimum_storage_days == 30
    assert [label for label, p in sheets["azure-blob"].prices.items() if not p.known] == [
        "requests.list-and-create-container",
        "requests.other",
        "egress",
    ]
    assert all(p.known for n, s in sheets.items() if n != "azure-blob" for p in s.prices.values())


def test_the_shipped_sheets_are_package_data_in_the_wheel() -> None:
    pyproject = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    assert 'packages = ["storeprobe"]' in pyproject  # hatch ships every file under it
    check = (Path(__file__).parent.parent / ".ci" / "wheel-check").read_text()
    assert "storeprobe/prices/" in check


# -- a user's own sheet, and bad ones ----------------------------------------------------------
USER_SHEET = """\
name = "my-minio"
provider = "Our lab"
product = "MinIO on the NAS"
currency = "EUR"
date = 2026-12-01
source = "https://example.org/our-prices"
gb_bytes = 1000000000
minimum_storage_days = 0

[storage]
per_gb_month = 0.001

[egress]
per_gb = 0.002
source = "https://example.org/transit"
date = 2026-11-01

[requests.writes]
kinds = ["put", "copy", "create-multipart", "put-part", "complete-multipart", "list"]
per_1000 = 0.01

[requests.reads]
kinds = ["get", "head"]
per_1000 = 0.001

[requests.free]
kinds = ["delete"]
per_1000 = 0
"""


def test_a_users_own_sheet_overrides_the_shipped_ones(tmp_path: Path) -> None:
    path = tmp_path / "lab.toml"
    path.write_text(USER_SHEET)
    sheet = load_prices(path)
    assert sheet == load_prices(str(path)) == PriceSheet.from_toml(path)
    assert sheet.name == "my-minio"
    assert sheet.currency == "EUR"
    assert sheet.egress_per_gb.source == "https://example.org/transit"
    assert str(sheet.egress_per_gb.date) == "2026-11-01"
    assert sheet.storage_per_gb_month.source == "https://example.org/our-prices"  # the sheet's
    cost = _result(_sample({"put": 100, "get": 100}, received=10**9), space=5 * 10**9).cost(sheet)
    assert cost.total == Decimal("0.001") + Decimal("0.0001") + Decimal("0.002") + Decimal("0.005")
    assert cost.currency == "EUR"


def _bad(text: str) -> str:
    old, new = text.split(" => ")
    return USER_SHEET.replace(old, new)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ('provider = "Our lab"\n => ', "provider is missing: the provider's name"),
        ("per_gb_month = 0.001 => ", "[storage] per_gb_month is missing: give the price per GB"),
        (
            "per_1000 = 0.001 => per_1000 = -0.001",
            "[requests.reads] per_1000 is -0.001: a price is a finite number ≥ 0",
        ),
        ('kinds = ["delete"] => kinds = []', "request kinds delete are in no class"),
        ('kinds = ["delete"] => kinds = ["delete", "get"]', "'get' is in both class"),
        ('kinds = ["delete"] => kinds = ["delete", "teleport"]', "names the kind 'teleport'"),
        ("per_gb = 0.002 => per_gb = 'cheap'", "[egress] per_gb must be a number"),
        ("date = 2026-12-01 => date = 'soon'", "date must be a date"),
        ("gb_bytes = 1000000000 => gb_bytes = 0", "gb_bytes is 0"),
        ("minimum_storage_days = 0 => minimum_storage_days = -1", "minimum_storage_days must be"),
        ('name = "my-minio" => nmae = "x"', "unknown field(s) nmae"),
        ("[egress]\nper_gb = 0.002\n => ", "[egress] is missing: add [egress] with per_gb"),
        ("per_gb_month = 0.001 => per_gb_month = 0.001 x", "is not valid TOML"),
    ],
)
def test_a_bad_sheet_names_the_field_and_the_fix(
    tmp_path: Path, change: str, fragment: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(_bad(change))
    assert _bad(change) != USER_SHEET
    with pytest.raises(ConfigurationError) as caught:
        PriceSheet.from_toml(path)
    assert fragment in str(caught.value)
    assert "bad.toml" in str(caught.value)  # which file


def test_sheets_are_validated_when_made_in_python_too() -> None:
    shipped = PriceSheet.shipped("gcs")
    with pytest.raises(ConfigurationError, match="a price is a finite number ≥ 0"):
        Price(amount=Decimal("-1"), date=shipped.date, source="https://x")
    with pytest.raises(ConfigurationError, match="are in no class"):
        PriceSheet(
            name="half",
            provider="p",
            product="p",
            currency="USD",
            date=shipped.date,
            source="https://x",
            requests=[RequestClass(name="all", kinds=["put"], per_1000=shipped.egress_per_gb)],
            egress_per_gb=shipped.egress_per_gb,
            storage_per_gb_month=shipped.storage_per_gb_month,
        )
    with pytest.raises(ConfigurationError, match="no shipped price sheet 'aws'"):
        load_prices("aws")
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_prices("missing.toml")


def test_money_reads_like_a_bill() -> None:
    assert money(Decimal("12.3456")) == "12.35"
    assert money(Decimal("0.000614")) == "0.000614"
    assert money(Decimal("0.5")) == "0.500"
    assert money(Decimal(0)) == "0"
    assert money(None) == "?"
    assert money(Decimal("0.25"), complete=False) == "0.250+?"


# -- the CLI ---------------------------------------------------------------------------------------
def _cost_cells(out: str) -> list[list[str]]:
    lines = [line for line in out.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:]]
    return [header, *rows]


@pytest.mark.parametrize("prices", ["backblaze-b2", "lab.toml"])
def test_backup_prices_adds_the_cost_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], prices: str
) -> None:
    target = tmp_path / "target"
    target.mkdir()
    out = tmp_path / "results.json"
    if prices.endswith(".toml"):
        (tmp_path / prices).write_text(USER_SHEET)
        prices = str(tmp_path / prices)
    code = main(
        [
            "backup", f"file://{target}", "--size", "1MiB", "--versions", "2", "--seed", "4",
            "--prices", prices, "--json", str(out),
        ]
    )  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert tree(target) == {}
    sheet = load_prices(prices)
    header, row = _cost_cells(printed.out)
    assert header[-3:] == [
        "space after backup 2 (MiB)",  # --versions 2: the space after each backup
        f"cost ({sheet.currency})",
        f"storage ({sheet.currency}/month)",
    ]
    results = list(ResultSet.load(out))
    bill = scenario_cost(results, sheet)
    assert isinstance(bill, Cost)
    assert bill.complete
    assert bill.requests_cost > 0
    assert bill.stored_bytes
    assert row[-2:] == [money(bill.transfer), money(bill.storage_per_month)]
    assert sheet.name in printed.out  # the legend says which sheet
    json.loads(out.read_text())  # the results document is unchanged in form


def test_backup_refuses_an_unknown_sheet_before_any_io(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "target"
    target.mkdir()
    code = main(["backup", str(target), "--size", "1MiB", "--prices", "aws"])
    assert code == 2
    err = capsys.readouterr().err
    assert "no shipped price sheet 'aws': use one of aws-s3, azure-blob" in err
    assert tree(target) == {}
