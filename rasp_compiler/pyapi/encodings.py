"""tracr's annotation functions: ``Encoding``, ``annotate``, ``get_encoding``, ``is_numerical`` and
``is_categorical``.

Here an annotation is a request, as ``numerical(...)`` and ``categorical(...)`` are; an s-op
without one is reported as categorical, tracr's default, though the compiler may hold it another
way (``model.config["residual"]`` says how each s-op is held).
"""

from __future__ import annotations

import enum
from typing import Any

from rasp_compiler.pyapi.base import PRIMITIVES, PyApiTypeError, PyApiValueError, RASPExpr, SOp


class Encoding(enum.Enum):
    CATEGORICAL = "categorical"
    NUMERICAL = "numerical"


def annotate(expr: RASPExpr, **annotations: Any) -> RASPExpr:
    """Set ``name``, ``encoding`` (an ``Encoding`` or its value) and any other annotations on
    ``expr`` itself and return it (tracr returns an annotated copy; ``numerical`` and
    ``categorical`` do here too).  The shared primitives ``tokens``, ``indices``, ``length`` are
    never changed: a name or encoding for one goes on a copy."""
    if not isinstance(expr, RASPExpr):
        raise PyApiTypeError(f"annotate takes a RASP expression, got {type(expr).__name__}")
    encoding = annotations.pop("encoding", None)
    name = annotations.pop("name", None)
    if encoding is not None:
        if not isinstance(expr, SOp):
            raise PyApiTypeError("only s-ops have an encoding; this is a selector")
        try:
            encoding = Encoding(encoding.value if isinstance(encoding, Encoding) else encoding)
        except ValueError:  # enum's own error is no UserError
            raise PyApiValueError(f"{encoding!r} is not a valid Encoding: use Encoding.CATEGORICAL or "
                                  "Encoding.NUMERICAL ('categorical' or 'numerical')") from None
        # in place, as `named` is; the shared primitives are never changed (as in `numerical`)
        if any(expr is p for p in PRIMITIVES):
            expr = expr.copy()
        expr.encoding = encoding.value  # type: ignore[attr-defined]
    if name is not None:
        expr = expr.named(name)
    if annotations:
        expr.extra_annotations = {**getattr(expr, "extra_annotations", {}), **annotations}
    return expr


def get_encoding(sop: SOp) -> Encoding:
    """The encoding ``sop`` was annotated with; ``Encoding.CATEGORICAL`` where it has none, as in
    tracr (the compiler may still hold it numerically: see ``model.config["residual"]``)."""
    if not isinstance(sop, SOp):
        raise PyApiTypeError(f"only s-ops have an encoding, got {type(sop).__name__}")
    return sop.annotations["encoding"]


def is_numerical(sop: SOp) -> bool:
    """Whether ``sop`` is annotated numerical (``numerical(...)``)."""
    return get_encoding(sop) is Encoding.NUMERICAL


def is_categorical(sop: SOp) -> bool:
    """Whether ``sop`` is annotated categorical, or not annotated (tracr's default)."""
    return get_encoding(sop) is Encoding.CATEGORICAL
