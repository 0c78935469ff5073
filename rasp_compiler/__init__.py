"""rasp-compiler: RASP programs to exact transformer weights.

The common entry points, importable from the package itself (loaded on first use, so that
``import rasp_compiler`` stays cheap and does not pull in torch):

* ``load_program(path)``, ``program_from_source(text)``, ``run(program, inputs)`` — the language;
* ``compile_program(program, vocab, max_len)`` — the compiler (``compile_weights``: the same, stopped
  before torch, NumPy weights and their files); ``load(dir)`` — a saved model.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "load_program": "rasp_compiler.lang",
    "program_from_source": "rasp_compiler.lang",
    "parse_source": "rasp_compiler.lang",
    "run": "rasp_compiler.lang",
    "compile_program": "rasp_compiler.compiler",
    "compile_weights": "rasp_compiler.compiler",
    "load": "rasp_compiler.compiler",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'rasp_compiler' has no attribute {name!r}")
