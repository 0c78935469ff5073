"""U's input and output sequences: where each matrix entry sits (one scalar per position).

For sizes (n, d, H) the input sequence is, row-major, one entry per position::

    A_1 .. A_H   (H blocks of d*d)   entry A_h[r][c] at  h*d*d + r*d + c
    V_1 .. V_H   (H blocks of d*d)   entry V_h[r][c] at  H*d*d + h*d*d + r*d + c
    X            (n*d)               entry X[i][c]   at  2*H*d*d + i*d + c
    padding      zeros, up to the sequence length L = max(2*H*d*d + n*d, n*H*d)

The output T(X) (n rows of H*d: the heads side by side) is read at the first n*H*d positions:
T[i][h*d + c] at position i*H*d + h*d + c.  Every later output position holds 0.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from rasp_compiler.errors import InputError


def shown(x: float) -> str:
    """``x`` as an error message prints it: short (%g), but with every digit it needs to differ
    from what %g rounds it to (1.0000001 outside [-1, 1] read "holds 1 ... outside [-1, 1]")."""
    x = float(x)
    short = f"{x:g}"
    return short if float(short) == x else repr(x)


@dataclass(frozen=True)
class SequenceLayout:
    n: int
    d: int
    heads: int

    def __post_init__(self) -> None:
        for name in ("n", "d", "heads"):
            v = getattr(self, name)
            # a NumPy integer is one (it was refused as "n must be a positive integer, got 2")
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise InputError(f"{name} must be a positive integer, got {v!r}")
            object.__setattr__(self, name, int(v))

    @property
    def v_offset(self) -> int:
        return self.heads * self.d * self.d

    @property
    def x_offset(self) -> int:
        return 2 * self.heads * self.d * self.d

    @property
    def input_length(self) -> int:
        return self.x_offset + self.n * self.d

    @property
    def output_width(self) -> int:
        return self.heads * self.d

    @property
    def length(self) -> int:
        """The sequence length L of U (input plus padding, room for the output)."""
        return max(self.input_length, self.n * self.output_width)

    def build(self, A: np.ndarray | list, V: np.ndarray | list, X: np.ndarray) -> np.ndarray:
        """The input sequence [L] from A [H, d, d] (or a list of H d x d), V likewise, X [n, d]."""
        A, V, X = (_real_array(name, m) for name, m in (("A", A), ("V", V), ("X", X)))
        H, d, n = self.heads, self.d, self.n
        if A.shape == (d, d) and H == 1:
            A = A[None]
        if V.shape == (d, d) and H == 1:
            V = V[None]
        for name, arr, shape in (("A", A, (H, d, d)), ("V", V, (H, d, d)), ("X", X, (n, d))):
            if arr.shape != shape:
                raise InputError(f"{name} has shape {arr.shape}, but this simulator is for n={n}, d={d}, "
                                 f"H={H}: {name} must have shape {shape}")
            if not np.all(np.isfinite(arr)):
                raise InputError(f"{name} holds a non-finite value (nan or inf)")
        seq = np.zeros(self.length)
        seq[: self.v_offset] = A.reshape(-1)
        seq[self.v_offset: self.x_offset] = V.reshape(-1)
        seq[self.x_offset: self.input_length] = X.reshape(-1)
        return seq

    def entry_at(self, position: int) -> str:
        """What the input sequence holds at ``position``: 'A_1[0][1]', 'V_2[1][0]', 'X[3][0]' or
        'padding' (heads counted from 1, as in the layout)."""
        d, dd = self.d, self.d * self.d
        if position < self.v_offset:
            h, rc = divmod(position, dd)
            return f"A_{h + 1}[{rc // d}][{rc % d}]"
        if position < self.x_offset:
            h, rc = divmod(position - self.v_offset, dd)
            return f"V_{h + 1}[{rc // d}][{rc % d}]"
        if position < self.input_length:
            i, c = divmod(position - self.x_offset, d)
            return f"X[{i}][{c}]"
        return "padding"

    def check_sequence(self, seq: np.ndarray | list) -> np.ndarray:
        """The sequence as floats, or an InputError saying how it does not fit this layout."""
        arr = np.asarray(seq, dtype=np.float64).reshape(-1) if len(np.shape(seq)) else np.zeros(0)
        if arr.shape[0] != self.length:
            raise InputError(
                f"the input sequence has {arr.shape[0]} values, but U for n={self.n}, d={self.d}, "
                f"H={self.heads} reads exactly {self.length} (A: {self.v_offset}, V: {self.v_offset}, "
                f"X: {self.n * self.d}, padding: {self.length - self.input_length})",
                hint="U's input is A_1..A_H, V_1..V_H, X, row-major, then zeros (rasp simulate --help); "
                     "in Python, SequenceLayout(n, d, heads).build(A, V, X) makes it")
        if not np.all(np.isfinite(arr)):
            bad = int(np.nonzero(~np.isfinite(arr))[0][0])
            raise InputError(f"the input sequence holds a non-finite value at position {bad} "
                             f"({self.entry_at(bad)})")
        if np.any(arr[self.input_length:] != 0):
            bad = self.input_length + int(np.nonzero(arr[self.input_length:])[0][0])
            raise InputError(f"the padding after X must hold zeros: position {bad} holds {shown(arr[bad])}",
                             hint=f"positions {self.input_length} to {self.length - 1} are padding")
        return arr

    def read_output(self, out: np.ndarray) -> np.ndarray:
        """T(X) [n, H*d] from U's output sequence [L] (or a batch [B, L] -> [B, n, H*d])."""
        out = np.asarray(out)
        k = self.n * self.output_width
        if out.ndim == 0 or out.shape[-1] != self.length:   # numpy's reshape error names no sizes
            raise InputError(f"U's output has {out.shape[-1] if out.ndim else 0} values per sequence, but U "
                             f"for n={self.n}, d={self.d}, H={self.heads} writes exactly {self.length}",
                             hint="pass the whole output of U's run (one value per input position)")
        return out[..., :k].reshape(*out.shape[:-1], self.n, self.output_width)


def _real_array(name: str, value: object) -> np.ndarray:
    """``value`` as float64, or an InputError: a complex array lost its imaginary part silently
    (a wrong answer) and strings raised NumPy's bare ValueError."""
    try:
        arr = np.asarray(value)
    except ValueError:  # a ragged nested list
        raise InputError(f"{name} is not a rectangular array of numbers") from None
    if arr.dtype.kind not in "biuf":
        raise InputError(f"{name} must hold real numbers, got an array of {arr.dtype}")
    return arr.astype(np.float64)
