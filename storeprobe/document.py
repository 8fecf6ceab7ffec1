"""The results document: its schema version and history, and reading one back.

A document is a JSON object ``{"schema": "storeprobe.results", "version": N,
"storeprobe": VERSION, "results": [...]}``; each record of ``results`` is one
:meth:`storeprobe.result.Result.to_dict`. This module owns the envelope, not the
records: :func:`write_document` wraps records, :func:`read_records` reads a document's
text or file, refuses what is not a results document or a version this storeprobe
cannot read, and returns its records upgraded to the current shape (version 1's texts
become notices; versions 1 to 3 get the subject their workload implied, see
:func:`legacy_subject`). :func:`storeprobe.result.dump_results` and
:func:`~storeprobe.result.load_results` turn the records into Results and back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from storeprobe._version import __version__
from storeprobe.errors import ResultFormatError
from storeprobe.notices import Code
from storeprobe.subject import Subject, Unit
from storeprobe.units import format_size
from storeprobe.workload import Workload

__all__ = [
    "LEGACY_PER_OPERATION",
    "READABLE_VERSIONS",
    "SCHEMA_VERSION",
    "legacy_subject",
    "read_records",
    "write_document",
]

# Schema history (bump on any change to the document's shape):
#   1 — 2026-11-30: first version: results with samples, errors, warnings, environment.
#   2 — 2026-11-30: warnings and errors are objects {code, message, fix, repeat}; samples
#       gain requests_by_kind, bytes_sent and bytes_received. Version 1 still loads: its
#       texts become notices with code "unclassified", its samples get the defaults.
#       Also in 2: environment gains cpu_model, memory_bytes, operating_system, endpoint,
#       rtt_s, rtt_note; operations backup, restore, head, list, delete; results of a
#       scenario step carry "step" (absent or null otherwise); results of a distributed
#       probe carry "fleet" (absent or null otherwise), holding each worker's result;
#       "target_name" (absent or null: the URL names the target) is the default local
#       target's name across runs, file://$TMPDIR.
#   3 — 2026-12-01: a workload may carry "sizes" (its distribution: kind and parameters,
#       sizes in bytes), "total_bytes" (the sum of the sizes drawn from its seed) and
#       "size_seed"; "size" is then the distribution's median. Absent: every object
#       "size" bytes, as in versions 1 and 2, which still load unchanged. Samples carry "responses"
#       and "pushed_back" (absent or null: not observable); "warmup_samples" (absent: none)
#       holds the samples of the warm-up repeats (Settings.warmup), counted in no figure.
#       "strategy" is an object (storeprobe.strategy.Strategy.to_dict: "shape", the
#       fields that are set, and "text", derived and ignored when read); a strategy
#       that is a string (every version-1 and -2 document) is parsed into that value
#       where it is one of the probe's own texts, else kept whole as a "described" one
#       holding the text, so it renders exactly as it was written.
#   4 — 2026-12-01: each result carries "subject" (storeprobe.subject.Subject.to_dict:
#       "unit" bytes/s, operations/s or seconds/step, "operations", "label", "shape",
#       "description", "object_size" in bytes); "workload" is null where no one payload
#       workload describes the result (a metadata probe, a scenario step, a distributed
#       probe's aggregate; the aggregate's members keep theirs). Versions 1 to 3 still
#       load: each result's subject is derived from its workload as the Result.subject
#       property of version 3 did (legacy_subject), and the workload of those three
#       kinds of result, made up to carry a count and a size, is dropped.
#: the version of the results document that dump_results writes (history above)
SCHEMA_VERSION = 4
#: every version load_results reads
READABLE_VERSIONS = (1, 2, 3, 4)
#: the operations whose figure was operations per second in documents before version 4,
#: which did not store the subject: the metadata probes
LEGACY_PER_OPERATION: tuple[str, ...] = ("head", "list", "delete")
_SCHEMA_NAME = "storeprobe.results"


def write_document(records: list[dict[str, Any]]) -> str:
    """The versioned JSON document holding ``records`` (each a result's dict)."""
    document = {
        "schema": _SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "storeprobe": __version__,
        "results": records,
    }
    return json.dumps(document, indent=1, allow_nan=False)


def _upgrade_v1(record: Any) -> Any:
    """A schema-1 result record in schema-2 shape: texts become unclassified notices."""
    if not isinstance(record, dict):
        return record
    upgraded = dict(record)
    for key in ("errors", "warnings"):
        texts = record.get(key)
        if isinstance(texts, list):
            upgraded[key] = [
                {"code": Code.UNCLASSIFIED.value, "message": text}
                if isinstance(text, str)
                else text
                for text in texts
            ]
    return upgraded


def legacy_subject(operation: str, workload: Workload, *, step: bool) -> Subject:
    """The subject of a result written before version 4, from its ``operation``, its
    ``workload`` and whether it was a scenario ``step``, as version 3's ``Result.subject``
    derived it: operations per second for ``head``, ``list`` and ``delete`` (named by
    the workload's label; its objects' size 0 where the label says ``0 B``, the size a
    workload could not hold), seconds per step for a step, else bytes per second."""
    if operation in LEGACY_PER_OPERATION:
        label = workload.label
        empty = workload.size == 1 and label == f"{workload.count} × {format_size(0)}"
        return Subject(
            unit=Unit.OPERATIONS_PER_S,
            operations=workload.count,
            label=label,
            shape=label,
            description=label,
            object_size=0 if empty else workload.size,
        )
    subject = Subject.of(workload)
    return attrs.evolve(subject, unit=Unit.SECONDS_PER_STEP) if step else subject


def _upgrade_v3(record: Any) -> Any:
    """A result record of versions 1 to 3 in version-4 shape: its subject derived from
    its workload (:func:`legacy_subject`), the workload kept only for a seed probe; the
    records of a distributed probe's members likewise."""
    if not isinstance(record, dict) or "subject" in record:
        return record
    upgraded = dict(record)
    try:
        workload = Workload.from_dict(record["workload"])
        operation = record["operation"]
        step = record.get("step") is not None
        fleet = record.get("fleet")
        upgraded["subject"] = legacy_subject(operation, workload, step=step).to_dict()
        if operation in LEGACY_PER_OPERATION or step or fleet is not None:
            upgraded["workload"] = None
        if isinstance(fleet, dict) and isinstance(fleet.get("members"), list):
            members = [
                {**member, "result": _upgrade_v3(member.get("result"))}
                if isinstance(member, dict)
                else member
                for member in fleet["members"]
            ]
            upgraded["fleet"] = {**fleet, "members": members}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ResultFormatError(f"malformed result record: {exc!r}") from exc
    return upgraded


def _read_file(path: Path) -> tuple[str, str]:
    """A results file's text and its name for messages; a file that is not UTF-8 text
    (an image, an archive) or a directory is refused as not a results document."""
    origin = f"file {str(path)!r}"
    if path.is_dir():
        raise ResultFormatError(
            f"not a storeprobe results document: {origin} is a directory: give the JSON "
            "file written by 'storeprobe run --json FILE'"
        )
    try:
        return path.read_text(encoding="utf-8"), origin
    except UnicodeDecodeError:
        raise ResultFormatError(
            f"not a storeprobe results document: {origin} is not text (a results file is "
            "JSON): give the file written by 'storeprobe run --json FILE'"
        ) from None


def _read(source: str | Path) -> tuple[str, str]:
    """The document's text and where it came from (for messages)."""
    if isinstance(source, Path):
        return _read_file(source)
    if not isinstance(source, str):
        raise ResultFormatError(
            f"load_results takes JSON text or a file's path, not {type(source).__name__}"
        )
    if source.lstrip().startswith(("{", "[")):
        return source, "the JSON text given"
    path = Path(source)
    try:
        is_file = path.is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte: not a path
        is_file = False
    if is_file:
        return _read_file(path)
    shown = source if len(source) <= 80 else source[:77] + "..."
    raise ResultFormatError(
        f"not a storeprobe results document: {shown!r} is neither JSON text (it does not "
        "start with '{') nor the path of an existing file: check the file name"
    )


def read_records(source: str | Path) -> list[Any]:
    """The result records of the document in ``source`` (its JSON text, or the path of a
    file holding it), in the current version's shape; raises :class:`ResultFormatError`
    for what is not a results document or a version not in :data:`READABLE_VERSIONS`."""
    text, origin = _read(source)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultFormatError(
            f"not a storeprobe results document (bad JSON in {origin}: {exc})"
        ) from None
    if not isinstance(document, dict) or document.get("schema") != _SCHEMA_NAME:
        raise ResultFormatError(
            f"not a storeprobe results document (no 'schema' field in {origin})"
        )
    version = document.get("version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise ResultFormatError(
            f"results schema version {version!r} in {origin} is not supported by this "
            f"storeprobe (it reads versions {', '.join(map(str, READABLE_VERSIONS))}): "
            "upgrade storeprobe or re-run the probe"
        )
    records = document.get("results")
    if not isinstance(records, list):
        raise ResultFormatError(f"results document in {origin} has no 'results' list")
    if version == 1:
        records = [_upgrade_v1(record) for record in records]
    if version < 4:
        records = [_upgrade_v3(record) for record in records]
    return records
