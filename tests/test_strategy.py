"""Strategy: a typed value, one text for it, and the texts of older documents read back."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from storeprobe.backends.base import Capabilities
from storeprobe.errors import ConfigurationError
from storeprobe.planning import choose
from storeprobe.result import dump_results, load_results
from storeprobe.strategy import Fallback, Shape, Staged, Strategy
from storeprobe.units import KiB, MiB
from storeprobe.workload import Workload

FIXTURES = Path(__file__).parent / "fixtures"

#: every form of text the probe writes, with the value it stands for
TEXTS = [
    (
        "objects: one request per object, 4 at a time",
        Strategy(shape=Shape.OBJECTS, in_flight=4),
    ),
    (
        "objects: one request per object, 4 at a time (no conditional writes: absence "
        "checked by HEAD before the window)",
        Strategy(shape=Shape.OBJECTS, in_flight=4, fallbacks=(Fallback.ABSENCE_BY_HEAD,)),
    ),
    (
        "one object in 5 parts of 5 MiB, 4 at a time (ranges read with s3fs)",
        Strategy(shape=Shape.PARTS, parts=5, part_size=5 * MiB, in_flight=4, reader="s3fs"),
    ),
    (
        "one object in 8 parts of 1 MiB, 4 at a time (staged through a local file)",
        Strategy(shape=Shape.PARTS, parts=8, part_size=MiB, in_flight=4, staged=Staged.PARTS),
    ),
    (
        "one object in 3 parts of 64 MiB, 1 at a time (staged through a local file; "
        "obstore reads one request into memory)",
        Strategy(
            shape=Shape.PARTS,
            parts=3,
            part_size=64 * MiB,
            in_flight=1,
            staged=Staged.ONE_IN_MEMORY,
            operation="download",
            client="obstore",
        ),
    ),
    (
        "one object in one request, through a staged local file",
        Strategy(shape=Shape.ONE_REQUEST, staged=Staged.WHOLE),
    ),
    (
        "one object in one request (upload cannot be split)",
        Strategy(shape=Shape.ONE_REQUEST, unsplit=True, operation="upload"),
    ),
    (
        "one object in one request (download cannot be split) (through a staged local file)",
        Strategy(shape=Shape.ONE_REQUEST, unsplit=True, operation="download", staged=Staged.WHOLE),
    ),
    (
        "16 objects of 1 KiB written untimed; one HEAD per object, 4 at a time",
        Strategy(shape=Shape.OBJECTS, request="HEAD", in_flight=4, written=16, object_size=KiB),
    ),
    (
        "16 objects of 1 KiB written untimed; one listing of them, page after page",
        Strategy(shape=Shape.LISTING, written=16, object_size=KiB),
    ),
    (
        "2 Dask workers, each objects: one request per object, 2 at a time, started "
        "together at a barrier",
        Strategy(shape=Shape.OBJECTS, in_flight=2, workers=2),
    ),
    (
        "3 Dask workers, each 4 stream(s), started together at a barrier",
        Strategy(shape=Shape.STREAMS, in_flight=4, workers=3),
    ),
]


@pytest.mark.parametrize(("text", "value"), TEXTS, ids=[text[:40] for text, _ in TEXTS])
def test_each_text_is_read_into_its_value_and_written_back(text: str, value: Strategy) -> None:
    assert str(value) == text
    assert Strategy.parse(text) == value
    assert Strategy.from_dict(value.to_dict()) == value
    assert value.to_dict()["text"] == text


@pytest.mark.parametrize(
    "text",
    [
        "restic: open and lock the repository, read each needed pack's range, unlock",
        "objects",
        "",
        "one object in 5 parts of 5 MiB, 4 at a time (something new)",
        "one object in 5 parts of 5MiB, 4 at a time",  # not the probe's spacing
        "one object in 0 parts of 5 MiB, 4 at a time",  # not a value a strategy can hold
        "one object in 5 parts of 5000 kB, 4 at a time",
    ],
)
def test_a_text_in_no_known_form_is_kept_whole(text: str) -> None:
    found = Strategy.parse(text)
    assert found == Strategy(shape=Shape.DESCRIBED, description=text)
    assert str(found) == text


@given(st.text(max_size=120))
def test_any_text_renders_as_it_was_read(text: str) -> None:
    assert str(Strategy.parse(text)) == text


CAPABILITIES = [
    Capabilities(),
    Capabilities(splits_uploads=False, reads_ranges=False),
    Capabilities(splits_uploads=True, reads_ranges=True, min_part_size=5 * MiB),
    Capabilities(sends_from_file=True, lands_in_file=True),
]


@given(
    caps=st.sampled_from(CAPABILITIES),
    operation=st.sampled_from(["upload", "download"]),
    count=st.integers(1, 4),
    size=st.sampled_from([KiB, 3 * MiB, 40 * MiB, 100 * MiB + 7]),
    streams=st.integers(1, 8),
    stage=st.booleans(),
    reader=st.sampled_from([None, "s3fs"]),
    fallback=st.booleans(),
)
def test_every_strategy_the_planner_decides_reads_back_from_its_text(
    caps: Capabilities,
    operation: str,
    count: int,
    size: int,
    streams: int,
    stage: bool,
    reader: str | None,
    fallback: bool,
) -> None:
    layout = choose(
        caps,
        "client",
        operation,  # type: ignore[arg-type]  # one of the two
        Workload(count=count, size=size),
        streams,
        stage_above=MiB if stage else None,
    )
    decided = attrs.evolve(
        layout.strategy,
        reader=reader,
        fallbacks=(Fallback.ABSENCE_BY_HEAD,) if fallback else (),
    )
    read = Strategy.parse(str(decided))
    assert read.shape is not Shape.DESCRIBED
    assert str(read) == str(decided)
    # the text names the client and the direction only where it depends on them
    in_text = decided.staged is Staged.ONE_IN_MEMORY
    assert read == attrs.evolve(
        decided,
        client=decided.client if in_text else None,
        operation=decided.operation if in_text or decided.unsplit else None,
    )


def test_missing_fields_are_refused_with_their_names() -> None:
    with pytest.raises(ConfigurationError, match=r"'parts' strategy needs parts, part_size"):
        Strategy(shape=Shape.PARTS, in_flight=2)
    with pytest.raises(ConfigurationError, match="needs operation"):
        Strategy(shape=Shape.ONE_REQUEST, unsplit=True)
    with pytest.raises(ConfigurationError, match="needs written, object_size"):
        Strategy(shape=Shape.OBJECTS, in_flight=2, request="HEAD")
    with pytest.raises(ConfigurationError, match="positive int, not 0"):
        Strategy(shape=Shape.OBJECTS, in_flight=0)
    with pytest.raises(ConfigurationError, match="not int"):
        Strategy.of(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'sideways' is not a valid Shape"):
        Strategy(shape="sideways")


def _document(version: int, strategy: object) -> str:
    """The v1 fixture's upload, as a document of ``version`` with ``strategy``."""
    (upload, _) = load_results(FIXTURES / "results-v1.json")
    document = json.loads(dump_results([upload]))
    document["version"] = version
    document["results"][0]["strategy"] = strategy
    return json.dumps(document)


def test_schema_3_writes_the_value_and_reads_it_back() -> None:
    (upload, _) = load_results(FIXTURES / "results-v1.json")
    record = json.loads(dump_results([upload]))["results"][0]
    assert record["strategy"] == {
        "shape": "objects",
        "in_flight": 1,
        "text": "objects: one request per object, 1 at a time",
    }
    assert load_results(dump_results([upload])) == [upload]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_older_documents_strategy_texts_load_as_values(version: int) -> None:
    text = "one object in 5 parts of 5 MiB, 4 at a time (ranges read with s3fs)"
    (result,) = load_results(_document(version, text))
    assert result.strategy.shape is Shape.PARTS
    assert (result.strategy.parts, result.strategy.reader) == (5, "s3fs")
    assert str(result.strategy) == text
    # written again as schema 3: the value, which reads back the same
    (again,) = load_results(dump_results([result]))
    assert again == result
    assert json.loads(dump_results([result]))["results"][0]["strategy"]["shape"] == "parts"


def test_an_older_documents_own_sentence_stays_text() -> None:
    text = "files: a listing per directory, compare by size, upload new and changed files"
    (result,) = load_results(_document(2, text))
    assert result.strategy == Strategy(shape=Shape.DESCRIBED, description=text)
    assert str(result.strategy) == text


def test_a_malformed_strategy_object_is_a_format_error() -> None:
    from storeprobe.errors import ResultFormatError

    with pytest.raises(ResultFormatError, match="malformed result record"):
        load_results(_document(3, {"shape": "parts", "in_flight": 2}))
