"""What a client's own retry machinery saw: attempts retried, answers, and pushback.

Each counting backend hooks its client's retry machinery (botocore's ``needs-retry``
event for s3fs, gcsfs's ``retry_request`` around each attempt, the Azure SDK's retry
policy for adlfs, storeprobe's :class:`~.obstore_retries.Retrier` for obstore) and feeds
one :class:`Tally`: a running count of the attempts the client retried, of the HTTP
answers it received (every attempt that got a status line, retried ones included) and of
those answers that pushed back (``503`` and ``429``: the server asked the client to
slow down). The probe reads :meth:`Tally.seen` before and after each timed window; the
difference (:meth:`Attempts.since`) goes on the window's
:class:`~storeprobe.result.Sample` as ``retries``, ``responses`` and ``pushed_back``.
"""

from __future__ import annotations

from collections.abc import Iterable

from attrs import define, frozen

__all__ = ["PUSHBACK_STATUSES", "Attempts", "Tally", "between", "summed"]

#: the statuses with which a server pushes back: 503 (S3's SlowDown, Azure's
#: ServerBusy) and 429 (Too Many Requests: GCS, Azure, S3-compatible servers)
PUSHBACK_STATUSES = frozenset({429, 503})


@frozen(kw_only=True)
class Attempts:
    """Counts of one client so far, or of one window (a difference of two readings)."""

    #: failed attempts the client retried
    retries: int = 0
    #: HTTP answers the client received (each attempt with a status, retried or not)
    responses: int = 0
    #: answers with status 503 or 429
    pushed_back: int = 0

    def since(self, before: Attempts) -> Attempts:
        """The counts between the reading ``before`` and this one."""
        return Attempts(
            retries=self.retries - before.retries,
            responses=self.responses - before.responses,
            pushed_back=self.pushed_back - before.pushed_back,
        )


@define
class Tally:
    """Running counts a client's retry hook adds to (one per backend's client)."""

    retries: int = 0
    responses: int = 0
    pushed_back: int = 0

    def retried(self) -> None:
        """The client decided to send a failed attempt again."""
        self.retries += 1

    def answered(self, status: int | None = None) -> None:
        """An attempt received an HTTP answer with ``status`` (None: a status the client
        does not tell, known not to be a pushback: obstore's successes and its errors
        named by class, such as ``NotFoundError``)."""
        self.responses += 1
        if status in PUSHBACK_STATUSES:
            self.pushed_back += 1

    def seen(self) -> Attempts:
        """The counts so far, frozen."""
        return Attempts(
            retries=self.retries, responses=self.responses, pushed_back=self.pushed_back
        )


def between(before: Attempts | None, after: Attempts | None) -> Attempts | None:
    """What the client's retry machinery saw between the readings ``before`` and ``after``
    (None: not observable, when either reading is)."""
    return None if after is None or before is None else after.since(before)


def summed(parts: Iterable[Attempts | None]) -> Attempts | None:
    """The counts of several windows together (None: any of them not observable)."""
    total = Attempts()
    for part in parts:
        if part is None:
            return None
        total = Attempts(
            retries=total.retries + part.retries,
            responses=total.responses + part.responses,
            pushed_back=total.pushed_back + part.pushed_back,
        )
    return total
