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
