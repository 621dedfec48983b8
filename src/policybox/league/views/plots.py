"""The leaderboard's plots as inline SVG: self-contained (no script, no font, no network), for the
static report and the web page alike.

Every text drawn -- policy names above all, which entrants choose -- is escaped here, before it is
placed in the SVG, because the templates mark an SVG safe to embed. Numbers are formatted here too.
Each function returns the whole ``<svg>`` element; sizes are in CSS pixels. Each has a viewBox, so a
page scales it down to a narrow window (``max-width: 100%; height: auto`` in the page's style) and keeps its
proportions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 640
ROW = 26  # height of one row of an interval plot or a heat map
LABEL = 180  # width of the labels' column
FONT = 'font-family="sans-serif" font-size="12"'
NEGATIVE, NEUTRAL, POSITIVE = (214, 96, 77), (247, 247, 247), (67, 147, 195)


@dataclass(frozen=True)
class Interval:
    label: str
    mean: float
    low: float
    high: float


def interval_plot(rows: Sequence[Interval], title: str = "reward, mean and 95% interval") -> str:
    """One row per policy: its 95% interval as a bar, its mean as a dot, on a shared axis."""
    if not rows:
        return _empty(title)
    lo = min(row.low for row in rows)
    hi = max(row.high for row in rows)
    lo, hi = (lo - 0.5, hi + 0.5) if math.isclose(lo, hi) else (lo, hi)
    span = WIDTH - LABEL - 60
    x = lambda value: LABEL + 10 + (value - lo) / (hi - lo) * span  # noqa: E731 - the axis, once
    height = 40 + ROW * len(rows)
    parts = [_title(title)]
    for index, row in enumerate(rows):
        y = 30 + ROW * index
        parts.append(f'<text x="{LABEL}" y="{y + 4}" text-anchor="end" {FONT}>{escape(_short(row.label))}</text>')
        parts.append(
            f'<line x1="{x(row.low):.1f}" x2="{x(row.high):.1f}" y1="{y}" y2="{y}" stroke="#4393c3" stroke-width="6">'
            f"<title>{escape(row.label)}: {number(row.mean)} [{number(row.low)}, {number(row.high)}]</title></line>"
        )
        parts.append(f'<circle cx="{x(row.mean):.1f}" cy="{y}" r="4" fill="#053061"/>')
    axis_y = height - 6
    parts.append(f'<text x="{x(lo):.1f}" y="{axis_y}" {FONT}>{number(lo)}</text>')
    parts.append(f'<text x="{x(hi):.1f}" y="{axis_y}" text-anchor="end" {FONT}>{number(hi)}</text>')
    return _svg(WIDTH, height, parts, title)


def heat_map(
    labels: Sequence[str],
    cells: dict[tuple[str, str], tuple[float, str]],
    title: str,
    columns: Sequence[str] | None = None,
) -> str:
    """Row against column (``columns``: the same as the rows' ``labels`` unless given, as one name's
    row against its opponents): each cell's value in [-1, 1] coloured from red (-1) through white to
    blue (+1), with its text (``W-D-L``, say); an empty cell where the two never met."""
    columns = labels if columns is None else columns
    if not labels or not columns:
        return _empty(title)
    size = max(28, min(60, (WIDTH - LABEL) // max(1, len(columns))))
    top = 30 + LABEL // 2
    # room on the right as on top for the last column's label, drawn rising at 45° to the right
    width, height = LABEL + size * len(columns) + LABEL // 2, top + size * len(labels) + 10
    parts = [_title(title)]
    for column, label in enumerate(columns):
        cx = LABEL + size * column + size / 2
        parts.append(
            f'<text transform="translate({cx:.1f},{top - 6}) rotate(-45)" {FONT}>{escape(_short(label, 16))}</text>'
        )
    for row, a in enumerate(labels):
        y = top + size * row
        parts.append(
            f'<text x="{LABEL - 6}" y="{y + size / 2 + 4:.1f}" text-anchor="end" {FONT}>{escape(_short(a))}</text>'
        )
        for column, b in enumerate(columns):
            x = LABEL + size * column
            cell = cells.get((a, b))
            fill = "#e0e0e0" if cell is None else _colour(cell[0])
            tip = f"{a} vs {b}: " + ("never met" if cell is None else cell[1])
            parts.append(
                f'<rect x="{x}" y="{y}" width="{size - 2}" height="{size - 2}" fill="{fill}">'
                f"<title>{escape(tip)}</title></rect>"
            )
            if cell is not None:
                parts.append(
                    f'<text x="{x + size / 2 - 1:.1f}" y="{y + size / 2 + 4:.1f}" text-anchor="middle" '
                    f'font-family="sans-serif" font-size="10">{escape(cell[1])}</text>'
                )
    return _svg(width, height, parts, title)


def rating_history(points: Sequence[tuple[int, float, float]], title: str = "rating: mu and ±sigma, per match") -> str:
    """mu after each match (x: the match), with a band of ±sigma around it."""
    if not points:
        return _empty(title)
    height, left, bottom = 240, 50, 30
    xs = [p[0] for p in points]
    lows, highs = [p[1] - p[2] for p in points], [p[1] + p[2] for p in points]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(lows), max(highs) if max(highs) > min(lows) else min(lows) + 1
    x = lambda v: left + (v - x0) / (x1 - x0) * (WIDTH - left - 20)  # noqa: E731
    y = lambda v: height - bottom - (v - y0) / (y1 - y0) * (height - bottom - 30)  # noqa: E731
    band = [f"{x(m):.1f},{y(hi):.1f}" for (m, _, _), hi in zip(points, highs, strict=True)]
    band += [f"{x(m):.1f},{y(lo):.1f}" for (m, _, _), lo in reversed(list(zip(points, lows, strict=True)))]
    line = " ".join(f"{x(m):.1f},{y(mu):.1f}" for m, mu, _ in points)
    parts = [
        _title(title),
        f'<polygon points="{" ".join(band)}" fill="#92c5de" fill-opacity="0.5"/>',
        f'<polyline points="{line}" fill="none" stroke="#053061" stroke-width="2"/>',
        f'<text x="4" y="{y(y1) + 4:.1f}" {FONT}>{number(y1)}</text>',
        f'<text x="4" y="{y(y0):.1f}" {FONT}>{number(y0)}</text>',
        f'<text x="{x(x0):.1f}" y="{height - 8}" {FONT}>match {x0}</text>',
        f'<text x="{x(x1):.1f}" y="{height - 8}" text-anchor="end" {FONT}>match {x1}</text>',
    ]
    parts += [f'<circle cx="{x(m):.1f}" cy="{y(mu):.1f}" r="2" fill="#053061"/>' for m, mu, _ in points]
    return _svg(WIDTH, height, parts, title)


def bars(rows: Sequence[tuple[str, float | None]], title: str, unit: str = "") -> str:
    """One horizontal bar per label (None: no bar, a dash)."""
    if not rows:
        return _empty(title)
    top = max((value for _, value in rows if value is not None), default=0.0) or 1.0
    height = 40 + ROW * len(rows)
    span = WIDTH - LABEL - 80
    parts = [_title(title)]
    for index, (label, value) in enumerate(rows):
        y = 22 + ROW * index
        parts.append(f'<text x="{LABEL}" y="{y + 13}" text-anchor="end" {FONT}>{escape(_short(label))}</text>')
        if value is None:
            parts.append(f'<text x="{LABEL + 10}" y="{y + 13}" {FONT}>—</text>')
            continue
        length = max(1.0, value / top * span)
        parts.append(f'<rect x="{LABEL + 10}" y="{y}" width="{length:.1f}" height="16" fill="#4393c3"/>')
        parts.append(f'<text x="{LABEL + 16 + length:.1f}" y="{y + 13}" {FONT}>{number(value)}{escape(unit)}</text>')
    return _svg(WIDTH, height, parts, title)


def _svg(width: float, height: float, parts: list[str], title: str) -> str:
    body = "".join(parts)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" preserveAspectRatio="xMinYMin meet" role="img" '
        f'aria-label="{escape(title)}">{body}</svg>'
    )


def _title(text: str) -> str:
    return f'<text x="4" y="14" font-family="sans-serif" font-size="13" font-weight="bold">{escape(text)}</text>'


def _empty(title: str) -> str:
    return _svg(WIDTH, 40, [_title(title), f'<text x="4" y="32" {FONT}>nothing to show yet</text>'], title)


def _short(label: str, width: int = 24) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def number(value: float) -> str:
    """A number as the plots (and the pages beside them) show it: whole above 100, else 3 significant digits."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _colour(value: float) -> str:
    """-1 red, 0 white, +1 blue, in between a blend."""
    value = max(-1.0, min(1.0, value))
    end = POSITIVE if value > 0 else NEGATIVE
    mixed = [round(n + (e - n) * abs(value)) for n, e in zip(NEUTRAL, end, strict=True)]
    return "#" + "".join(f"{channel:02x}" for channel in mixed)
