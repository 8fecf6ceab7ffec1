"""What a probe's requests, downloaded bytes and stored space would cost at a provider.

A :class:`PriceSheet` is one provider's list prices: per 1 000 requests of each request
class (each provider groups request kinds into classes its own way: S3's PUT/COPY/POST/
LIST against GET and the rest, B2's classes A, B and C, Azure's write, read, list and
other operations), per GB downloaded (egress) and per GB-month stored. Every price has
its date and its source. Sheets ship for AWS S3, Wasabi, Backblaze B2, Google Cloud
Storage, Azure Blob, DigitalOcean Spaces, Cloudflare R2 and iDrive e2
(:func:`price_sheets`, :meth:`PriceSheet.shipped`); a user's own TOML file in the same
schema overrides them (:meth:`PriceSheet.from_toml`, the schema on the Backup page).

A :class:`Cost` is the bill a Result implies (:func:`bill`, ``result.cost(prices)``):
requests of each class times their price, bytes received from the storage times the
egress price, and the space the target held after a scenario step times the storage
price, for one month. :func:`scenario_cost` bills a whole scenario: requests and egress
of every step summed, storage as of the last step that measured it.

What is modelled and what is not:

- **Modelled**: request prices per class, a flat egress price, a flat storage price,
  the size of a provider's GB (``gb_bytes``: 2³⁰ bytes unless the sheet says otherwise),
  and a minimum storage duration (``minimum_storage_days``: :attr:`Cost.minimum_storage`
  is what the stored bytes cost for that long, days ÷ 30 months, even when deleted at
  once). A price the sheet marks ``"unknown"`` is left out of the sums and named in
  :attr:`Cost.unpriced`.
- **Left out**: free allowances (S3's first 100 GB of egress a month, R2's free tier,
  B2's 2 500 free class B and C calls a day), monthly minimums (Wasabi's and iDrive
  e2's 1 TB, DigitalOcean's $5 subscription that includes 250 GiB and 1 TiB), volume
  tiers (only the first tier's price is used), minimum billable object sizes, rounding
  of billed units, taxes, and the bytes of request and response headers (egress counts
  the payload bytes the probe received). These depend on the whole account's month,
  not on one probe.

Amounts are :class:`~decimal.Decimal` in the sheet's currency, computed exactly (prices
are parsed from TOML as decimals, never as binary floats).

Why one module (~665 lines): a price sheet's schema, the checks that name each fix and
the bill made from it change together (a new request class is a field, a check and a
line of the bill), and the shipped sheets in ``storeprobe/prices/`` are read against
this one page.
"""

from __future__ import annotations

import datetime
import tomllib
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation, localcontext
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from attrs import field, frozen

from storeprobe.errors import ConfigurationError
from storeprobe.request import KINDS, Kind
from storeprobe.step import Step

__all__ = [
    "UNKNOWN",
    "Billable",
    "Cost",
    "Price",
    "PriceSheet",
    "RequestClass",
    "bill",
    "load_prices",
    "money",
    "price_sheet_names",
    "price_sheets",
    "scenario_cost",
]

#: the value a sheet gives a price it does not know (kept out of sums, named in ``unpriced``)
UNKNOWN = "unknown"
#: bytes in a GB as most providers bill it (2³⁰); a sheet may say otherwise (``gb_bytes``)
GIB = 1 << 30
#: the kinds of request a class may name
_KINDS = tuple(kind.value for kind in KINDS)
#: kinds only file systems make (hard links, renames): no object store bills them, so a
#: sheet may leave them out (a bill counts them unpriced if one ever appears)
_FILE_SYSTEM_KINDS = (Kind.LINK.value, Kind.RENAME.value)
#: the kinds a sheet must place in exactly one class
_REQUIRED_KINDS = tuple(kind for kind in _KINDS if kind not in _FILE_SYSTEM_KINDS)
_PRECISION = 60  # digits: bytes × price ÷ 2³⁰ is exact well beyond petabytes


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{what} must be a non-empty string, not {value!r}")
    return value


def _amount(value: Any, what: str) -> Decimal | None:
    """A price: a number ≥ 0, or ``"unknown"`` (None)."""
    if value is None or (isinstance(value, str) and value == UNKNOWN):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal | str):
        raise ConfigurationError(
            f"{what} must be a number ≥ 0 or {UNKNOWN!r}, not {value!r}: write e.g. 0.005"
        )
    try:
        amount = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:
        raise ConfigurationError(
            f"{what} must be a number ≥ 0 or {UNKNOWN!r}, not {value!r}: write e.g. 0.005"
        ) from None
    if not amount.is_finite() or amount < 0:
        raise ConfigurationError(
            f"{what} is {value}: a price is a finite number ≥ 0 (or {UNKNOWN!r})"
        )
    return amount


def _date(value: Any, what: str) -> datetime.date:
    if isinstance(value, datetime.datetime):
        return value.date()
    if isinstance(value, datetime.date):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            pass
    raise ConfigurationError(
        f"{what} must be a date (TOML 2026-12-01, or the text '2026-12-01'), not {value!r}"
    )


@frozen(kw_only=True)
class Price:
    """One price in the sheet's currency: ``amount`` per unit (None: not known), the
    date it was read and its source (a URL, or a note saying where it came from)."""

    amount: Decimal | None
    date: datetime.date
    source: str
    #: what the source says beside the figure, or why it is unknown
    note: str = ""

    def __attrs_post_init__(self) -> None:
        if self.amount is not None and (not self.amount.is_finite() or self.amount < 0):
            raise ConfigurationError(f"a price is a finite number ≥ 0, not {self.amount}")
        _text(self.source, "a price's source")

    @property
    def known(self) -> bool:
        """True when the amount is known."""
        return self.amount is not None


def _kinds(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@frozen(kw_only=True)
class RequestClass:
    """A provider's class of requests: its name, the request kinds it holds (``put``,
    ``get``, ``head``, ``list``, ``delete``, ``create-multipart``, ``put-part``,
    ``complete-multipart``, ``copy``) and its price per 1 000 requests."""

    name: str
    kinds: tuple[str, ...] = field(converter=_kinds)
    per_1000: Price

    def __attrs_post_init__(self) -> None:
        _text(self.name, "a request class's name")
        for kind in self.kinds:
            if kind not in _KINDS:
                raise ConfigurationError(
                    f"request class {self.name!r} names the kind {kind!r}: the kinds are "
                    + ", ".join(_KINDS)
                )


def _classes(value: Iterable[RequestClass]) -> tuple[RequestClass, ...]:
    return tuple(value)


#: the fields of a price sheet's schema (see the Backup page)
_SHEET_FIELDS = {
    "name",
    "provider",
    "product",
    "currency",
    "date",
    "source",
    "gb_bytes",
    "minimum_storage_days",
    "notes",
    "requests",
    "egress",
    "storage",
}
#: the fields every sheet gives, each with the hint its absence names
_TOP_FIELDS = {
    "provider": 'the provider\'s name, e.g. provider = "Backblaze"',
    "product": 'the product, class and region priced, e.g. product = "B2"',
    "currency": 'the currency of every price, e.g. currency = "USD"',
    "date": "the date the prices were read, e.g. date = 2026-12-01",
    "source": 'the provider\'s pricing page, e.g. source = "https://..."',
}


def _need(table: Mapping[str, Any], key: str, label: str, hint: str, where: str) -> Any:
    """``table[key]``, or an error naming ``label`` in the sheet ``where`` and the fix."""
    if key not in table:
        raise ConfigurationError(f"{where}: {label} is missing: {hint}")
    return table[key]


def _check_known(data: Mapping[str, Any], where: str) -> None:
    unknown = sorted(set(data) - _SHEET_FIELDS)
    if unknown:
        raise ConfigurationError(
            f"{where}: unknown field(s) {', '.join(unknown)}: the fields are "
            + ", ".join(sorted(_SHEET_FIELDS))
        )


def _top_fields(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The sheet's provider, product, currency, date and source, each present and every
    one but the date (checked by the caller) a non-empty string."""
    fields = {key: _need(data, key, key, hint, where) for key, hint in _TOP_FIELDS.items()}
    for key in ("provider", "product", "currency", "source"):
        _text(fields[key], f"{where}: {key}")
    return fields


@frozen(kw_only=True)
class _PriceReader:
    """Reads the prices of one sheet: ``where`` names the sheet in messages; a price
    without its own date or source takes the sheet's."""

    where: str
    currency: str
    date: datetime.date
    source: str

    def read(self, table: Any, label: str, key: str, unit: str) -> Price:
        """The price ``key`` of the table ``[label]``, ``unit`` saying what it is per."""
        where = self.where
        if not isinstance(table, Mapping):
            raise ConfigurationError(f"{where}: [{label}] must be a table")
        value = _need(
            table,
            key,
            f"[{label}] {key}",
            f"give the price {unit} in {self.currency} (a number ≥ 0, or "
            f"{UNKNOWN!r} where the provider's price is not known)",
            where,
        )
        return Price(
            amount=_amount(value, f"{where}: [{label}] {key}"),
            date=_date(table.get("date", self.date), f"{where}: [{label}] date"),
            source=_text(table.get("source", self.source), f"{where}: [{label}] source"),
            note=str(table.get("note", "")),
        )


def _request_classes(groups: Any, prices: _PriceReader) -> list[RequestClass]:
    """The ``[requests.<class>]`` tables of a sheet, each a :class:`RequestClass`."""
    where = prices.where
    if not isinstance(groups, Mapping) or not groups:
        raise ConfigurationError(f"{where}: [requests] must hold [requests.<class>] tables")
    classes = []
    for label, table in groups.items():
        if not isinstance(table, Mapping):
            raise ConfigurationError(f"{where}: [requests.{label}] must be a table")
        kinds = _need(
            table,
            "kinds",
            f"[requests.{label}] kinds",
            'list the request kinds of this class, e.g. kinds = ["get", "head"]',
            where,
        )
        if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            raise ConfigurationError(
                f"{where}: [requests.{label}] kinds must be a list of request kinds"
            )
        per_1000 = prices.read(table, f"requests.{label}", "per_1000", "per 1 000 requests")
        try:  # the class checks its kinds; its message gains the file's name
            classes.append(RequestClass(name=str(label), kinds=kinds, per_1000=per_1000))
        except ConfigurationError as exc:
            raise ConfigurationError(f"{where}: {exc}") from None
    return classes


@frozen(kw_only=True)
class PriceSheet:
    """One provider's list prices, each with its date and source; validated when made.

    ``requests`` places every request kind in exactly one class; ``egress_per_gb`` is
    the price of a GB received from the storage, ``storage_per_gb_month`` of a GB kept
    for a month; a GB is ``gb_bytes`` bytes (2³⁰ unless the provider bills in 10⁹).
    ``minimum_storage_days`` is how long the provider bills stored bytes at least (0:
    no minimum). ``date`` and ``source`` are the sheet's: the newest of its sources and
    the provider's pricing page. ``notes`` says what the sheet leaves out.
    """

    name: str
    provider: str
    product: str
    currency: str
    date: datetime.date
    source: str
    requests: tuple[RequestClass, ...] = field(converter=_classes)
    egress_per_gb: Price
    storage_per_gb_month: Price
    gb_bytes: int = GIB
    minimum_storage_days: int = 0
    notes: str = ""

    def __attrs_post_init__(self) -> None:
        for what in ("name", "provider", "product", "currency", "source"):
            _text(getattr(self, what), f"price sheet field {what!r}")
        if isinstance(self.gb_bytes, bool) or not isinstance(self.gb_bytes, int):
            raise ConfigurationError(f"gb_bytes must be an integer, not {self.gb_bytes!r}")
        if self.gb_bytes <= 0:
            raise ConfigurationError(
                f"gb_bytes is {self.gb_bytes}: use 1073741824 (2³⁰) or 1000000000 (10⁹)"
            )
        days = self.minimum_storage_days
        if isinstance(days, bool) or not isinstance(days, int) or days < 0:
            raise ConfigurationError(
                f"minimum_storage_days must be a whole number of days ≥ 0, not {days!r}"
            )
        placed: dict[str, str] = {}
        for group in self.requests:
            for kind in group.kinds:
                if kind in placed:
                    raise ConfigurationError(
                        f"price sheet {self.name!r}: request kind {kind!r} is in both class "
                        f"{placed[kind]!r} and class {group.name!r}: keep it in one"
                    )
                placed[kind] = group.name
        missing = [kind for kind in _REQUIRED_KINDS if kind not in placed]
        if missing:
            raise ConfigurationError(
                f"price sheet {self.name!r}: request kinds {', '.join(missing)} are in no "
                "class: add them to a class (a class with per_1000 = 0 for free requests)"
            )
        if len({group.name for group in self.requests}) != len(self.requests):
            raise ConfigurationError(f"price sheet {self.name!r}: two classes share a name")

    def class_of(self, kind: str) -> RequestClass | None:
        """The class holding request ``kind`` (None: a kind this sheet does not know)."""
        for group in self.requests:
            if kind in group.kinds:
                return group
        return None

    @property
    def prices(self) -> dict[str, Price]:
        """Every price by name: ``requests.<class>``, ``egress`` and ``storage``."""
        named = {f"requests.{group.name}": group.per_1000 for group in self.requests}
        return {**named, "egress": self.egress_per_gb, "storage": self.storage_per_gb_month}

    def __str__(self) -> str:
        return f"{self.provider} {self.product} ({self.currency}, prices of {self.date})"

    # -- construction ----------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, name: str, origin: str = "") -> PriceSheet:
        """A sheet from the parsed TOML schema (see the Backup page); every missing or bad
        field raises :class:`~storeprobe.errors.ConfigurationError` naming it and the fix."""
        where = origin or f"price sheet {name!r}"
        _check_known(data, where)
        fields = _top_fields(data, where)
        sheet_date = _date(fields["date"], f"{where}: date")
        sheet_source = fields["source"]
        prices = _PriceReader(
            where=where, currency=fields["currency"], date=sheet_date, source=sheet_source
        )
        storage = _need(
            data, "storage", "[storage]", "add [storage] with per_gb_month = ...", where
        )
        egress = _need(data, "egress", "[egress]", "add [egress] with per_gb = ...", where)
        groups = _need(
            data,
            "requests",
            "[requests]",
            "add one [requests.<class>] table per request class, with kinds and per_1000",
            where,
        )
        classes = _request_classes(groups, prices)
        egress_price = prices.read(egress, "egress", "per_gb", "per GB downloaded")
        storage_price = prices.read(storage, "storage", "per_gb_month", "per GB stored for a month")
        sheet_name = _text(data.get("name", name), f"{where}: name")
        try:  # the sheet checks the rest (every kind in one class, gb_bytes, days)
            return cls(
                name=sheet_name,
                provider=fields["provider"],
                product=fields["product"],
                currency=fields["currency"],
                date=sheet_date,
                source=sheet_source,
                requests=classes,
                egress_per_gb=egress_price,
                storage_per_gb_month=storage_price,
                gb_bytes=data.get("gb_bytes", GIB),
                minimum_storage_days=data.get("minimum_storage_days", 0),
                notes=str(data.get("notes", "")),
            )
        except ConfigurationError as exc:
            raise ConfigurationError(f"{where}: {exc}") from None

    @classmethod
    def from_toml(cls, path: str | Path) -> PriceSheet:
        """Read a sheet from a TOML file (the schema on the Backup page). Its name is the
        file's ``name`` field, or the file name without ``.toml``."""
        path = Path(path)
        origin = f"price sheet {str(path)!r}"
        try:
            with path.open("rb") as handle:
                data = tomllib.load(handle, parse_float=Decimal)
        except FileNotFoundError:
            raise ConfigurationError(f"{origin} does not exist: check the file name") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigurationError(f"{origin} is not valid TOML: {exc}") from None
        return cls.from_dict(data, name=path.stem, origin=origin)

    @classmethod
    def shipped(cls, name: str) -> PriceSheet:
        """One of the sheets shipped with storeprobe, by name (see :func:`price_sheets`)."""
        names = _shipped_names()
        if name not in names:
            raise ConfigurationError(
                f"no shipped price sheet {name!r}: use one of {', '.join(names)}, or the "
                "path of your own FILE.toml"
            )
        text = resources.files("storeprobe").joinpath("prices", f"{name}.toml").read_text()
        data = tomllib.loads(text, parse_float=Decimal)
        return cls.from_dict(data, name=name, origin=f"shipped price sheet {name!r}")


def price_sheet_names() -> list[str]:
    """The names of the shipped sheets, sorted (the files ``storeprobe/prices/*.toml``)."""
    return _shipped_names()


def _shipped_names() -> list[str]:
    folder = resources.files("storeprobe").joinpath("prices")
    return sorted(
        item.name.removesuffix(".toml") for item in folder.iterdir() if item.name.endswith(".toml")
    )


def price_sheets() -> dict[str, PriceSheet]:
    """Every shipped sheet by name: ``aws-s3``, ``azure-blob``, ``backblaze-b2``,
    ``cloudflare-r2``, ``digitalocean-spaces``, ``gcs``, ``idrive-e2``, ``wasabi``."""
    return {name: PriceSheet.shipped(name) for name in _shipped_names()}


def load_prices(spec: str | Path) -> PriceSheet:
    """A shipped sheet by name, or a user's sheet from a ``.toml`` file's path."""
    text = str(spec)
    if isinstance(spec, Path) or text.endswith(".toml") or Path(text).is_file():
        return PriceSheet.from_toml(text)
    return PriceSheet.shipped(text)


# -- bills ----------------------------------------------------------------------------------
def _requests(value: Mapping[str, int]) -> dict[str, int]:
    return {str(name): int(count) for name, count in dict(value).items()}


def _costs(value: Mapping[str, Decimal | None]) -> dict[str, Decimal | None]:
    return dict(value)


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@frozen(kw_only=True)
class Cost:
    """The bill a Result (or a scenario) implies at one sheet's prices.

    ``requests`` counts requests per class and ``request_costs`` prices them (None: the
    class's price is unknown); ``egress_bytes`` are the payload bytes received from the
    storage, ``egress`` their price; ``stored_bytes`` is the space the target held after
    the step (None: not measured, as for a seed probe, whose objects are deleted) and
    ``storage_per_month`` the price of keeping it a month. ``minimum_storage`` is what
    those bytes cost for the provider's minimum storage duration, even if deleted at
    once (0 without one). ``unpriced`` names what was used but has no known price.
    Amounts are in ``currency``.
    """

    sheet: str
    currency: str
    requests: dict[str, int] = field(converter=_requests)
    request_costs: dict[str, Decimal | None] = field(converter=_costs)
    egress_bytes: int
    egress: Decimal | None
    stored_bytes: int | None
    storage_per_month: Decimal | None
    minimum_storage: Decimal | None
    unpriced: tuple[str, ...] = field(default=(), converter=_names)

    @property
    def requests_cost(self) -> Decimal:
        """What the requests of every class with a known price cost."""
        with localcontext() as context:
            context.prec = _PRECISION
            return sum((c for c in self.request_costs.values() if c is not None), Decimal(0))

    @property
    def transfer(self) -> Decimal:
        """The one-off part: requests and egress (known prices)."""
        with localcontext() as context:
            context.prec = _PRECISION
            return self.requests_cost + (self.egress or Decimal(0))

    @property
    def total(self) -> Decimal:
        """Requests + egress + one month of the stored bytes (parts with known prices)."""
        with localcontext() as context:
            context.prec = _PRECISION
            return self.transfer + (self.storage_per_month or Decimal(0))

    @property
    def complete(self) -> bool:
        """True when every part used has a known price (``unpriced`` is empty)."""
        return not self.unpriced

    def __str__(self) -> str:
        """``USD 0.000138 at aws-s3: requests 0.000110, egress 0, storage 0.0000281/month``
        (amounts as :func:`money` shows them; the exact ones are the fields)."""
        storage = (
            ""
            if self.storage_per_month is None
            else f", storage {money(self.storage_per_month)}/month"
        )
        missing = f" (no price for {', '.join(self.unpriced)})" if self.unpriced else ""
        return (
            f"{self.currency} {money(self.total)} at {self.sheet}: requests "
            f"{money(self.requests_cost)}, egress {money(self.egress)}{storage}{missing}"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; amounts as decimal strings (exact)."""

        def text(amount: Decimal | None) -> str | None:
            return None if amount is None else f"{amount:f}"

        return {
            "sheet": self.sheet,
            "currency": self.currency,
            "requests": dict(self.requests),
            "request_costs": {name: text(c) for name, c in self.request_costs.items()},
            "egress_bytes": self.egress_bytes,
            "egress": text(self.egress),
            "stored_bytes": self.stored_bytes,
            "storage_per_month": text(self.storage_per_month),
            "minimum_storage": text(self.minimum_storage),
            "total": text(self.total),
            "unpriced": list(self.unpriced),
        }


def money(amount: Decimal | None, complete: bool = True) -> str:
    """An amount as people read a bill: 2 decimals from 1 up, else 3 significant digits
    (``0.000123``); ``"?"`` when unknown, a trailing ``"+?"`` when a part is unpriced."""
    if amount is None:
        return "?"
    if amount == 0:
        text = "0"
    elif abs(amount) >= 1:
        text = f"{amount:.2f}"
    else:
        exponent = amount.adjusted()  # 0.000123 -> -4
        text = f"{amount:.{max(2, 2 - exponent)}f}"
    return text if complete else f"{text}+?"


class Billable(Protocol):
    """What a bill reads of a :class:`~storeprobe.result.Result`: requests by kind, the
    payload bytes received, and the scenario step (for the space held after it)."""

    @property
    def requests_by_kind(self) -> Mapping[str, int]: ...
    @property
    def bytes_received(self) -> int: ...
    @property
    def step(self) -> Step | None: ...


def _price(
    quantity: int, price: Price, divisor: int, part: str, unpriced: list[str]
) -> Decimal | None:
    if price.amount is None:
        if quantity:
            unpriced.append(part)
        return None
    return quantity * price.amount / divisor


def _bill(kinds: Mapping[str, int], received: int, stored: int | None, prices: PriceSheet) -> Cost:
    unpriced: list[str] = []
    counts = {group.name: 0 for group in prices.requests}
    stray: dict[str, int] = {}
    for kind, count in kinds.items():
        group = prices.class_of(kind)
        if group is None:
            stray[kind] = stray.get(kind, 0) + count
        else:
            counts[group.name] += count
    with localcontext() as context:
        context.prec = _PRECISION
        costs = {
            group.name: _price(
                counts[group.name], group.per_1000, 1000, f"requests.{group.name}", unpriced
            )
            for group in prices.requests
        }
        for kind, count in stray.items():  # a kind newer than the sheet: counted, unpriced
            counts[kind] = count
            costs[kind] = None
            unpriced.append(f"requests.{kind}")
        egress = _price(received, prices.egress_per_gb, prices.gb_bytes, "egress", unpriced)
        storage: Decimal | None = None
        minimum: Decimal | None = None
        if stored is not None:
            storage = _price(
                stored, prices.storage_per_gb_month, prices.gb_bytes, "storage", unpriced
            )
            if storage is not None:
                minimum = storage * prices.minimum_storage_days / 30
    return Cost(
        sheet=prices.name,
        currency=prices.currency,
        requests=counts,
        request_costs=costs,
        egress_bytes=received,
        egress=egress,
        stored_bytes=stored,
        storage_per_month=storage,
        minimum_storage=minimum,
        unpriced=unpriced,
    )


def bill(result: Billable, prices: PriceSheet) -> Cost:
    """The bill of one Result: its requests (every successful repeat's), the payload
    bytes it received, and, for a scenario step, a month of the space held after it."""
    stored = None if result.step is None else result.step.space_used
    return _bill(dict(result.requests_by_kind), result.bytes_received, stored, prices)


def scenario_cost(results: Iterable[Billable], prices: PriceSheet) -> Cost:
    """The bill of a scenario: requests and egress of every step summed; storage as of
    the last step that measured the space held (a month of it, at the end)."""
    kinds: dict[str, int] = {}
    received = 0
    stored: int | None = None
    for result in results:
        for kind, count in result.requests_by_kind.items():
            kinds[kind] = kinds.get(kind, 0) + count
        received += result.bytes_received
        if result.step is not None and result.step.space_used is not None:
            stored = result.step.space_used
    return _bill(kinds, received, stored, prices)
