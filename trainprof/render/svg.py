"""Plain inline SVG charts for the HTML report: line charts, dots, a stacked bar, a timeline.

Hand-written rather than a plotting library: five small charts need axes, lines and rects,
and plain SVG keeps trainprof free of a heavy dependency, makes the HTML file small and
self-contained (no script, no font, no network), and lets the page's CSS colour every mark, so
the charts follow dark mode and print. Colours are CSS classes (``s0``…, ``cause-cpu``…)
that the page's stylesheet defines. Pure: data in, markup out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

from trainprof.render.text import clean

WIDTH, HEIGHT = 760, 230
MAX_POINTS = 1600  # per line: about two points per pixel column
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 38


def _text(value: object) -> str:
    """Text for SVG markup: secrets masked, controls and undecodable bytes as escapes."""
    return escape(clean(value))


@dataclass(frozen=True)
class Series:
    """A named set of points drawn as a line, dashed line or dots, coloured by ``cls``."""

    name: str
    points: Sequence[tuple[float, float]]
    cls: str
    kind: str = "line"  # "line" | "dashed" | "dots"


@dataclass(frozen=True)
class Bar:
    label: str
    share: float  # 0..1
    cls: str
    note: str = ""


@dataclass
class Lane:
    """One row of a timeline: (start, end, label, cls) spans at a depth (0 = top of the lane)."""

    name: str
    spans: list[tuple[float, float, str, str, int]] = field(default_factory=list)
    depth: int = 1


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    out = []
    v = first
    while v <= hi + step * 1e-9:
        out.append(round(v, 10))
        v += step
    return out


def fmt_tick(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.0f}" if v == int(v) else f"{v:.1f}"
    return f"{v:g}"


def _open(title: str, width: int, height: int) -> list[str]:
    return [
        f'<svg class="chart" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{_text(title)}">',
        f"<title>{_text(title)}</title>",
    ]


def message(title: str, text: str, width: int = WIDTH, height: int = 80) -> str:
    """A chart that could not be drawn, and why (never an empty or zero line)."""
    out = _open(title, width, height)
    out.append(
        f'<text class="muted" x="{width / 2:.0f}" y="{height / 2:.0f}" '
        f'text-anchor="middle">{_text(text)}</text>'
    )
    out.append("</svg>")
    return "\n".join(out)


def line_chart(
    title: str,
    series: Sequence[Series],
    x_label: str,
    y_label: str,
    y_min: float = 0.0,
    y_max: float | None = None,
    hlines: Sequence[tuple[float, str]] = (),
    width: int = WIDTH,
    height: int = HEIGHT,
) -> str:
    """Axes with ticks, a legend, and each series; ``hlines`` are labelled reference lines."""
    pts = [p for s in series for p in s.points if math.isfinite(p[0]) and math.isfinite(p[1])]
    if not pts:
        return message(title, "nothing measured")
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    if x1 <= x0:
        x1 = x0 + 1
    top = y_max if y_max is not None else max([p[1] for p in pts] + [v for v, _l in hlines])
    top = top if top > y_min else y_min + 1
    legend, rows = _legend([(s.name, s.cls, s.kind) for s in series], LEFT, width - RIGHT)
    top_m = TOP + 14 * (rows - 1)
    height += 14 * (rows - 1)
    pw, ph = width - LEFT - RIGHT, height - top_m - BOTTOM

    def sx(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return top_m + ph - (min(max(y, y_min), top) - y_min) / (top - y_min) * ph

    out = _open(title, width, height)
    out.append(f'<rect class="plot" x="{LEFT}" y="{top_m}" width="{pw}" height="{ph}"/>')
    for v in nice_ticks(y_min, top):
        y = sy(v)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{LEFT + pw}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(
            f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{fmt_tick(v)}</text>'
        )
    for v in nice_ticks(x0, x1, 8):
        x = sx(v)
        out.append(
            f'<text class="tick" x="{x:.1f}" y="{top_m + ph + 16}" text-anchor="middle">'
            f"{fmt_tick(v)}</text>"
        )
    out.append(
        f'<text class="label" x="{LEFT + pw / 2:.0f}" y="{height - 4}" text-anchor="middle">'
        f"{_text(x_label)}</text>"
    )
    out.append(
        f'<text class="label" x="14" y="{top_m + ph / 2:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {top_m + ph / 2:.0f})">{_text(y_label)}</text>'
    )
    for v, label in hlines:
        y = sy(v)
        out.append(
            f'<line class="ref" x1="{LEFT}" x2="{LEFT + pw}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="tick" x="{LEFT + pw - 4}" y="{y - 4:.1f}" text-anchor="end">'
            f"{_text(label)}</text>"
        )
    for s in series:
        good = thin([p for p in s.points if math.isfinite(p[0]) and math.isfinite(p[1])])
        if not good:
            continue
        if s.kind == "dots":
            dots = "".join(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3"/>' for x, y in good)
            out.append(f'<g class="dots {s.cls}"><title>{_text(s.name)}</title>{dots}</g>')
        else:
            d = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in good)
            dash = " dashed" if s.kind == "dashed" else ""
            out.append(
                f'<polyline class="line {s.cls}{dash}" points="{d}">'
                f"<title>{_text(s.name)}</title></polyline>"
            )
    out.append(legend)
    out.append("</svg>")
    return "\n".join(out)


def thin(points: list[tuple[float, float]], limit: int = MAX_POINTS) -> list[tuple[float, float]]:
    """At most about ``limit`` points: each bucket's lowest and highest, in order, so a long
    run's line keeps its envelope (a spike or a dip is never averaged away)."""
    if len(points) <= limit:
        return points
    size = math.ceil(2 * len(points) / limit)
    out: list[tuple[float, float]] = []
    for i in range(0, len(points), size):
        chunk = points[i : i + size]
        lo, hi = min(chunk, key=lambda p: p[1]), max(chunk, key=lambda p: p[1])
        out.extend(sorted({lo, hi}))
    return out


def _legend(items: Sequence[tuple[str, str, str]], x: float, right: float) -> tuple[str, int]:
    """The key above a chart, wrapped onto as many rows as it needs; (markup, rows)."""
    parts = ['<g class="legend">']
    at, y, rows = x, 16, 1
    for name, cls, kind in items:
        need = 28 + 6.2 * len(name)
        if at > x and at + need > right:
            at, y, rows = x, y + 14, rows + 1
        if kind == "dots":
            parts.append(f'<circle class="{cls} swatch" cx="{at + 5:.0f}" cy="{y - 4}" r="4"/>')
        else:
            dash = " dashed" if kind == "dashed" else ""
            parts.append(
                f'<line class="line {cls}{dash}" x1="{at:.0f}" x2="{at + 12:.0f}" '
                f'y1="{y - 4}" y2="{y - 4}"/>'
            )
        parts.append(f'<text class="tick" x="{at + 16:.0f}" y="{y}">{_text(name)}</text>')
        at += need
    parts.append("</g>")
    return "".join(parts), rows


def stacked_bar(title: str, bars: Sequence[Bar], width: int = WIDTH) -> str:
    """One horizontal bar of shares (the time ledger), each part labelled below in a key."""
    rows = len(bars)
    height = 56 + 18 * rows
    pw = width - 2 * 16
    out = _open(title, width, height)
    at = 16.0
    for b in bars:
        w = max(0.0, b.share) * pw
        out.append(
            f'<rect class="{b.cls}" x="{at:.1f}" y="10" width="{w:.1f}" height="28">'
            f"<title>{_text(b.label)} {b.share:.0%}</title></rect>"
        )
        if w > 34:
            out.append(
                f'<text class="on-bar" x="{at + w / 2:.1f}" y="29" text-anchor="middle">'
                f"{b.share:.0%}</text>"
            )
        at += w
    for i, b in enumerate(bars):
        y = 58 + 18 * i
        out.append(f'<rect class="{b.cls}" x="16" y="{y - 11}" width="12" height="12"/>')
        text = f"{b.share:>4.0%}  {b.label}" + (f"  ({b.note})" if b.note else "")
        out.append(f'<text class="tick" x="36" y="{y}">{_text(text)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def timeline(
    title: str, lanes: Sequence[Lane], t0: float, t1: float, x_label: str, width: int = WIDTH
) -> str:
    """Spans on lanes over a time range (the trace, drawn): each lane's spans by depth."""
    row = 16
    label_w = 150
    pw = width - label_w - RIGHT
    heights = [max(1, lane.depth) * row + 8 for lane in lanes]
    height = TOP + sum(heights) + BOTTOM
    if t1 <= t0:
        t1 = t0 + 1

    def sx(t: float) -> float:
        return label_w + (min(max(t, t0), t1) - t0) / (t1 - t0) * pw

    out = _open(title, width, height)
    y = TOP
    for lane, h in zip(lanes, heights, strict=True):
        out.append(
            f'<line class="grid" x1="0" x2="{width}" y1="{y + h - 4}" y2="{y + h - 4}"/>'
            f'<text class="label" x="4" y="{y + 12}">{_text(lane.name)}</text>'
        )
        for a, b, label, cls, depth in lane.spans:
            if b < t0 or a > t1:
                continue
            x, w = sx(a), max(0.6, sx(b) - sx(a))
            ry = y + depth * row
            out.append(
                f'<rect class="{cls}" x="{x:.1f}" y="{ry}" width="{w:.1f}" height="{row - 2}">'
                f"<title>{_text(label)} ({(b - a) * 1e3:.1f} ms)</title></rect>"
            )
            fits = int((w - 6) / 5.6)  # characters of 10 px text that fit in the span
            if fits >= 4:
                shown = label if len(label) <= fits else label[: fits - 1] + "…"
                ink = "on-light" if cls.startswith("f") else "on-bar"
                out.append(
                    f'<text class="{ink} small" x="{x + 3:.1f}" y="{ry + 11}">{_text(shown)}</text>'
                )
        y += h
    for v in nice_ticks(t0, t1, 8):
        out.append(
            f'<text class="tick" x="{sx(v):.1f}" y="{y + 14}" text-anchor="middle">'
            f"{fmt_tick(v)}</text>"
        )
    out.append(
        f'<text class="label" x="{label_w + pw / 2:.0f}" y="{y + 32}" text-anchor="middle">'
        f"{_text(x_label)}</text>"
    )
    out.append("</svg>")
    return "\n".join(out)
