"""Helpers shared by the pictures."""

from __future__ import annotations

import re


def image_size(path: str) -> tuple[int, int]:
    """(width, height) in pixels of a PNG, or the viewBox size of an SVG."""
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if head.startswith(b"\x89PNG"):
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    m = re.search(rb'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) ([\d.]+)"', head)
    if m:
        return int(float(m.group(1))), int(float(m.group(2)))
    return 0, 0


def shorten(text: str, width: int) -> str:
    """``text`` on one line in at most ``width`` characters, cut in the middle: a label keeps both
    what it starts with and the operator that often ends it (``aggregate(…) > 0``)."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    head = (width - 1) * 2 // 3
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]
