"""What a bulk delete answers: the names the storage did not delete, each with its code.

S3's DeleteObjects deletes up to 1000 keys in one request and answers, for each key it
did not delete, an ``<Error>`` with the key, a code and a message (in quiet mode only
those; a key already gone counts as deleted). The backends that delete in bulk
(``Capabilities.deletes_per_request`` > 1) raise :class:`KeysNotDeletedError` naming
those keys, each as a :class:`KeyNotDeletedError` carrying the code (read by
:func:`~storeprobe.backends.codes.codes_of` as ``error_code``); ``storeprobe.execution``
reports each as a Leftover with its reason.

botocore hands the answer over parsed (``Errors``). obstore raises the first key's
failure alone, with no code: its error's text holds the whole ``DeleteResult`` it was
answered (object_store treats any ``<Error>`` in it as a failed request), which
:func:`refused_in` reads. A ``NoSuchKey`` error is a name already gone: never reported.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

__all__ = ["KeyNotDeletedError", "KeysNotDeletedError", "Refusal", "refused_in"]

#: one key the storage did not delete: its key, code and message (message may be empty)
Refusal = tuple[str, str, str]
#: the code S3 gives a key that does not exist: already gone, so deleted
_GONE = "NoSuchKey"
_RESULT = re.compile(r"<DeleteResult\b.*?</DeleteResult>", re.DOTALL)


class KeyNotDeletedError(OSError):
    """One name a bulk delete did not delete, with the storage's code for why."""

    def __init__(self, code: str, message: str) -> None:
        text = f"DeleteObjects answered {code or 'an error'}" + (f": {message}" if message else "")
        super().__init__(text)
        #: the storage's error code for this key (``AccessDenied``, ``InternalError``...)
        self.error_code = code


class KeysNotDeletedError(OSError):
    """A bulk delete the storage answered, naming the names it did not delete, each with
    its own error (a name already gone is never among them)."""

    def __init__(self, failures: Sequence[tuple[str, KeyNotDeletedError]]) -> None:
        super().__init__(f"{len(failures)} name(s) not deleted")
        #: (name, why) for each name the storage did not delete, in the answer's order
        self.failures: tuple[tuple[str, KeyNotDeletedError], ...] = tuple(failures)

    @classmethod
    def of(cls, refusals: Sequence[Refusal], named: dict[str, str]) -> KeysNotDeletedError | None:
        """The error for ``refusals`` (keys → full names by ``named``), None when every
        key was deleted or already gone."""
        failures = [
            (named.get(key, key), KeyNotDeletedError(code, message))
            for key, code, message in refusals
            if code != _GONE
        ]
        return cls(failures) if failures else None


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]  # S3's answers carry a namespace


def refused_in(text: str) -> list[Refusal] | None:
    """The keys a ``DeleteResult`` found in ``text`` names as not deleted (None: no
    ``DeleteResult`` in it, or one that does not parse)."""
    found = _RESULT.search(text)
    if found is None:
        return None
    try:
        root = ET.fromstring(found.group(0))  # the storage's own answer, from loopback or not
    except ET.ParseError:
        return None
    refused: list[Refusal] = []
    for element in root:
        if _local(element.tag) != "Error":
            continue
        fields = {_local(child.tag): (child.text or "").strip() for child in element}
        refused.append((fields.get("Key", ""), fields.get("Code", ""), fields.get("Message", "")))
    return refused
