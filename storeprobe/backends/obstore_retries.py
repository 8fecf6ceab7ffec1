"""obstore's retries, made by storeprobe so each one is counted.

obstore retries inside Rust (object_store's ``RetryExt``) and tells Python nothing about
a retry that ended in success: no hook, no counter, no log record (obstore 0.12 exposes
only ``retry_config``). A request the server pushed back on (``503 SlowDown``, ``429``)
and obstore retried left no trace in a Result, where s3fs's are counted through
botocore's ``needs-retry`` event. So storeprobe's stores are opened with
``retry_config={"max_retries": 0}`` and :class:`Retrier` retries, with the policy
obstore would have applied as storeprobe configured it before (:class:`RetryPolicy`: at
most 4 retries, as botocore's default; none once 60 s have passed since the first
attempt; object_store's backoff: 100 ms first, then a random delay between 100 ms and
twice the previous, at most 15 s), and counts every retry, every answer and every
pushback (503, 429) in a :class:`~storeprobe.backends.attempts.Tally`.

Retried, as object_store retries them (its ``RetryableRequest``): answers with status 5xx
(but 501 Not Implemented, which no retry mends and object_store retries all the same)
or 429; transport errors of kind ``Connect`` or ``Request`` (a refused or dropped
connection, a request not sent: ``error sending request``), except a TLS certificate the
client did not trust, which no retry mends; and, for an idempotent request (every one
but a create-only PUT, ``mode="create"``), transport errors of kind ``Timeout`` or
``Interrupted`` (a connection reset or closed in the middle of an answer: ``request or
response body error``); and a GET whose body failed whatever the kind, as
object_store's GET stream retries any body error. obstore says which only in its error's
text (one ``GenericError`` class for all of them, its text ending with the error's debug
form, ``HttpError { kind: Interrupted, ...``), so the kind and the status are read from
that text (``non-2xx status code: 503``). Answers are each attempt
that returned, each obstore error other than "error sending request" (a 412 is an error
class of its own, with no status in its text: not a pushback), and a 404, which obstore
raises as Python's ``FileNotFoundError`` (a backup's existence checks expect many), and
a bulk delete (DeleteObjects) answered with keys it did not delete (the delete hook
raises it as ``KeysNotDeletedError``; never retried: the answer came, per key). A bulk
delete is one request like any other: retried whole, and counted, when its answer is a
5xx or 429 or none came. One call storeprobe makes is one attempt, so a multipart upload
obstore splits by itself counts as one answer.

Two differences remain: a multipart upload obstore splits by itself
(``use_multipart=True``) fails whole when one part is refused, and is retried whole
(every part sent again), where obstore would have retried that part alone; and a GET
whose answer is cut off is sent again whole, where object_store asks for the bytes it
has not received yet.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from attrs import define, field, frozen

from storeprobe.backends.attempts import Tally
from storeprobe.backends.bulk_delete import KeysNotDeletedError
from storeprobe.request import AsyncCall, Outcome

__all__ = ["Retrier", "RetryPolicy", "retryable"]

_T = TypeVar("_T")
_STATUS = re.compile(r"non-2xx status code: (\d{3})")
#: reqwest's text for an error while a body was sent or received
_BODY = "request or response body error"
#: the kind of a transport error in the error's debug form (object_store's HttpErrorKind)
_KIND = re.compile(r"HttpError \{\s*kind: (\w+)")
#: kinds retried whatever the request: it was not sent, or no answer began
_RETRIED_KINDS = frozenset({"Connect", "Request"})
#: kinds retried when sending the request again cannot change what it does
_IDEMPOTENT_KINDS = frozenset({"Timeout", "Interrupted"})
#: obstore's text for a request that failed before any answer
_NO_ANSWER = "error sending request"
#: answers raised as classes not obstore's: a 404 is Python's ``FileNotFoundError`` (of
#: module ``builtins``), and a bulk delete answered with keys it did not delete is
#: storeprobe's ``KeysNotDeletedError`` (read from obstore's error by the delete hook)
_ANSWERS = (FileNotFoundError, KeysNotDeletedError)
#: a certificate not trusted (rustls's error names): retrying cannot help
_TLS_MARKS = ("InvalidCertificate", "CERTIFICATE_VERIFY_FAILED")


@frozen(kw_only=True)
class RetryPolicy:
    """How often and how long a failed obstore request is retried (see the module)."""

    max_retries: int = 4
    #: seconds since the first attempt after which no retry starts
    retry_timeout_s: float = 60.0
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 15.0
    base: float = 2.0


def _status(exc: BaseException) -> int | None:
    found = _STATUS.search(str(exc))
    return int(found.group(1)) if found else None


def retryable(exc: BaseException, *, idempotent: bool = True, read: bool = False) -> bool:
    """True for an obstore error object_store would retry: a 5xx or 429 answer, a request
    not sent or not answered (but not an untrusted certificate), a GET's answer cut off
    whatever the kind (``read``: object_store retries a GET's body stream on any error),
    or, when ``idempotent``, one timed out or cut off in its answer (see the module)."""
    if type(exc).__module__.split(".", 1)[0] != "obstore":
        return False
    status = _status(exc)
    if status is not None:
        # 501 Not Implemented is a server saying it lacks the feature (a conditional
        # write, a bulk delete): object_store retries it as any 5xx, no retry mends it
        return (status >= 500 and status != 501) or status == 429
    text = str(exc)
    if any(mark in text for mark in _TLS_MARKS):
        return False
    if read and _BODY in text:
        return True  # object_store's GET stream is retried on any body error, whatever kind
    kind = _KIND.search(text)
    if kind is None:
        return _NO_ANSWER in text
    return kind.group(1) in _RETRIED_KINDS or (idempotent and kind.group(1) in _IDEMPOTENT_KINDS)


class _Attempts:
    """The attempts of one request: counts each one's answer and, after a failure, says
    how long to wait before the next (:class:`RetryPolicy`). Made as the first attempt
    starts: no retry starts once ``retry_timeout_s`` have passed since."""

    __slots__ = ("attempt", "idempotent", "next", "read", "retrier", "started")

    def __init__(self, retrier: Retrier, idempotent: bool, read: bool) -> None:
        self.retrier = retrier
        self.idempotent = idempotent
        self.read = read
        self.attempt = 0
        self.next = retrier.policy.initial_backoff_s
        self.started = retrier.monotonic()

    def succeeded(self, value: _T) -> _T:
        """Count the answer of the attempt that returned ``value``; return it."""
        self.retrier.tally.answered()
        return value

    def failed(self, exc: BaseException) -> float | None:
        """Count the answer of the attempt that raised ``exc``, if it had one; the delay
        before the next attempt, or None when the failure is final."""
        retrier = self.retrier
        _count_answer(retrier.tally, exc)
        policy = retrier.policy
        if (
            not retryable(exc, idempotent=self.idempotent, read=self.read)
            or self.attempt >= policy.max_retries
        ):
            return None
        if retrier.monotonic() - self.started >= policy.retry_timeout_s:
            return None
        self.attempt += 1
        delay = self.next
        upper = max(policy.initial_backoff_s, delay * policy.base)
        drawn = retrier.uniform(policy.initial_backoff_s, upper)
        self.next = min(policy.max_backoff_s, drawn)
        retrier.tally.retried()
        return delay


def _count_answer(tally: Tally, exc: BaseException) -> None:
    """Count the answer of an attempt that raised ``exc``, if it had one."""
    if isinstance(exc, _ANSWERS):
        tally.answered()
    elif type(exc).__module__.split(".", 1)[0] == "obstore":
        status = _status(exc)
        if status is not None or _NO_ANSWER not in str(exc):
            tally.answered(status)


@define
class Retrier:
    """Retries obstore requests by :class:`RetryPolicy` and counts each retry, answer and
    pushback (:attr:`tally`: running totals, read before and after each window).

    ``sleep``, ``async_sleep``, ``monotonic`` and ``uniform`` are injectable for tests."""

    policy: RetryPolicy = field(factory=RetryPolicy)
    tally: Tally = field(factory=Tally)
    sleep: Callable[[float], None] = time.sleep
    async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    monotonic: Callable[[], float] = time.monotonic
    uniform: Callable[[float, float], float] = random.uniform

    @property
    def retries(self) -> int:
        """Failed attempts retried so far."""
        return self.tally.retries

    def wrap(self, call: AsyncCall, *, idempotent: bool = True, read: bool = False) -> AsyncCall:
        """``call``, retried (each retry counted); ``idempotent``, ``read`` (a GET): see
        :func:`retryable`."""

        async def retried() -> Outcome:
            attempts = _Attempts(self, idempotent, read)
            while True:
                try:
                    outcome = await call()
                except Exception as exc:
                    if (delay := attempts.failed(exc)) is None:
                        raise
                else:
                    return attempts.succeeded(outcome)
                await self.async_sleep(delay)

        return retried

    def run(self, call: Callable[[], _T], *, idempotent: bool = True) -> _T:
        """``call()`` (an untimed request), retried likewise."""
        attempts = _Attempts(self, idempotent, read=False)
        while True:
            try:
                value = call()
            except Exception as exc:
                if (delay := attempts.failed(exc)) is None:
                    raise
            else:
                return attempts.succeeded(value)
            self.sleep(delay)
