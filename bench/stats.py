"""Small helpers: medians and plain-text tables (no numpy: the harness is plain Python)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def median(values: Iterable[float]) -> float:
    v = sorted(values)
    if not v:
        raise ValueError("median of nothing")
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def paired_difference(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Median of ``a[i] - b[i]`` (pairs measured side by side: a slow drift of the machine
    cancels within each pair) and the half-width of its ~95 % interval (1.58 IQR / √n, the
    notch of a box plot)."""
    d = sorted(x - y for x, y in zip(a, b, strict=False))
    if not d:
        raise ValueError("no pairs")
    n = len(d)
    iqr = d[(3 * n) // 4] - d[n // 4] if n >= 4 else d[-1] - d[0]
    return median(d), 1.58 * iqr / n**0.5


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned first column, right-aligned others, one header rule."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]

    def fmt(row: Sequence[str]) -> str:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(rows[0]), rule, *(fmt(r) for r in rows[1:])])


def markdown_table(rows: Sequence[Sequence[str]]) -> str:
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)
