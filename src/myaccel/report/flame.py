"""An interactive flame graph drawn from folded stacks, as inline SVG.

Frames narrower than ``min_pct`` of all samples are merged away (they would be invisible and
only make the file big). Hovering a frame shows its name and share (an SVG ``<title>``);
clicking zooms into it, and the report's script (``report.js``) does the zooming from the
``data-x``/``data-w``/``data-d`` attributes, so the SVG itself carries no script.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from html import escape

from myaccel.profile.folded import FoldedStacks

WIDTH = 1200.0
ROW_PX = 17
FONT_PX = 11
CHAR_PX = 6.6  # average glyph width of an 11 px sans-serif font
MAX_DEPTH = 96


@dataclass
class _Node:
    name: str
    kernel: bool
    count: int = 0
    children: dict[str, _Node] = field(default_factory=dict)


def _tree(folded: FoldedStacks) -> _Node:
    root = _Node("all", False)
    for st in folded.stacks:
        root.count += st.count
        node = root
        for f in st.frames[:MAX_DEPTH]:
            label = f.symbol if not f.dso else f"{f.symbol} [{f.dso}]"
            nxt = node.children.get(label)
            if nxt is None:
                nxt = node.children[label] = _Node(label, f.kernel)
            nxt.count += st.count
            node = nxt
    return root


def _color(name: str, kernel: bool) -> str:
    h = zlib.crc32(name.encode())
    if kernel:
        r, g, b = 230 - (h % 30), 140 + (h >> 8) % 50, 40 + (h >> 16) % 30
    else:
        r, g, b = 225 + (h % 30), 90 + (h >> 8) % 110, 30 + (h >> 16) % 40
    return f"#{min(r, 255):02x}{min(g, 255):02x}{min(b, 255):02x}"


def flame_svg(folded: FoldedStacks, *, prefix: str, min_pct: float = 0.1) -> str | None:
    """The flame graph, or None when there are no samples."""
    root = _tree(folded)
    total = root.count
    if total <= 0:
        return None
    floor = total * min_pct / 100.0
    frames: list[tuple[float, float, int, _Node]] = []  # x (0..1), w (0..1), depth, node
    depth_max = 0

    def walk(node: _Node, x: float, depth: int) -> None:
        nonlocal depth_max
        w = node.count / total
        frames.append((x, w, depth, node))
        depth_max = max(depth_max, depth)
        cx = x
        for child in sorted(node.children.values(), key=lambda c: c.name):
            if child.count >= floor:
                walk(child, cx, depth + 1)
            cx += child.count / total

    walk(root, 0.0, 0)
    height = (depth_max + 1) * ROW_PX + 4
    out = [
        f'<svg class="flame" id="{prefix}" viewBox="0 0 {WIDTH:.0f} {height}" '
        f'preserveAspectRatio="xMinYMin meet" role="img" aria-label="Flame graph" '
        f'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="{FONT_PX}">'
    ]
    for x, w, depth, node in frames:
        y = height - (depth + 1) * ROW_PX
        px, pw = x * WIDTH, w * WIDTH
        share = 100.0 * node.count / total
        label = escape(node.name)
        chars = int((pw - 6) / CHAR_PX)
        text = ""
        if chars >= 3:
            text = node.name if len(node.name) <= chars else node.name[: chars - 2] + ".."
        color = "#dcdcdc" if depth == 0 else _color(node.name, node.kernel)
        out.append(
            f'<g class="fg" data-x="{x:.6f}" data-w="{w:.6f}" data-d="{depth}">'
            f"<title>{label}: {node.count} samples ({share:.2f}%)</title>"
            f'<rect x="{px:.1f}" y="{y}" width="{max(pw - 0.5, 0.1):.1f}" height="{ROW_PX - 1}" '
            f'rx="2" fill="{color}"/>'
            f'<text x="{px + 3:.1f}" y="{y + ROW_PX - 5}">{escape(text)}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)
