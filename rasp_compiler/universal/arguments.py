"""The Python entry points' argument checks (``build_universal``, ``fixed_backbone``,
``Target.random``): a size or flag of the wrong type is one UserError naming it, not a TypeError
from deep inside torch ("'<' not supported between instances of 'int' and 'str'"), and never a
config that holds it (``causal="yes"`` was stored as "yes", ``layers=True`` as True, and a saved
UT then refused at load as a damaged header; ``residual="no"`` counted as a residual)."""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING

from rasp_compiler.errors import UserError

if TYPE_CHECKING:
    import torch

SEED_LIMIT = 2**63 - 1  # torch.Generator.manual_seed takes up to 2**64 - 1; derived trial seeds stay below


def whole(name: str, value: object, least: int = 1) -> int:
    """``value`` as an int (a Python or NumPy integer, not a bool), at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise UserError(f"{name} must be a whole number, got {value!r} ({type(value).__name__})")
    if int(value) < least:
        raise UserError(f"{name} must be at least {least}, got {int(value)}")
    return int(value)


def optional_whole(name: str, value: object, least: int = 1) -> int | None:
    return None if value is None else whole(name, value, least)


def flag(name: str, value: object) -> bool:
    """``value`` as a bool (True/False, or a NumPy bool); a string or number is refused."""
    if type(value).__name__ in ("bool", "bool_"):
        return bool(value)
    raise UserError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")


def finite(name: str, value: object) -> float:
    """``value`` as a finite float (an int or a float, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise UserError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def seed(value: object) -> int:
    out = whole("seed", value, least=0)
    if out > SEED_LIMIT:
        raise UserError(f"seed must be from 0 to {SEED_LIMIT} (2**63 - 1), got {out}")
    return out


def input_rows(X: object, dtype: torch.dtype) -> torch.Tensor:
    """An input X of shape (n, d) or (batch, n, d) as a tensor of ``dtype`` (a 1-D X was an
    IndexError from inside the attention)."""
    import torch

    X = torch.as_tensor(X).to(dtype)
    if X.ndim not in (2, 3):
        raise UserError(f"input X must have shape (n, d) or (batch, n, d), got {tuple(X.shape)}",
                        hint="one row of width d is X.reshape(1, -1)")
    return X
