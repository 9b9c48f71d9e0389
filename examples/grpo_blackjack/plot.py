"""The learning curve as a self-contained SVG (no plotting library needed): reward per step
during training, the greedy policy on held-out hands, and the baselines as reference lines."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

WIDTH, HEIGHT = 760, 420
LEFT, RIGHT, TOP, BOTTOM = 64, 190, 40, 48
COLOURS = {"random": "#b0b0b0", "always_stand": "#d9822b", "basic_strategy": "#2e7d32"}
LABELS = {"random": "random play", "always_stand": "always stand", "basic_strategy": "basic strategy"}


def _moving_average(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def write_svg(
    path: Path, steps: list[dict[str, Any]], probes: list[dict[str, Any]], baselines: dict[str, float], title: str
) -> None:
    """Write the plot: x is the optimizer step, y the mean reward per hand."""
    train = [(s["step"], s["env_reward"]) for s in steps if s.get("env_reward") is not None]
    smooth = list(zip([x for x, _ in train], _moving_average([y for _, y in train], 10), strict=True))
    probe = [(p["step"], p["mean"]) for p in probes]
    ys = [y for _, y in smooth] + [y for _, y in probe] + list(baselines.values())
    lo = min([-0.5, *ys]) - 0.05
    hi = max([0.1, *ys]) + 0.05
    last = max([1] + [x for x, _ in train] + [x for x, _ in probe])

    def sx(x: float) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * x / last

    def sy(y: float) -> float:
        return TOP + (HEIGHT - TOP - BOTTOM) * (hi - y) / (hi - lo)

    def polyline(points: list[tuple[float, float]], colour: str, width: float, extra: str = "") -> str:
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        return f'<polyline fill="none" stroke="{colour}" stroke-width="{width}" points="{coords}" {extra}/>'

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="22" font-size="14">{escape(title)}</text>',
    ]
    tick = 0.1
    y = round(lo / tick) * tick
    while y <= hi:
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#eee"/>')
        parts.append(
            f'<text x="{LEFT - 8}" y="{sy(y) + 4:.1f}" text-anchor="end">{(y if abs(y) > 1e-9 else 0.0):+.1f}</text>'
        )
        y += tick
    for i in range(6):
        x = last * i / 5
        parts.append(f'<text x="{sx(x):.1f}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle">{x:.0f}</text>')
    parts.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 10}" text-anchor="middle">optimizer step</text>')
    parts.append(
        f'<text transform="translate(16,{(TOP + HEIGHT - BOTTOM) / 2}) rotate(-90)" text-anchor="middle">mean reward per hand</text>'
    )
    parts.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{HEIGHT - TOP - BOTTOM}" fill="none" stroke="#999"/>'
    )
    legend_y = TOP + 10
    for name, value in baselines.items():
        colour = COLOURS.get(name, "#555")
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{sy(value):.1f}" y2="{sy(value):.1f}" stroke="{colour}" stroke-dasharray="6 4"/>'
        )
        parts.append(
            f'<text x="{WIDTH - RIGHT + 8}" y="{legend_y}" fill="{colour}">- - {escape(LABELS.get(name, name))} ({value:+.3f})</text>'
        )
        legend_y += 18
    if smooth:
        parts.append(polyline(smooth, "#9fb8d8", 1.5))
        parts.append(
            f'<text x="{WIDTH - RIGHT + 8}" y="{legend_y}" fill="#6b8fbf">— training (sampled, avg of 10)</text>'
        )
        legend_y += 18
    if probe:
        parts.append(polyline(probe, "#1f4e99", 2.5))
        parts += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="#1f4e99"/>' for x, y in probe]
        parts.append(f'<text x="{WIDTH - RIGHT + 8}" y="{legend_y}" fill="#1f4e99">● greedy, held-out hands</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")
