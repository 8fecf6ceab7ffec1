"""The codes an error carries, read from the exception and the errors it was raised from.

Clients say what went wrong in codes before prose: botocore's ``ClientError`` has the S3
error code and the HTTP status (``response["Error"]["Code"]``,
``response["ResponseMetadata"]["HTTPStatusCode"]``; s3fs re-raises it as an ``OSError``
from it), the Azure SDK's ``HttpResponseError`` its ``error_code`` and ``status_code``,
gcsfs's ``HttpError`` its ``code`` (the status), aiohttp's ``ClientResponseError`` its
``status``, and every ``OSError`` but an ``SSLError`` its ``errno``. :func:`codes_of`
collects them, walking ``__cause__`` and ``__context__``, as strings: the service code as given
(``"NoSuchBucket"``), ``"http:404"``, and the errno's name (``"ENOENT"``). Errors are
mapped from these, never from their message, wherever the client gives one.
"""

from __future__ import annotations

import errno
import ssl

__all__ = ["codes_of", "http_status"]


def _own_codes(exc: BaseException) -> list[str]:
    found: list[str] = []
    response = getattr(exc, "response", None)
    if isinstance(response, dict):  # botocore's ClientError
        code = response.get("Error", {}).get("Code")
        if code:
            found.append(str(code))
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(status, int):
            found.append(f"http:{status}")
    error_code = getattr(exc, "error_code", None)  # the Azure SDK
    if isinstance(error_code, str) and error_code:
        found.append(error_code)
    for name in ("status_code", "status", "code"):  # Azure, aiohttp, gcsfs's HttpError
        status = getattr(exc, name, None)
        if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
            found.append(f"http:{status}")
            break
    # an SSLError's errno is OpenSSL's error number, not an errno
    if (
        isinstance(exc, OSError)
        and not isinstance(exc, ssl.SSLError)
        and isinstance(exc.errno, int)
    ):
        found.append(errno.errorcode.get(exc.errno, str(exc.errno)))
    return found


def codes_of(exc: BaseException, *, chain: bool = True) -> tuple[str, ...]:
    """Every code ``exc`` and (with ``chain``) the errors behind it carry, the outermost
    first."""
    if not chain:
        return tuple(dict.fromkeys(_own_codes(exc)))
    found: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found.extend(code for code in _own_codes(current) if code not in found)
        current = current.__cause__ or current.__context__
    return tuple(found)


def http_status(codes: tuple[str, ...]) -> int | None:
    """The first HTTP status among ``codes`` (None: none was given)."""
    for code in codes:
        if code.startswith("http:"):
            return int(code[5:])
    return None
