"""What to transfer: a number of objects of one size, or of sizes drawn from a
distribution, with reproducible payloads.

Drawn sizes (``Workload(count=1000, sizes=Sizes.lognormal("16KiB", 1.5))``) come from
``seed`` through their own numpy stream, so the same seed gives the same sizes, and the
workload knows its :attr:`~Workload.total_bytes` before anything runs.

A payload is generated from ``(seed, index)`` with numpy's SFC64 generator, one
1 MiB generation block at a time (block ``b`` of object ``i`` is seeded by
``(seed, i, b)``). The bytes are therefore

- incompressible (uniformly random),
- unique per object and per 4 KiB-aligned block (collisions have probability ~2⁻³²⁷⁶⁸),
- reproducible: the same workload regenerates the same bytes, so a download is
  verified without keeping a copy,
- generated in pieces, so an object larger than memory can be produced part by part.

A workload is the simplest dataset: it follows :class:`storeprobe.payload.Payloads`, the
protocol a tree and an image follow too (items with a size and reproducible bytes; here
the items are object indexes of one version), and its payload, check and stream come
from the same functions (:func:`~storeprobe.payload.payload`,
:func:`~storeprobe.payload.mismatch`, :func:`~storeprobe.payload.fill_stream`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import attrs
import numpy as np
from attrs import field, frozen

from storeprobe.errors import ConfigurationError
from storeprobe.payload import fill_stream, mismatch, payload
from storeprobe.sizes import MAX_COUNT, MAX_SIZE, Int64Array, Sizes
from storeprobe.units import KiB, MiB, format_size, parse_size

__all__ = [
    "MAX_COUNT",
    "MAX_SIZE",
    "Workload",
]

_DOMAIN = 0x5707E9B0  # separates storeprobe payload streams from other uses of the seed
_SIZES_DOMAIN = 0x5175E5  # the stream drawn sizes come from, apart from payload bytes
_SPEC = re.compile(r"(?P<count>[0-9]+)x(?P<size>\S+)")
_SPEC_HELP = (
    "use 'small', 'large', COUNTxSIZE such as '256x16KiB', or COUNTxSIZES such as "
    "'1000xlognormal:16KiB,1.5' or '1000xuniform:4KiB-1MiB'"
)


def _positive_count(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{attribute.name} must be an int, not {value!r}")
    if not 1 <= value <= MAX_COUNT:
        raise ConfigurationError(
            f"{attribute.name} must be between 1 and {MAX_COUNT:,}, not {value:,}"
        )


def _positive_size(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if not 1 <= value <= MAX_SIZE:
        raise ConfigurationError(
            f"size must be between 1 byte and {format_size(MAX_SIZE)}, not {value:,} bytes"
        )


def _valid_sizes(_: object, attribute: attrs.Attribute[Sizes | None], value: Sizes | None) -> None:
    _check_sizes(value)


def _check_sizes(value: object) -> None:
    if value is None:
        return
    if not isinstance(value, Sizes):
        raise ConfigurationError(
            f"sizes must be a Sizes such as Sizes.lognormal('16KiB', 1.5), not {value!r}"
        )
    if value.smallest < 1:
        raise ConfigurationError(
            f"sizes {value.describe()} can draw empty objects; a workload's objects have at "
            "least 1 byte: start the range at 1 byte or more, e.g. uniform:1KiB-1MiB "
            "(Sizes.uniform('1KiB', '1MiB')), or use lognormal sizes"
        )


def _typical_size(workload: Workload) -> int:
    _check_sizes(workload.sizes)  # the default is made before the validators run
    if workload.sizes is None:
        raise ConfigurationError(
            "a workload needs size (e.g. size='16KiB') or sizes "
            "(e.g. sizes=Sizes.lognormal('16KiB', 1.5))"
        )
    return workload.sizes.typical


def _valid_seed(_: object, attribute: attrs.Attribute[int | None], value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise ConfigurationError(f"seed must be an int in [0, 2**63), not {value!r}")


def _valid_name(_: object, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value or not value.isprintable() or len(value) > 64:
        raise ConfigurationError(f"workload name must be 1-64 printable characters, not {value!r}")


@frozen(kw_only=True)
class Workload:
    """``count`` unique objects of ``size`` bytes each, or of sizes drawn from ``sizes``,
    reproducible from ``seed``.

    ``size`` takes bytes as an int or a string such as ``"16KiB"`` (binary units exact,
    decimal units like ``"16kB"`` = 16 000 bytes exact; ambiguous forms are refused).
    Give ``sizes`` instead (a :class:`~storeprobe.sizes.Sizes`) and object ``i`` has
    ``object_sizes[i]`` bytes, drawn once from the seed (0 while the seed is None);
    ``size`` is then the distribution's median (:attr:`Sizes.typical`), the one figure
    that stands for all (it picks KiB/s or MiB/s), and :attr:`total_bytes` the sum of the
    drawn sizes.
    """

    count: int = field(validator=_positive_count)
    #: object sizes drawn from a distribution; None: every object ``size`` bytes
    sizes: Sizes | None = field(default=None, validator=_valid_sizes)
    size: int = field(
        default=attrs.Factory(_typical_size, takes_self=True),
        converter=parse_size,
        validator=_positive_size,
    )
    #: None: a probe gives each run a fresh random seed (generating directly uses 0)
    seed: int | None = field(default=None, validator=_valid_seed)
    name: str | None = field(default=None, validator=_valid_name)
    #: the seed the sizes are drawn from when it is not ``seed`` (a repeat's fresh bytes
    #: keep the sizes of its measurement: :meth:`with_payload_seed`); None: ``seed``
    size_seed: int | None = field(default=None, validator=_valid_seed)
    _drawn: Int64Array | None = field(init=False, eq=False, repr=False, default=None)

    def __attrs_post_init__(self) -> None:
        if self.sizes is None:
            return
        if self.size != self.sizes.typical:
            raise ConfigurationError(
                f"give size ({format_size(self.size)}) or sizes ({self.sizes.describe()}), not both"
            )
        seed = self.seed if self.size_seed is None else self.size_seed
        rng = np.random.Generator(
            np.random.SFC64(np.random.SeedSequence([_SIZES_DOMAIN, seed or 0]))
        )
        drawn = self.sizes.draw(self.count, rng)
        drawn.setflags(write=False)
        if int(drawn.max()) > MAX_SIZE:
            raise ConfigurationError(
                f"sizes {self.sizes.describe()} drew an object over the "
                f"{format_size(MAX_SIZE)} limit: give a maximum, e.g. "
                "Sizes.lognormal('16KiB', 1.5, maximum='1GiB') (on the command line "
                "1000xlognormal:16KiB,1.5,1GiB)"
            )
        object.__setattr__(self, "_drawn", drawn)

    @classmethod
    def small(cls, *, seed: int | None = None) -> Workload:
        """256 objects of 16 KiB (4 MiB in all): the many-small-files probe."""
        return cls(count=256, size=16 * KiB, seed=seed, name="small")

    @classmethod
    def large(cls, *, seed: int | None = None) -> Workload:
        """One object of 256 MiB: the one-big-file probe."""
        return cls(count=1, size=256 * MiB, seed=seed, name="large")

    @classmethod
    def parse(cls, spec: str, *, seed: int | None = None) -> Workload:
        """Build a workload from ``"small"``, ``"large"``, ``"COUNTxSIZE"`` (``"10x1MiB"``)
        or ``"COUNTxSIZES"`` with sizes as :meth:`Sizes.parse` reads them
        (``"1000xlognormal:16KiB,1.5"``, ``"1000xuniform:4KiB-1MiB"``)."""
        if spec == "small":
            return cls.small(seed=seed)
        if spec == "large":
            return cls.large(seed=seed)
        match = _SPEC.fullmatch(spec) if isinstance(spec, str) else None
        if match is None:
            raise ConfigurationError(f"cannot parse workload {spec!r}: {_SPEC_HELP}")
        if ":" in match["size"]:
            return cls(count=int(match["count"]), sizes=Sizes.parse(match["size"]), seed=seed)
        return cls(count=int(match["count"]), size=match["size"], seed=seed)

    @property
    def object_sizes(self) -> Int64Array:
        """Each object's size in bytes (int64, read-only), object ``i`` at ``[i]``."""
        if self._drawn is not None:
            return self._drawn
        fixed = np.full(self.count, self.size, dtype=np.int64)
        fixed.setflags(write=False)
        return fixed

    def size_of(self, index: int) -> int:
        """Bytes in object ``index``."""
        self._check_index(index)
        return self.size if self._drawn is None else int(self._drawn[index])

    @property
    def largest(self) -> int:
        """Bytes in the largest object (``size`` when every object has that size)."""
        return self.size if self._drawn is None else int(self._drawn.max())

    @property
    def total_bytes(self) -> int:
        """Bytes in the whole workload: ``count × size``, or the sum of the drawn sizes."""
        return self.count * self.size if self._drawn is None else int(self._drawn.sum())

    @property
    def shape(self) -> str:
        """``"256 × 16 KiB"`` or ``"1000 × lognormal(16 KiB, σ 1.5)"``."""
        return f"{self.count} × {self.size_label}"

    @property
    def size_label(self) -> str:
        """``"16 KiB"`` or ``"lognormal(16 KiB, σ 1.5)"``: each object's size, or the
        distribution they are drawn from."""
        return format_size(self.size) if self.sizes is None else self.sizes.label

    @property
    def label(self) -> str:
        """The name if given, else the :attr:`shape`."""
        return self.name or self.shape

    def describe(self) -> str:
        """``"small (256 × 16 KiB)"``: the label and the shape."""
        return self.shape if self.name is None else f"{self.name} ({self.shape})"

    # -- payloads -------------------------------------------------------------------

    def _check_index(self, index: int) -> None:
        if not 0 <= index < self.count:
            raise ConfigurationError(f"object index {index} outside 0..{self.count - 1}")

    def fill(self, index: int, start: int, out: memoryview | bytearray) -> None:
        """Write bytes ``[start, start + len(out))`` of object ``index`` into ``out``."""
        self._check_index(index)
        view = memoryview(out).cast("B")
        stop = start + len(view)
        size = self.size_of(index)
        if start < 0 or stop > size:
            raise ConfigurationError(f"byte range [{start}, {stop}) outside object of {size} bytes")
        fill_stream([_DOMAIN, self.seed or 0, index], start, np.frombuffer(view, dtype=np.uint8))

    def payload(self, index: int, start: int = 0, stop: int | None = None) -> bytearray:
        """Bytes ``[start, stop)`` of object ``index`` (default: the whole object)."""
        stop = self.size_of(index) if stop is None else stop
        out = bytearray(max(stop - start, 0))
        self.fill(index, start, out)
        return out

    def payload_bytes(self, index: int, start: int = 0, stop: int | None = None) -> bytes:
        """Bytes ``[start, stop)`` of object ``index`` as an immutable ``bytes`` object.

        Generated in place (no second copy is ever alive), for clients that take ``bytes``
        without copying them (obstore, asyncssh, fsspec's memory filesystem).
        """
        return payload(self, index, start, stop)

    def pieces(self, index: int, piece_size: int) -> Iterator[tuple[int, bytearray]]:
        """Yield ``(offset, bytes)`` pieces of object ``index``, each at most ``piece_size``."""
        if piece_size < 1:
            raise ConfigurationError(f"piece_size must be positive, not {piece_size}")
        size = self.size_of(index)
        for offset in range(0, size, piece_size):
            yield offset, self.payload(index, offset, min(offset + piece_size, size))

    def mismatch(
        self, index: int, data: bytes | bytearray | memoryview, start: int = 0
    ) -> int | None:
        """Offset of the first byte where ``data`` differs from the payload, or None.

        ``data`` is compared with bytes ``[start, start + len(data))`` of object
        ``index``. Bytes past the end of the object differ at its size. A whole-object
        check must also compare lengths (``len(data) == size_of(index)``).
        """
        return mismatch(self, index, data, start)

    # -- serialisation --------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: count, size in bytes, seed, name; ``sizes`` (the
        distribution, see :meth:`Sizes.to_dict`) and ``total_bytes`` when sizes are drawn,
        ``size_seed`` when it is set."""
        data: dict[str, Any] = {
            "count": self.count,
            "size": self.size,
            "seed": self.seed,
            "name": self.name,
        }
        if self.sizes is not None:
            data["sizes"] = self.sizes.to_dict()
            data["total_bytes"] = self.total_bytes
        if self.size_seed is not None:
            data["size_seed"] = self.size_seed
        return data

    def with_seed(self, seed: int) -> Workload:
        """The same workload generating its bytes (and drawing its sizes) from ``seed``."""
        return attrs.evolve(self, seed=seed, size_seed=None)

    def with_payload_seed(self, seed: int) -> Workload:
        """The same objects, of the same sizes, with bytes generated from ``seed``: a
        repeat's fresh payloads that move exactly the bytes its measurement counts."""
        if self.sizes is None:
            return attrs.evolve(self, seed=seed)
        keep = self.seed if self.size_seed is None else self.size_seed
        return attrs.evolve(self, seed=seed, size_seed=keep or 0)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Workload:
        """Inverse of :meth:`to_dict` (documents without ``sizes`` are one-size workloads)."""
        sizes = data.get("sizes")
        if sizes is None:
            return cls(count=data["count"], size=data["size"], seed=data["seed"], name=data["name"])
        workload = cls(
            count=data["count"],
            sizes=Sizes.from_dict(sizes),
            seed=data["seed"],
            name=data["name"],
            size_seed=data.get("size_seed"),
        )
        total = data.get("total_bytes")
        if total is not None and total != workload.total_bytes:
            raise ConfigurationError(
                f"the workload's sizes drawn again from its seed total {workload.total_bytes:,} "
                f"bytes, not the {total:,} recorded: the document was written by a storeprobe "
                "that draws sizes differently"
            )
        return workload
