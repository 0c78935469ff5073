"""``SInfo``, what the analysis records for one s-op, and the value helpers every part reads.

An ``SInfo`` holds the s-op's encoding, its sorted value set and its *table*: its value as a
function of its bases (see the package docstring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from rasp_compiler.errors import CompileError
from rasp_compiler.graph.nodes import SourcePos


@dataclass
class SInfo:
    id: str
    kind: str  # node kind, or "convert" / "tuple" / "width_scratch"
    encoding: str  # "categorical" | "numerical"
    values: list[Any]
    bases: tuple[str, ...]
    table: dict[tuple, Any]
    base_kind: str | None = None  # "index" "length" "token" "free" "cond" for bases
    cond: dict[tuple[int, int], list[Any]] | None = None  # for "cond" bases: (i, n) -> values
    pos: SourcePos | None = None
    inputs: tuple[str, ...] = ()
    fn: Callable[..., Any] | None = None  # for virtual maps
    notes: list[str] = field(default_factory=list)
    # (a, b, c) for a map that is a·index + b·length + c in integers (``_positional_affine``)
    posaff: tuple[int, int, int] | None = None
    # a tabulated map's results by its arguments and their types (``map_info``): its table's
    # value at an assignment is the entry of its inputs' values there (``Domains.joint`` reads it)
    memo: dict[tuple, Any] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.cond is not None:
            self.cond = shared_lists(self.cond)

    @property
    def cond_by_index(self) -> bool:
        """Whether a conditional base's values depend on the index only, not on the length."""
        if self.cond is None:
            return False
        if not hasattr(self, "_cond_by_index"):
            by_i: dict[int, list] = {}
            ok = True
            for (i, _n), vals in self.cond.items():
                if by_i.setdefault(i, vals) != vals:
                    ok = False
                    break
            self._cond_by_index = ok
        return self._cond_by_index

    @property
    def numeric(self) -> bool:
        return is_numeric(self.values)


def shared_lists(cond: dict[tuple[int, int], list[Any]]) -> dict[tuple[int, int], list[Any]]:
    """``cond`` with equal value lists (the same values of the same types) made one list.

    The joint domains enumerate a context only when some base offers it other choices than an
    earlier context, and tell choices apart by the list's identity (``Domains._contexts``): a
    positional mean built one list per (index, length) made every context new, 32,896 of them
    at max_len 256 where two lists of values occur."""
    lists = list(cond.values())
    by_id = dict(zip(map(id, lists), lists, strict=True))
    canonical: dict[tuple, list[Any]] = {}
    if len(by_id) < len(lists):
        # lists already shared (a mean's, one per width) are keyed once, in order of first
        # occurrence (the first of equal lists is kept); the contexts are then mapped without a
        # Python loop, and not at all where no two lists were equal (``cond`` is not changed once
        # made: 820 contexts at max_len 40 cost more than a mean's 40 lists)
        merged = False
        for key, vals in by_id.items():
            kept = canonical.setdefault((tuple(vals), tuple(map(type, vals))), vals)
            if kept is not vals:
                by_id[key], merged = kept, True
        if not merged:
            return cond
        return dict(zip(cond, map(by_id.__getitem__, map(id, lists)), strict=True))
    # a list of its own at every context (a selector width's [w]): one pass
    return {ctx: canonical.setdefault((tuple(vals), tuple(map(type, vals))), vals)
            for ctx, vals in cond.items()}


def is_numeric(values: list[Any]) -> bool:
    """Values the interpreter will average: ints/floats, not only booleans."""
    kinds = set(map(type, values))
    if kinds <= {int, float, bool}:  # no subclass: the types tell (a mean's hundreds of floats)
        return bool(kinds) and kinds != {bool}
    return bool(values) and all(isinstance(v, (int, float)) for v in values) and \
        not all(isinstance(v, bool) for v in values)


def convert_token(v: Any, type_name: str) -> Any:
    """A vocabulary entry read as ``tokens_<type>`` (as the interpreter's ``convert_input``)."""
    try:
        value = {"str": str, "int": int, "float": float, "bool": bool, "value": lambda x: x}[type_name](v)
    except (TypeError, ValueError) as err:
        raise CompileError(f"vocabulary entry {v!r} cannot be read as {type_name} (tokens_{type_name})",
                           hint="give the vocabulary as a JSON list of numbers") from err
    if type_name == "float" and not math.isfinite(value):
        # '"nan"' crashed the assembly (a KeyError); '"inf"' compiled a model that printed inf where
        # the interpreter refuses the input
        raise CompileError(f"vocabulary entry {v!r} reads as {value} (tokens_float): a compiled model "
                           "carries finite numbers only", hint=f"drop {v!r} from the vocabulary")
    return value


def _preview(values: list[Any], k: int = 4) -> str:
    shown = ", ".join(repr(v) for v in values[:k])
    return shown + (", …" if len(values) > k else "")
