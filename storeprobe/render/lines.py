"""One Result as text and HTML: its line, repr, summary and notices."""

from __future__ import annotations

import html

from storeprobe.notices import Notice
from storeprobe.render.core import _USUAL_BACKEND, ResultLike, _described, _headline, _unit_of
from storeprobe.step import Step
from storeprobe.units import format_bytes, significant


# -- one result --------------------------------------------------------------------------
def target_label(result: ResultLike) -> str:
    """The target's name across runs (``result.target_id``: the URL, or the default local
    target's ``file://$TMPDIR``), plus the client when it is not the usual one for the
    protocol."""
    usual = _USUAL_BACKEND.get(result.protocol)
    if usual is None or usual == result.backend:
        return result.target_id
    return f"{result.target_id} ({result.backend})"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def _where(result: ResultLike) -> str:
    return f"{result.operation} {result.subject.label} on {result.url}, " + _plural(
        result.streams, "stream"
    )


def busy_fraction(result: ResultLike) -> float | None:
    """The share of answers the server pushed back (503, 429), where the result tells."""
    share = getattr(result, "busy_fraction", None)
    return share if isinstance(share, float) else None


def result_line(result: ResultLike, unit: str = "workload") -> str:
    """One line, as in a lab notebook: probe, target, streams, best and median rate.

    Failed repeats and the codes of warnings are named at the end. A scenario step says
    its seconds, the bytes it moved against those that changed, and the space used.
    """
    step: Step | None = getattr(result, "step", None)
    if step is not None and result.samples:
        return _step_line(result, step)
    head = (
        f"{result.operation} {_described(result)} {result.url}, {_plural(result.streams, 'stream')}"
    )
    if result.effective_streams != result.streams:
        head += f" ({result.effective_streams} effective)"
    if not result.samples:
        first = str(result.errors[0]) if result.errors else "no repeat ran"
        return f"{head}: failed ({_plural(len(result.errors), 'error')}; first: {first})"
    concrete = _unit_of(result, unit)
    best, median = _headline(result, concrete)
    text = (
        f"{head}: {significant(best)} {concrete} best of {len(result.samples)}"
        f"{_warmed(result)} (median {significant(median)} {concrete}, "
        f"{result.best_seconds:.3f} s)"
    )
    if result.errors:
        text += f", {_plural(len(result.errors), 'failed repeat')}"
    busy = busy_fraction(result)
    if busy:
        text += f", server busy {significant(busy * 100)} %"
    if result.warnings:
        codes = ", ".join(dict.fromkeys(notice.code.value for notice in result.warnings))
        text += f"; {_plural(len(result.warnings), 'warning')}: {codes}"
    return text


def _warmed(result: ResultLike) -> str:
    """`` after 1 warm-up``: the warm-up repeats that ran (none: empty)."""
    count = len(result.warmup_samples)
    return f" after {_plural(count, 'warm-up')}" if count else ""


def _step_line(result: ResultLike, step: Step) -> str:
    space = "" if step.space_used is None else f", space used {format_bytes(step.space_used)}"
    dedup = "" if step.dedup_ratio is None else f", dedup {step.dedup_ratio:.1f}×"
    return (
        f"{step.label} ({step.method}) of {result.subject.label} on {result.url}, "
        f"{_plural(result.streams, 'stream')}: {result.best_seconds:.3f} s, moved "
        f"{format_bytes(step.moved_bytes)} (changed {format_bytes(step.changed_bytes)} of "
        f"{format_bytes(step.dataset_bytes)}){space}{dedup}"
    )


def result_repr(result: ResultLike, unit: str = "workload") -> str:
    """``<Result upload small s3://b streams=1 8192.00 KiB/s n=3 errors=0>``."""
    concrete = _unit_of(result, unit)
    figure = (
        f"{significant(_headline(result, concrete)[0])} {concrete}"
        if result.samples
        else "no samples"
    )
    return (
        f"<Result {result.operation} {result.subject.label} {result.url} "
        f"streams={result.streams} {figure} n={len(result.samples)} "
        f"errors={len(result.errors)} warnings={len(result.warnings)}>"
    )


def notice_lines(result: ResultLike, *, cli: bool = False) -> list[str]:
    """``"warning: upload small on s3://b, 4 streams: high-variation: ..."``, errors first.

    ``cli=True`` spells fixes for the command line (``--repeats 10``, not ``repeats=10``:
    :attr:`storeprobe.notices.Notice.cli_fix`).
    """
    where = _where(result)

    def text(notice: Notice) -> str:
        return notice.cli_text if cli else str(notice)

    return [f"error: {where}: {text(notice)}" for notice in result.errors] + [
        f"warning: {where}: {text(notice)}" for notice in result.warnings
    ]


def result_summary(result: ResultLike, unit: str = "workload") -> str:
    """:func:`result_line`, then one indented line per error and warning."""
    lines = [result_line(result, unit)]
    lines += [f"  error: {notice}" for notice in result.errors]
    lines += [f"  warning: {notice}" for notice in result.warnings]
    return "\n".join(lines)


def result_html(result: ResultLike, unit: str = "workload") -> str:
    """A compact two-column HTML table for notebooks (every text escaped)."""
    if result.samples:
        concrete = _unit_of(result, unit)
        best, median = (f"{significant(value)} {concrete}" for value in _headline(result, concrete))
    else:
        best = median = "failed"
    rows = [
        ("probe", f"{result.operation} {result.subject.label}"),
        ("target", f"{result.url} ({result.backend})"),
        ("streams", f"{result.streams} (effective {result.effective_streams})"),
        ("best", best),
        ("median", median),
        ("repeats ok", f"{len(result.samples)} of {len(result.samples) + len(result.errors)}"),
        *((("warm-up repeats", str(len(result.warmup_samples))),) if result.warmup_samples else ()),
        ("strategy", str(result.strategy)),
        *(("error", str(notice)) for notice in result.errors),
        *(("warning", str(notice)) for notice in result.warnings),
    ]
    body = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
        for k, v in rows
    )
    return f"<table>{body}</table>"
