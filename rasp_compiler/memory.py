"""How much memory a request may use: read once per check, so that a size guard refuses what
cannot fit before it allocates, instead of swapping for minutes or being killed."""

from __future__ import annotations

import os


def available_memory() -> int | None:
    """Bytes free for use now (Linux's MemAvailable; elsewhere the physical memory), or None
    where neither can be read. Free memory, not the total: a machine already half full kills a
    request sized to its total."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
