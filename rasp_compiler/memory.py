"""How much memory a request may use: read once per check, so that a size guard refuses what
cannot fit before it allocates, instead of swapping for minutes or being killed."""

from __future__ import annotations

import os


def available_memory() -> int | None:
    """Bytes free for use now (Linux's MemAvailable; elsewhere the physical memory), or None
    where neither can be read. Free memory, not the total: a machine already half full kills a
    request sized to its total. A process whose address space is capped (``ulimit -v``) has at
    most what its cap leaves."""
    free = _machine_free()
    room = _address_space_left()
    if room is None:
        return free
    return room if free is None else min(free, room)


def _machine_free() -> int | None:
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


def _address_space_left() -> int | None:
    """What RLIMIT_AS (``ulimit -v``) leaves this process, or None where there is no cap: a
    capped run was told of the machine's free memory and then died in "out of memory"."""
    try:
        import resource

        cap = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        return None
    if cap == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            used = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
    except (OSError, ValueError, StopIteration):
        return None
    return max(0, cap - used)
