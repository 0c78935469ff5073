"""What a directory of ours holds, for the hint of a loader given the wrong kind.

Five commands write five kinds of directory (a compiled model, the simulator U, a fixed universal
transformer, a lookup UT backbone, an experiment run), and each loader knew only its own files: a
UT given to ``rasp eval`` answered "config.json does not exist, run 'rasp compile'", and a compiled
model given to ``rasp universal --load`` answered "no universal transformer".  ``describe`` names
the kind and the command that reads it.  Standard library only: the standalone runtime imports it
where it is there.
"""

from __future__ import annotations

import json
import os

MAX_SNIFF_BYTES = 1 << 20  # a config larger than this is not read for a hint (the loaders refuse it)


def _config_format(directory: str) -> tuple[str | None, bool]:
    """(the ``format`` of ``DIR/config.json``, whether it holds a simulator block); (None, False)
    when there is no readable config of reasonable size."""
    path = os.path.join(directory, "config.json")
    try:
        if os.path.getsize(path) > MAX_SNIFF_BYTES:
            return None, False
        with open(path, encoding="utf-8") as fh:
            config = json.load(fh)
    except (OSError, ValueError, RecursionError):
        return None, False
    if not isinstance(config, dict):
        return None, False
    fmt = config.get("format")
    return (fmt if isinstance(fmt, str) else None), isinstance(config.get("simulator"), dict)


def describe(directory: str | os.PathLike) -> str | None:
    """'a fixed universal transformer (rasp universal --save); rasp universal --load DIR reads it',
    or None when ``directory`` holds none of our artifacts."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return None

    def has(name: str) -> bool:
        return os.path.isfile(os.path.join(directory, name))

    if has("ut.safetensors"):
        return (f"{directory} holds a fixed universal transformer (rasp universal --save); "
                "rasp universal --load DIR reads it")
    if has("backbone.safetensors"):
        return (f"{directory} holds a lookup UT backbone (rasp universal --save-backbone); "
                "rasp universal --with-mlps --backbone DIR reads it")
    fmt, simulator = _config_format(directory)
    if fmt is not None and fmt.startswith("rasp-compiler-model"):
        if simulator:
            return (f"{directory} holds the universal simulator U (rasp simulate -o); "
                    "rasp simulate --model DIR runs it (rasp eval too)")
        return (f"{directory} holds a compiled model (rasp compile); rasp eval, rasp show and "
                "rasp export read it")
    if fmt is not None and fmt.startswith("rasp-experiment"):
        return f"{directory} holds a `rasp experiment` run; rasp experiment probe DIR reads it"
    if has("resume.safetensors"):
        return (f"{directory} holds an unfinished `rasp experiment` run; the same command run "
                "again finishes it")
    return None
