"""How a probe cut its work into requests: a typed value, decided before the run.

A :class:`Strategy` says what the timed window sent: one request per object, one object
in one request, or one object in parts (uploads) or byte ranges (downloads), how many at
a time, whether the object went through a local staging file, and the fallbacks the
client needed (a storage refusing conditional writes, a server refusing ranged reads).
Metadata probes, backup methods and distributed probes have theirs too. Sizes are in
bytes.

``str(strategy)`` is its text, written here and nowhere else::

    objects: one request per object, 4 at a time
    one object in 5 parts of 5 MiB, 4 at a time (ranges read with s3fs)
    one object in one request (upload cannot be split)
    16 objects of 1 KiB written untimed; one HEAD per object, 4 at a time
    2 Dask workers, each objects: one request per object, 2 at a time, started together at a barrier

:meth:`Strategy.parse` reads such a text back (results documents before the typed
strategy held only the text). A text in none of these forms (a backup method's own
sentence, a hand-edited document) becomes a :attr:`Shape.DESCRIBED` strategy holding
it verbatim, so a parsed strategy always renders as the text it came from.
"""

from __future__ import annotations

import enum
import re
from typing import Any, Literal

import attrs
from attrs import field, frozen

from storeprobe.errors import ConfigurationError
from storeprobe.units import format_size, parse_size

__all__ = ["Fallback", "Shape", "Staged", "Strategy"]

Direction = Literal["upload", "download"]


class Shape(enum.Enum):
    """How the timed requests cover the work."""

    #: one request per object (for a metadata probe: one HEAD or DELETE per object)
    OBJECTS = "objects"
    #: one object in one request (staged through a file, or the client cannot split it)
    ONE_REQUEST = "one-request"
    #: one object in parts (upload) or byte ranges (download)
    PARTS = "parts"
    #: one listing of the objects, page after page
    LISTING = "listing"
    #: only the streams are known (a distributed probe none of whose workers reported)
    STREAMS = "streams"
    #: told in words (``description``): a backup method's sentence, or an older
    #: document's text in none of the forms above
    DESCRIBED = "described"


class Staged(enum.Enum):
    """How a staging file (see :mod:`storeprobe.staging`) carried the object."""

    #: the client sent the object from, or landed it in, the file in one request
    WHOLE = "whole"
    #: the parts or ranges were views of the file
    PARTS = "parts"
    #: the parts went one at a time, the client holding one request's body in memory
    ONE_IN_MEMORY = "one-in-memory"


class Fallback(enum.Enum):
    """What the probe did instead of the client's usual way, and why."""

    #: the storage refuses conditional writes: each name was checked absent by HEAD
    #: (untimed), then written without the condition
    ABSENCE_BY_HEAD = "absence-by-head"


_FALLBACK_TEXT = {
    Fallback.ABSENCE_BY_HEAD: "no conditional writes: absence checked by HEAD before the window"
}
_HOLDS = {"upload": "sends one request only from", "download": "reads one request into"}


def _positive(name: str) -> Any:
    def check(_: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
        if value is not None and (isinstance(value, bool) or value < 1):
            raise ConfigurationError(f"a strategy's {name} is a positive int, not {value!r}")

    return check


def _fallbacks(value: Any) -> tuple[Fallback, ...]:
    return tuple(Fallback(item) for item in value)


_NEEDS: dict[Shape, tuple[str, ...]] = {
    Shape.OBJECTS: ("in_flight",),
    Shape.ONE_REQUEST: (),
    Shape.PARTS: ("in_flight", "parts", "part_size"),
    Shape.LISTING: ("written", "object_size"),
    Shape.STREAMS: ("in_flight",),
    Shape.DESCRIBED: ("description",),
}


@frozen(kw_only=True)
class Strategy:
    """How one probe's timed requests were cut (see the module docstring).

    ``in_flight`` is the most requests kept in flight; ``parts`` and ``part_size``
    (bytes) the split of one object; ``operation`` the direction of a transfer (its
    texts differ); ``client`` the client the layout was decided for and ``reader`` the
    one that read the byte ranges when another (obstore's fallback to s3fs on a server
    answering ranged GETs with 200). ``request`` is the one request a metadata probe
    sends per object (``"HEAD"``, ``"DELETE"``), ``written`` and ``object_size`` the
    objects it wrote untimed before. ``workers`` is set for a distributed probe: that
    many workers each ran the rest of this strategy.
    """

    shape: Shape = field(converter=Shape)
    in_flight: int | None = field(default=None, validator=_positive("in_flight"))
    parts: int | None = field(default=None, validator=_positive("parts"))
    part_size: int | None = field(default=None, validator=_positive("part_size"))
    staged: Staged | None = field(default=None, converter=attrs.converters.optional(Staged))
    #: the client cannot split this operation of one object (``operation`` says which)
    unsplit: bool = False
    operation: Direction | None = None
    client: str | None = None
    reader: str | None = None
    fallbacks: tuple[Fallback, ...] = field(default=(), converter=_fallbacks)
    request: str | None = None
    written: int | None = field(default=None, validator=_positive("written"))
    object_size: int | None = None
    workers: int | None = field(default=None, validator=_positive("workers"))
    description: str | None = None

    def __attrs_post_init__(self) -> None:
        missing = [name for name in _NEEDS[self.shape] if getattr(self, name) is None]
        if self.shape is Shape.OBJECTS and self.request is not None:
            missing += [n for n in ("written", "object_size") if getattr(self, n) is None]
        if self.unsplit and self.operation is None:
            missing.append("operation")
        if self.staged is Staged.ONE_IN_MEMORY:
            missing += [n for n in ("operation", "client") if getattr(self, n) is None]
        if missing:
            raise ConfigurationError(
                f"a {self.shape.value!r} strategy needs {', '.join(missing)}: give "
                f"{'them' if len(missing) > 1 else 'it'}"
            )

    # -- text ---------------------------------------------------------------------------
    def __str__(self) -> str:
        text = self._core()
        text += "".join(f" ({_FALLBACK_TEXT[fallback]})" for fallback in self.fallbacks)
        if self.reader is not None:
            text += f" (ranges read with {self.reader})"
        if self.workers is not None:
            text = f"{self.workers} Dask workers, each {text}, started together at a barrier"
        return text

    def _core(self) -> str:
        shape = self.shape
        if shape is Shape.DESCRIBED:
            return self.description or ""
        if shape is Shape.STREAMS:
            return f"{self.in_flight} stream(s)"
        size = format_size(self.object_size or 0)
        written = f"{self.written} objects of {size} written untimed; "
        if shape is Shape.LISTING:
            return written + "one listing of them, page after page"
        if shape is Shape.OBJECTS and self.request is not None:
            return written + f"one {self.request} per object, {self.in_flight} at a time"
        if shape is Shape.OBJECTS:
            return f"objects: one request per object, {self.in_flight} at a time"
        if shape is Shape.ONE_REQUEST:
            text = "one object in one request"
            if self.unsplit:
                text += f" ({self.operation} cannot be split)"
                return text + (" (through a staged local file)" if self.staged else "")
            return text + (", through a staged local file" if self.staged else "")
        text = (
            f"one object in {self.parts} parts of {format_size(self.part_size or 0)}, "
            f"{self.in_flight} at a time"
        )
        if self.staged is Staged.ONE_IN_MEMORY:
            holds = _HOLDS[self.operation or "upload"]
            return text + f" (staged through a local file; {self.client} {holds} memory)"
        return text + (" (staged through a local file)" if self.staged else "")

    def __repr__(self) -> str:
        return f"Strategy({str(self)!r})"

    # -- data ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the fields that are set, and ``text`` (derived, for readers
        of the file; ignored by :meth:`from_dict`)."""
        data: dict[str, Any] = {"shape": self.shape.value}
        for name, value in attrs.asdict(self, recurse=False).items():
            if name == "shape" or value is None or value is False or value == ():
                continue
            if isinstance(value, enum.Enum):
                value = value.value
            elif name == "fallbacks":
                value = [fallback.value for fallback in value]
            data[name] = value
        data["text"] = str(self)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Strategy:
        """Inverse of :meth:`to_dict`."""
        fields = {key: value for key, value in data.items() if key != "text"}
        return cls(**fields)

    @classmethod
    def of(cls, value: Strategy | str | dict[str, Any]) -> Strategy:
        """A strategy from itself, its dict (:meth:`to_dict`) or its text (:meth:`parse`)."""
        if isinstance(value, Strategy):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, dict):
            return cls.from_dict(value)
        raise ConfigurationError(
            f"a strategy is a Strategy, its dict or its text, not {type(value).__name__}"
        )

    @classmethod
    def parse(cls, text: str) -> Strategy:
        """The strategy whose text is ``text``; a text in none of the module's forms is
        kept whole as a :attr:`Shape.DESCRIBED` one. ``str(Strategy.parse(t)) == t``."""
        try:
            found = _parse(text)
        except (ValueError, KeyError, ConfigurationError):
            found = None
        if found is None or str(found) != text:
            return cls(shape=Shape.DESCRIBED, description=text)
        return found


_SIZE = r"(\d+ (?:B|KiB|MiB|GiB|TiB))"
_DASK = re.compile(r"(\d+) Dask workers, each (.*), started together at a barrier", re.S)
_WRITTEN = re.compile(rf"(\d+) objects of {_SIZE} written untimed; (.*)", re.S)
_PER_OBJECT = re.compile(r"one (\w+) per object, (\d+) at a time")
_OBJECTS = re.compile(r"objects: one request per object, (\d+) at a time")
_PARTS = re.compile(rf"one object in (\d+) parts of {_SIZE}, (\d+) at a time(.*)", re.S)
_MEMORY = re.compile(r" \(staged through a local file; (\S+) (.+) memory\)")
_UNSPLIT = re.compile(r"one object in one request \((upload|download) cannot be split\)(.*)")


def _size(text: str) -> int:
    return parse_size(text.replace(" ", ""))


def _parse(text: str) -> Strategy | None:
    """The strategy written as ``text``, or None; the caller checks it renders back."""
    if match := _DASK.fullmatch(text):
        inner = _parse(match[2])
        return None if inner is None else attrs.evolve(inner, workers=int(match[1]))
    rest, extra = _suffixes(text)
    if match := _WRITTEN.fullmatch(rest):
        written, size = int(match[1]), _size(match[2])
        if match[3] == "one listing of them, page after page":
            return Strategy(shape=Shape.LISTING, written=written, object_size=size)
        if found := _PER_OBJECT.fullmatch(match[3]):
            return Strategy(
                shape=Shape.OBJECTS,
                request=found[1],
                in_flight=int(found[2]),
                written=written,
                object_size=size,
            )
        return None
    if match := _OBJECTS.fullmatch(rest):
        return Strategy(shape=Shape.OBJECTS, in_flight=int(match[1]), **extra)
    if match := _STREAMS.fullmatch(rest):
        return Strategy(shape=Shape.STREAMS, in_flight=int(match[1]), **extra)
    if rest == "one object in one request, through a staged local file":
        return Strategy(shape=Shape.ONE_REQUEST, staged=Staged.WHOLE, **extra)
    if match := _UNSPLIT.fullmatch(rest):
        staged = Staged.WHOLE if match[2] == " (through a staged local file)" else None
        return Strategy(
            shape=Shape.ONE_REQUEST,
            unsplit=True,
            operation=match[1],  # type: ignore[arg-type]  # the pattern allows two
            staged=staged,
            **extra,
        )
    if match := _PARTS.fullmatch(rest):
        return _parts(match, extra)
    return None


_STREAMS = re.compile(r"(\d+) stream\(s\)")


def _parts(match: re.Match[str], extra: dict[str, Any]) -> Strategy:
    tail = match[4]
    staged: Staged | None = None
    if tail == " (staged through a local file)":
        staged = Staged.PARTS
    elif memory := _MEMORY.fullmatch(tail):
        staged = Staged.ONE_IN_MEMORY
        extra["client"] = memory[1]
        extra["operation"] = next(op for op, holds in _HOLDS.items() if holds == memory[2])
    elif tail:
        raise ValueError(tail)
    return Strategy(
        shape=Shape.PARTS,
        parts=int(match[1]),
        part_size=_size(match[2]),
        in_flight=int(match[3]),
        staged=staged,
        **extra,
    )


def _suffixes(text: str) -> tuple[str, dict[str, Any]]:
    """``text`` without its fallback suffixes, and the fields they set."""
    extra: dict[str, Any] = {}
    found = re.fullmatch(r"(.*) \(ranges read with (\S+)\)", text, re.S)
    if found:
        text, extra["reader"] = found[1], found[2]
    fallbacks = []
    for fallback, said in _FALLBACK_TEXT.items():
        if text.endswith(f" ({said})"):
            text = text[: -len(said) - 3]
            fallbacks.append(fallback)
    if fallbacks:
        extra["fallbacks"] = tuple(fallbacks)
    return text, extra
