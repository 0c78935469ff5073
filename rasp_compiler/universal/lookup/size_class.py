"""Size classes of the lookup UT: the sizes one fixed backbone holds, and which class holds a program.

A class bounds what a compiled program may have: ``layers`` L, attention ``heads`` H per layer,
MLP lookup ``tables`` T per layer (every head also gets a lookup of its own), ``head_width`` k
(query/key columns per head), ``out_width`` o (output values), ``code_width`` c (columns that
carry one head's output: a head writing several features may need more than one), the ``vocab``
and ``max_len`` its embedding tables hold, ``program_tokens`` R (the rows of all lookup tables,
plus one), and whether attention is ``causal``.  The backbone depends on (L, H, T, k, o, c, causal) alone:

    width  m = 4 + o + L (H (2k + 3c + 1) + T (Hc + 3))        depth = 2L  (attention + lookup per layer)

Three named classes (``LADDER``) hold every shipped categorical program at max length 8; a
program that needs more gets a class fitted to it (``fitted``).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from typing import Any

from rasp_compiler.errors import UserError

FLAG_COLUMNS = 4   # u_in, u_prog, k_prog, k_null (see layout.py)


@dataclass(frozen=True)
class SizeClass:
    layers: int
    heads: int
    tables: int
    head_width: int
    out_width: int
    code_width: int
    vocab: int
    max_len: int
    program_tokens: int
    causal: bool = False
    name: str = ""

    # ----- derived sizes ----------------------------------------------------------------------
    @property
    def width(self) -> int:
        """The residual width m of the backbone."""
        L, H, T, k, c = self.layers, self.heads, self.tables, self.head_width, self.code_width
        return FLAG_COLUMNS + self.out_width + L * (H * (2 * k + 3 * c + 1) + T * (H * c + 3))

    @property
    def depth(self) -> int:
        return 2 * self.layers

    @property
    def lookup_heads(self) -> int:
        """Heads of a lookup layer: one per attention head, one per MLP table."""
        return self.heads + self.tables

    def backbone_key(self) -> dict:
        """What the backbone's tensors depend on (and nothing else)."""
        return {"layers": self.layers, "heads": self.heads, "tables": self.tables,
                "head_width": self.head_width, "out_width": self.out_width, "code_width": self.code_width,
                "causal": self.causal}

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> SizeClass:
        names = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or set(data) - names or not set(data) >= names - {"name", "causal"}:
            raise UserError(f"not a size class: {data!r}")
        out = cls(**data)
        out.validate()
        return out

    def validate(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "causal":
                ok = type(v) is bool
            elif f.name == "name":
                ok = type(v) is str
            else:
                ok = type(v) is int and v >= (0 if f.name == "tables" else 1)
            if not ok:
                raise UserError(f"size class field {f.name} = {v!r} is not valid")

    def describe(self) -> str:
        text = (f"L={self.layers} H={self.heads} T={self.tables} k={self.head_width} o={self.out_width} "
                f"c={self.code_width} vocab={self.vocab} len={self.max_len} rows={self.program_tokens}"
                + (" causal" if self.causal else ""))
        return f"{self.name} ({text})" if self.name else text

    def spec(self) -> str:
        """The ``--class`` text of this class (by its sizes)."""
        text = (f"L={self.layers},H={self.heads},T={self.tables},k={self.head_width},o={self.out_width},"
                f"c={self.code_width},vocab={self.vocab},len={self.max_len},rows={self.program_tokens}")
        return text + (",causal" if self.causal else "")

    def with_causal(self, causal: bool) -> SizeClass:
        data = asdict(self)
        data["causal"] = causal
        return SizeClass(**data)

    # ----- holding a program ------------------------------------------------------------------
    def too_small(self, needs: SizeClass) -> list[str]:
        """What of ``needs`` (a program's sizes) this class cannot hold, one phrase each."""
        words = {"layers": "layers", "heads": "attention heads per layer",
                 "tables": "MLP lookup tables per layer", "head_width": "query/key width per head",
                 "out_width": "output values", "code_width": "code columns per head output",
                 "vocab": "vocabulary tokens", "max_len": "max length", "program_tokens": "program tokens"}
        out = [f"{words[k]}: the program needs {getattr(needs, k)}, the class holds {getattr(self, k)}"
               for k in words if getattr(needs, k) > getattr(self, k)]
        if needs.causal != self.causal:
            out.append(f"causal mask: the program is {'causal' if needs.causal else 'not causal'}, "
                       f"the class is {'causal' if self.causal else 'not causal'}")
        return out

    def holds(self, needs: SizeClass) -> bool:
        return not self.too_small(needs)


LADDER = (
    SizeClass(layers=2, heads=1, tables=1, head_width=16, out_width=9, code_width=1, vocab=8, max_len=8,
              program_tokens=1024, name="small"),
    SizeClass(layers=3, heads=2, tables=2, head_width=20, out_width=9, code_width=1, vocab=8, max_len=8,
              program_tokens=1024, name="medium"),
    SizeClass(layers=4, heads=4, tables=2, head_width=32, out_width=17, code_width=2, vocab=8, max_len=8,
              program_tokens=4096, name="large"),
)


def fitted(needs: SizeClass) -> SizeClass:
    """The smallest class that holds ``needs``: those sizes exactly, named by them."""
    data = asdict(needs)
    data["name"] = "fitted"
    return SizeClass(**data)


def smallest_holding(needs: SizeClass, ladder: tuple[SizeClass, ...] = LADDER) -> SizeClass:
    """The first ladder class (causal as the program) that holds ``needs``, else the fitted class."""
    if not isinstance(needs, SizeClass):
        raise UserError(f"smallest_holding takes a program's needs (a SizeClass), got {type(needs).__name__}",
                        hint="smallest_holding(analyse(model).needs)")
    for c in ladder:
        c = c.with_causal(needs.causal)
        if c.holds(needs):
            return c
    return fitted(needs)


_SPEC_KEYS = {"L": "layers", "H": "heads", "T": "tables", "k": "head_width", "o": "out_width",
              "c": "code_width",
              "vocab": "vocab", "len": "max_len", "rows": "program_tokens"}


def as_class(size: Any, what: str, causal: bool = False) -> SizeClass:
    """``size`` as a SizeClass: one already, or a class name or sizes as ``--class`` takes them
    (``"small"``, ``"L=2,H=1,..."``); anything else is one UserError naming ``what`` took it (it
    was an AttributeError: "'str' object has no attribute 'validate'")."""
    if isinstance(size, SizeClass):
        return size
    if isinstance(size, str):
        return parse_class(size, causal)
    raise UserError(f"{what} takes a size class (SizeClass, or a name such as 'small'), got "
                    f"{type(size).__name__}",
                    hint="parse_class('small') or smallest_holding(analyse(model).needs)")


def _shown(text: str) -> str:
    """``text`` quoted as an error shows it: cut short past 100 characters."""
    return repr(text) if len(text) <= 100 else repr(text[:80]) + f"… ({len(text):,} characters)"


def parse_class(text: str, causal: bool = False) -> SizeClass:
    """A ladder name (small, medium, large) or sizes ``L=3,H=2,T=2,k=16,o=9,c=1,vocab=8,len=8,rows=512``
    (``,causal`` optional)."""
    if not isinstance(text, str):
        raise UserError(f"parse_class takes a class name or sizes as text, got {type(text).__name__}",
                        hint="e.g. parse_class('small') or parse_class('L=2,H=1,T=1,k=16,o=9,c=1,"
                             "vocab=8,len=8,rows=1024')")
    for c in LADDER:
        if text == c.name:
            return c.with_causal(causal)
    values: dict = {"causal": causal, "name": ""}
    shown = _shown(text)
    for item in (p.strip() for p in text.split(",") if p.strip()):
        if item == "causal":
            values["causal"] = True
            continue
        m = re.fullmatch(r"(\w+)=(\d+)", item)
        if not m or m.group(1) not in _SPEC_KEYS:
            raise UserError(f"--class {shown}: cannot read {_shown(item)}",
                            hint="a class name (" + ", ".join(c.name for c in LADDER) + ") or sizes "
                                 "like L=3,H=2,T=2,k=16,o=9,c=1,vocab=8,len=8,rows=512")
        if _SPEC_KEYS[m.group(1)] in values:  # the last one won: L=2,...,L=3 built an L=3 class
            raise UserError(f"--class {shown} gives {m.group(1)} twice",
                            hint="give each of L, H, T, k, o, c, vocab, len, rows once")
        digits = m.group(2).lstrip("0") or "0"
        if len(digits) > 15:  # int() refuses past 4,300 digits with a ValueError (a traceback)
            raise UserError(f"--class {shown}: {m.group(1)}={digits[:8]}… ({len(digits):,} digits) is "
                            "far above any size a backbone can have")
        values[_SPEC_KEYS[m.group(1)]] = int(digits)
    missing = [k for k, v in _SPEC_KEYS.items() if v not in values]
    if missing:
        raise UserError(f"--class {shown} does not give {', '.join(missing)}",
                        hint="give all of L, H, T, k, o, c, vocab, len, rows (or a class name)")
    # in the option's own names: validate() said "size class field layers = 0" for L=0
    low = [f"{key}={values[name]}" for key, name in _SPEC_KEYS.items()
           if values[name] < (0 if name == "tables" else 1)]
    if low:
        raise UserError(f"--class {shown}: {', '.join(low)} {'is' if len(low) == 1 else 'are'} below "
                        "the least size",
                        hint="T may be 0; every other size is at least 1")
    out = SizeClass(**values)
    out.validate()
    return out
