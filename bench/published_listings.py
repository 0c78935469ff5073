"""The simulator paper's numerical listings, compiled as published and checked against NumPy.

Dutta, Chakrabarty, Ansari & Das (arXiv 2506.18739) publish RASP listings for the operations of
their universal simulator: transpose, matmul (4 x 4, and 3 x k times k x 4), row-wise softmax
(3 x 3, 3 x c, two heads side by side), MaxMin, Match2, ReLU, and a 3 x 3 inverse by cyclic
cofactors and a determinant.  Each listing is a function (``def transpose(x) { ... }``) with its
shape hard-coded or derived from ``length``; this script reads the functions from a directory the
user passes in, appends each function's call (``transpose(tokens_int);``), compiles it at a fixed
length for each dtype, and reports:

* whether it compiles, or why it is refused;
* its parameters and layers;
* max |compiled - NumPy| over 1,000 random inputs in its range (the NumPy reference computes the
  operation the listing names, with the listing's own base for e where it writes one), and
  max |compiled - interpreter| (the same program run by ``rasp run``: what the compiler's bound is
  about), with the bound the compiler stated and how many inputs it flagged (``--min-denominator``);
* the same figures for the hand-written program of ``programs/`` that computes the same operation
  at the same shape (``programs/matmul.rasp`` with r, k, c set), where there is one.

The authors' files are third-party code and are never committed here.  DIR is searched
recursively: every ``*.rasp`` and ``*.txt`` file is read, and a listing is the first file that
defines one of its function names (``LISTINGS[...].names``: ``transpose``, ``matmul``, ``softmax``
...), else a file named after it (compiled as it stands where it ends with an s-op, else through
its last ``def``).  The file is compiled whole (its helper functions too) with the call appended.
The shape is identified, not assumed: the first of the listing's candidate shapes at which the
interpreter agrees with NumPy (``identify_shape``); a first table names, per listing, the file,
the program, the output and that shape.  With no
checkout of the authors' repository at hand, ``tests/data/published_style/`` holds listings
written here in the same style (length-derived sizes, ``tokens_int``, hand-unrolled sums,
``exp / denom``, ``1 / det``), and the docs' table comes from them:

    .venv/bin/python bench/published_listings.py tests/data/published_style
    .venv/bin/python bench/published_listings.py ~/universal-simulator --samples 200 --only softmax_3x3

Prints the table of docs/simulator.md (Markdown) and writes bench/results/published_listings.json
(``--out``).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "published_listings.json"
DTYPES = ("float32", "float64")


# ---- NumPy references: the operation each listing names, on one flattened input ----------------

def transpose_ref(x: np.ndarray, rows: int = 3) -> np.ndarray:
    """An r x c matrix, row-major, to its c x r transpose, row-major."""
    return x.reshape(rows, -1).T.ravel()


def matmul_ref(x: np.ndarray, r: int, c: int) -> np.ndarray:
    """[A | B] with A r x k and B k x c (k from the length), row-major: C = A B in the first
    r * c positions, 0 elsewhere."""
    k = len(x) // (r + c)
    a, b = x[:r * k].reshape(r, k), x[r * k:r * k + k * c].reshape(k, c)
    out = np.zeros(len(x))
    out[:r * c] = (a @ b).ravel()
    return out


def softmax_ref(x: np.ndarray, width: int, base: float = math.e) -> np.ndarray:
    """Row-wise base^x / sum base^x over consecutive rows of ``width`` entries (max-subtracted, so
    it is the stable NumPy softmax; with base e it is scipy.special.softmax row by row)."""
    rows = x.reshape(-1, width)
    z = np.power(base, rows - rows.max(axis=1, keepdims=True))
    return (z / z.sum(axis=1, keepdims=True)).ravel()


def maxmin_ref(x: np.ndarray) -> np.ndarray:
    """Each adjacent pair (2m, 2m + 1) becomes (max, min)."""
    pairs = x.reshape(-1, 2)
    return np.stack([pairs.max(axis=1), pairs.min(axis=1)], axis=1).ravel()


def match2_ref(x: np.ndarray, p: int = 5) -> np.ndarray:
    """1 at i iff some j != i has x_i + x_j = 0 (mod p)."""
    xi = x.astype(np.int64)
    hit = (xi[:, None] + xi[None, :]) % p == 0
    np.fill_diagonal(hit, False)
    return hit.any(axis=1).astype(float)


def _det3(m: list[list[int]]) -> int:
    return (m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]))


def det3_ref(x: np.ndarray) -> np.ndarray:
    """The determinant of a 3 x 3 integer matrix (row-major), exactly, at every position."""
    return np.full(len(x), float(_det3([[int(v) for v in x[3 * i:3 * i + 3]] for i in range(3)])))


def inverse3_ref(x: np.ndarray) -> np.ndarray:
    """The inverse of a 3 x 3 integer matrix, row-major, exactly (adjugate / det in fractions,
    then rounded once: np.linalg.inv's own rounding is 100 times the compiled model's error in
    float64); NaN where it is singular."""
    m = [[int(v) for v in x[3 * i:3 * i + 3]] for i in range(3)]
    det = _det3(m)
    if det == 0:
        return np.full(9, np.nan)
    inv = np.empty(9)
    for r in range(3):
        for c in range(3):  # inverse[r][c] = cofactor[c][r] / det
            rows, cols = [i for i in range(3) if i != c], [j for j in range(3) if j != r]
            minor = m[rows[0]][cols[0]] * m[rows[1]][cols[1]] - m[rows[0]][cols[1]] * m[rows[1]][cols[0]]
            inv[3 * r + c] = float(Fraction((-1) ** (r + c) * minor, det))
    return inv


def relu_ref(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


# ---- the listings -----------------------------------------------------------------------------

@dataclass
class Listing:
    """One published listing: how to find it, call it, draw its inputs and check it."""

    name: str
    names: tuple[str, ...]  # function names it may have in the authors' files, first found wins
    tokens: str  # "tokens_int" or "tokens_float": the argument of the appended call
    length: int  # the fixed length it is compiled for
    input_range: tuple[float, float]
    reference: Callable[..., np.ndarray]
    reference_args: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # input_grid, min_denominator
    grid: float | None = None  # inputs drawn on this grid (a multiple of it)
    singular_share: float = 0.0  # of the inputs, this share are singular 3 x 3 matrices
    program: str | None = None  # the hand-written program of programs/ (its file name)
    shape: dict[str, int] = field(default_factory=dict)  # constants set in that program
    base_from_listing: bool = False  # the reference uses the listing's own base for e
    published: bool = True  # one of the paper's listings (False: a variant written here)
    # other shapes the authors may have hard-coded: (length, reference_args) tried, in order, after
    # (length, reference_args) when the interpreter's output on the listing disagrees with it
    shapes: tuple[tuple[int, dict[str, Any]], ...] = ()

    def candidates(self) -> list[tuple[int, dict[str, Any]]]:
        return [(self.length, dict(self.reference_args)), *((n, dict(a)) for n, a in self.shapes)]


def _grid_shapes(key: str, default: tuple[int, int]) -> tuple[tuple[int, dict[str, Any]], ...]:
    """r x c matrices of 2..5 rows and columns (the default first): (r c, {key: r or c})."""
    pairs = [(r, c) for r in (3, 4, 2, 5) for c in (3, 4, 2, 5) if (r, c) != default]
    return tuple((r * c, {key: r if key == "rows" else c}) for r, c in pairs)


def _matmul_shapes(default: tuple[int, int, int]) -> tuple[tuple[int, dict[str, Any]], ...]:
    """(r x k)(k x c) for r, k, c in 2..4 (the default first): (r k + k c, {r, c})."""
    triples = [(r, k, c) for r in (3, 4, 2) for k in (3, 4, 2) for c in (3, 4, 2) if (r, k, c) != default]
    return tuple((k * (r + c), {"r": r, "c": c}) for r, k, c in triples)


LISTINGS = [
    Listing("transpose", ("transpose",), "tokens_int", 12, (-9, 9), transpose_ref, {"rows": 3},
            program="transpose.rasp", shape={"r": 3, "c": 4}, shapes=_grid_shapes("rows", (3, 4))),
    Listing("matmul_4x4", ("matmul_4x4", "matmul4x4", "matmul_44"), "tokens_int", 32, (-9, 9),
            matmul_ref, {"r": 4, "c": 4}, program="matmul.rasp", shape={"r": 4, "k": 4, "c": 4},
            shapes=_matmul_shapes((4, 4, 4))),
    Listing("matmul_3xk_kx4", ("matmul_3xk_kx4", "matmul_34", "matmul3x4", "matmul"), "tokens_int", 28,
            (-9, 9), matmul_ref, {"r": 3, "c": 4}, program="matmul.rasp", shape={"r": 3, "k": 4, "c": 4},
            shapes=_matmul_shapes((3, 4, 4))),
    Listing("softmax_3x3", ("softmax_3x3", "softmax3x3", "softmax_33"), "tokens_float", 9, (-5, 5),
            softmax_ref, {"width": 3}, program="softmax.rasp", shape={"r": 3, "c": 3},
            base_from_listing=True, shapes=_grid_shapes("width", (3, 3))),
    Listing("softmax_3xc", ("softmax_3xc", "softmax3xc", "softmax"), "tokens_float", 12, (-5, 5),
            softmax_ref, {"width": 4}, program="softmax.rasp", shape={"r": 3, "c": 4},
            base_from_listing=True, shapes=_grid_shapes("width", (3, 4))),
    Listing("softmax_multihead", ("softmax_multihead", "multihead_softmax", "softmax_mh"), "tokens_float",
            18, (-5, 5), softmax_ref, {"width": 3}, program="softmax.rasp", shape={"r": 6, "c": 3},
            base_from_listing=True),
    Listing("softmax_rowmax", ("softmax_rowmax",), "tokens_float", 12, (-5, 5), softmax_ref,
            {"width": 4}, {"input_grid": "0.001"}, grid=0.001, program="softmax.rasp",
            shape={"r": 3, "c": 4}, base_from_listing=True, published=False),
    Listing("maxmin", ("maxmin", "max_min", "groupsort"), "tokens_float", 8, (-5, 5), maxmin_ref,
            options={"input_grid": "0.001"}, grid=0.001, program="maxmin.rasp",
            shapes=((6, {}), (4, {}), (10, {}), (12, {}))),
    Listing("match2", ("match2", "match_2"), "tokens_int", 8, (-9, 9), match2_ref, {"p": 5},
            program="match2.rasp", shapes=tuple((n, {"p": p}) for n in (8, 6, 9, 12, 4)
                                                for p in (5, 3, 7, 2, 11) if (n, p) != (8, 5))),
    Listing("relu", ("relu", "ReLU"), "tokens_float", 8, (-5, 5), relu_ref,
            shapes=((9, {}), (12, {}), (4, {}))),
    Listing("det3", ("det3", "determinant", "det"), "tokens_int", 9, (-9, 9), det3_ref, singular_share=0.1),
    Listing("inverse3", ("inverse3", "inverse", "inv3"), "tokens_int", 9, (-9, 9), inverse3_ref,
            options={"min_denominator": 0.5}, singular_share=0.2),
]
BY_NAME = {spec.name: spec for spec in LISTINGS}
_DEF = re.compile(r"^\s*def\s+([A-Za-z_][A-Za-z_0-9]*)\s*\(", re.M)


def _norm(name: str) -> str:
    """A name as listing names are compared: lower case, letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _stem(path: Path) -> str:
    return _norm(path.stem)


def find_listings(directory: Path) -> dict[str, tuple[Path, str, str | None]]:
    """Per listing found under ``directory``: (file, its text, the function to call, or None to
    compile the file as it stands: its last statement is its output).

    A listing is the first file that defines one of its function names (``def transpose(``);
    failing that, a file named after it (``transpose.rasp``, ``MatMul_4x4.txt``) that defines
    none of the listings' functions: called through its last ``def`` when the file computes no s-op
    of its own, else compiled as it stands."""
    files = sorted(p for ext in ("*.rasp", "*.txt") for p in directory.rglob(ext) if p.is_file())
    defined: list[tuple[Path, str, list[str]]] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError):
            continue
        defined.append((path, text, _DEF.findall(text)))
    known = {fn for spec in LISTINGS for fn in spec.names}
    known_norm = {_norm(fn) for fn in known}
    found: dict[str, tuple[Path, str, str | None]] = {}
    for spec in LISTINGS:
        for fn in spec.names:
            hit = next(((p, t, fn) for p, t, names in defined if fn in names), None)
            if hit is None:  # `def Transpose(`, `def mat_mul(`: the same name in another spelling
                hit = next(((p, t, n) for p, t, names in defined for n in names
                            if _norm(n) == _norm(fn) and n not in known), None)
            if hit is not None:
                found[spec.name] = hit
                break
    taken = {f[0] for f in found.values()}
    for spec in LISTINGS:
        if spec.name in found:
            continue
        wanted = {_norm(n) for n in (spec.name, *spec.names)}
        for path, text, names in defined:
            if path in taken or _stem(path) not in wanted or {_norm(n) for n in names} & known_norm:
                continue
            found[spec.name] = (path, text, None if computes_a_result(text) or not names else names[-1])
            taken.add(path)
            break
    return found


def computes_a_result(text: str) -> bool:
    """Whether the file's top level ends with an s-op (the original REPL's listing of statements),
    rather than defining functions only."""
    from rasp_compiler.errors import UserError
    from rasp_compiler.lang import program_from_source

    try:
        program_from_source(text)
    except UserError as err:
        return "has no result" not in err.message
    return True


def listing_source(text: str, function: str | None, tokens: str) -> str:
    """The listing's text with its function's call appended as the program's result (the text as
    it stands where ``function`` is None: its last statement is the result)."""
    if function is None:
        return text
    from rasp_compiler.lang.repl_commands import blank_repl_commands

    # the REPL's commands blanked (columns and lines kept): after an `exit` line the original REPL
    # reads nothing more, so a call appended there was dropped and the file's own last s-op compiled
    return f"{blank_repl_commands(text).rstrip()}\n\n{function}({tokens});\n"


def one_line(err: Exception) -> str:
    """A user error as one line: where (FILE:LINE:COL), what, and the hint."""
    lines = [ln.strip() for ln in err.render().splitlines()] if hasattr(err, "render") else [str(err)]
    hint = next((ln for ln in lines if ln.startswith("hint:")), None)
    return lines[0].replace("error: ", "", 1) + (f" ({hint})" if hint else "")


def identify_shape(spec: Listing, source: str, file: str, base: float | None,
                   samples: int = 4, seed: int = 1) -> tuple[Listing, str | None]:
    """The shape the listing computes its operation at: the first of the listing's candidate
    (length, reference arguments) whose NumPy reference agrees with the interpreter on a few random
    inputs (the listing with that length and those arguments, and the hand-written program's
    constants to match), and None; or the listing as given and why no candidate agreed."""
    from dataclasses import replace

    from rasp_compiler.errors import UserError
    from rasp_compiler.interpreter import run
    from rasp_compiler.lang import program_from_source

    program = program_from_source(source, file)  # a refusal here is the caller's to report
    first_miss = None
    for length, args in spec.candidates():
        trial = replace(spec, length=length, reference_args=args, singular_share=0.0)
        ref_args = {**args, **({"base": base} if base is not None else {})}
        agree = True
        for x in draw_inputs(trial, samples, seed):
            try:
                ref = spec.reference(np.array(x, dtype=np.float64), **ref_args)
            except ValueError:  # no such shape at this length
                agree = False
                break
            try:
                got = np.array([float(v) for v in run(program, x)])
            except (UserError, ZeroDivisionError, ValueError, TypeError) as err:
                agree = False
                first_miss = first_miss or f"length {length}: the interpreter stops: {one_line(err)}"
                break
            if got.shape != ref.shape or not np.allclose(got, ref, rtol=1e-2, atol=1e-2):
                agree = False
                shown = f"interpreter {np.round(got, 3).tolist()} vs NumPy {np.round(ref, 3).tolist()}"
                first_miss = first_miss or f"length {length} {args or ''}: {shown}"
                break
        if agree:
            shape = hand_shape(spec, length, args)
            return replace(spec, length=length, reference_args=args, shape=shape), None
    return spec, first_miss


def hand_shape(spec: Listing, length: int, args: dict[str, Any]) -> dict[str, int]:
    """The constants of the hand-written program at the identified shape."""
    if "rows" in args:
        return {"r": args["rows"], "c": length // args["rows"]}
    if "width" in args:
        return {"r": length // args["width"], "c": args["width"]}
    if "r" in args:
        return {"r": args["r"], "k": length // (args["r"] + args["c"]), "c": args["c"]}
    if "p" in args:
        return {"p": args["p"]}
    return dict(spec.shape)


def describe_shape(spec: Listing) -> str:
    """The shape a listing is compiled at, in words (``3 x 4 (length 12)``)."""
    a, n = spec.reference_args, spec.length
    if "rows" in a:
        what = f"{a['rows']} x {n // a['rows']}"
    elif "width" in a:
        what = f"{n // a['width']} rows of {a['width']}"
    elif "r" in a:
        k = n // (a["r"] + a["c"])
        what = f"({a['r']} x {k})({k} x {a['c']})"
    elif "p" in a:
        what = f"p = {a['p']}"
    else:
        what = ""
    return f"{what} (length {n})".strip() if what else f"length {n}"


def program_source(spec: Listing) -> str | None:
    """The hand-written program of programs/ at the listing's shape (its constants set)."""
    if spec.program is None:
        return None
    text = (ROOT / "programs" / spec.program).read_text()
    for name, value in spec.shape.items():
        text, count = re.subn(rf"^{name} = \d+;", f"{name} = {value};", text, flags=re.M)
        if count != 1:
            raise SystemExit(f"programs/{spec.program} has no line '{name} = N;' to set")
    return text


def listing_base(text: str) -> float:
    """The base a softmax listing raises to the power of x (``2.718 ^ x``, or ``b ^ x`` after
    ``b = 2.73;``); e where none is read."""
    from rasp_compiler.lang.repl_commands import code_of

    code = code_of(text)  # a number in a comment is not the base
    m = re.search(r"(\d+\.\d+)\s*\^", code)
    if m:
        return float(m.group(1))
    for name in re.findall(r"\b([A-Za-z_][A-Za-z_0-9]*)\s*\^", code):
        bound = re.search(rf"\b{name}\s*=\s*(\d+\.\d+)\s*;", code)
        if bound:
            return float(bound.group(1))
    return math.e


def draw_inputs(spec: Listing, count: int, seed: int) -> list[list[float]]:
    """``count`` inputs uniformly in the listing's range: integers for integer tokens, multiples
    of the grid where it has one, and values float32 holds exactly (so that both dtypes read the
    same numbers)."""
    rng = np.random.default_rng(seed)
    lo, hi = spec.input_range
    out = []
    for i in range(count):
        if i < round(spec.singular_share * count):
            out.append(singular_matrix(rng, int(lo), int(hi)))
            continue
        if spec.tokens == "tokens_int":
            x = rng.integers(math.ceil(lo), math.floor(hi) + 1, spec.length).astype(float)
        elif spec.grid is not None:
            steps = rng.integers(math.ceil(lo / spec.grid), math.floor(hi / spec.grid) + 1, spec.length)
            x = steps * spec.grid
        else:
            x = rng.uniform(lo, hi, spec.length).astype(np.float32).astype(np.float64)
        out.append([int(v) for v in x] if spec.tokens == "tokens_int" else x.tolist())
    return out


def singular_matrix(rng: np.random.Generator, lo: int, hi: int) -> list[int]:
    """A random singular 3 x 3 integer matrix with entries in [lo, hi], row-major: a zero row, two
    equal rows, or a row that is a multiple of another (by -1, or 2 where that stays in range)."""
    while True:
        m = rng.integers(lo, hi + 1, (3, 3))
        i, j = rng.choice(3, 2, replace=False)
        kind = int(rng.integers(0, 3))
        m[i] = 0 if kind == 0 else (m[j] if kind == 1 else m[j] * int(rng.choice([-1, 2])))
        if m.min() >= lo and m.max() <= hi:
            break
    flat = m.ravel() if rng.random() < 0.5 else m.T.ravel()  # dependent columns too
    return [int(v) for v in flat]


@dataclass
class Measured:
    compiled: bool
    refused: str | None = None
    params: int | None = None
    layers: int | None = None
    numpy_error: float | None = None  # max |compiled - NumPy| over the answered inputs
    interp_error: float | None = None  # max |compiled - interpreter|
    bound: dict[str, float] | None = None  # {"absolute": A, "relative": R}: |error| <= A + R |value|
    within_bound: int = 0  # answered inputs within the bound of the interpreter (and rounding)
    answered: int = 0
    flagged: int = 0
    flagged_singular: int = 0  # of the flagged, how many the reference has no answer for
    unanswered_wrongly: int = 0  # answered outside the bound, or where there is no answer (must be 0)
    options: dict[str, Any] = field(default_factory=dict)
    compile_s: float = 0.0
    plan: str | None = None


def measure(source: str, name: str, spec: Listing, dtype: str, inputs: list[list[float]],
            references: list[np.ndarray], interpreted: list[np.ndarray | None],
            options: dict[str, Any]) -> Measured:
    """Compile ``source`` at the listing's length for ``dtype`` and check it on ``inputs``."""
    from rasp_compiler.compiler import compile_weights
    from rasp_compiler.compiler.real_check import rounding_allowance
    from rasp_compiler.errors import UserError
    from rasp_compiler.lang import program_from_source

    t0 = time.perf_counter()
    try:
        program = program_from_source(source, name)
        weights = compile_weights(program, [], spec.length, fixed_length=spec.length, dtype=dtype,
                                  input_range=spec.input_range, **options)
    except UserError as err:
        return Measured(False, refused=one_line(err), options=options)
    compile_s = time.perf_counter() - t0
    model = weights.model()
    config = weights.config
    numeric = config.get("numeric")
    bound = dict(numeric["error_bound"]) if numeric else {"absolute": 0.0, "relative": 0.0}
    kept = next((t["strategy"] for t in weights.plans_tried or [] if t["outcome"] == "kept"), None)
    out = Measured(True, params=sum(int(t.size) for t in weights.tensors.values()),
                   layers=int(config["n_layers"]), bound=bound, options=options,
                   compile_s=round(compile_s, 3), plan=kept or ("numeric" if numeric else "categorical"))
    guarded = bool(config.get("guards"))
    got_all = model.run(inputs, strict=not guarded)
    np_err = it_err = 0.0
    allowance = rounding_allowance(dtype, spec.length)
    for got, ref, interp in zip(got_all, references, interpreted, strict=True):
        if got is None:  # flagged: outside the stated guarantee, not answered
            out.flagged += 1
            out.flagged_singular += int(bool(np.isnan(ref).any()))
            continue
        g = np.array([float(v) for v in got])
        out.answered += 1
        if np.isnan(ref).any() or interp is None:  # answered where the operation has no answer
            out.unanswered_wrongly += 1
            continue
        np_err = max(np_err, float(np.max(np.abs(g - ref))))
        diff = np.abs(g - interp)
        it_err = max(it_err, float(np.max(diff)))
        scale = max(1.0, float(np.max(np.abs(interp))))
        ok = np.all(diff <= bound["absolute"] + bound["relative"] * np.abs(interp) + allowance * scale)
        out.within_bound += int(bool(ok))
        out.unanswered_wrongly += int(not ok)
    out.numpy_error, out.interp_error = np_err, it_err
    return out


def interpret(source: str, name: str, inputs: list[list[float]]) -> list[np.ndarray | None]:
    """The interpreter's output on each input (None where it is undefined there)."""
    from rasp_compiler.errors import RaspError
    from rasp_compiler.interpreter import run
    from rasp_compiler.lang import program_from_source

    program = program_from_source(source, name)
    out: list[np.ndarray | None] = []
    for x in inputs:
        try:
            out.append(np.array([float(v) for v in run(program, x)]))
        except (RaspError, ZeroDivisionError):
            out.append(None)
    return out


def run_listing(spec: Listing, found: tuple[Path, str, str | None], samples: int, seed: int,
                dtypes: tuple[str, ...]) -> dict[str, Any]:
    from rasp_compiler.errors import UserError
    from rasp_compiler.lang import program_from_source

    path, text, function = found
    source = listing_source(text, function, spec.tokens)
    base = listing_base(text) if spec.base_from_listing else None
    row: dict[str, Any] = {"listing": spec.name, "file": str(path), "function": function,
                           "call": f"{function}({spec.tokens})" if function else None,
                           "published": spec.published, "reference": spec.reference.__name__,
                           "samples": samples, "seed": seed}
    try:
        row["output"] = program_from_source(source, str(path)).output
        spec, mismatch = identify_shape(spec, source, str(path), base)
    except UserError as err:  # the file does not elaborate: one located line saying why
        why = one_line(err)
        if function and getattr(err, "line", None) and err.line > len(text.rstrip().splitlines()):
            why = f"the call the bench appends, `{function}({spec.tokens})`: {why}"
        row.update(output=None, shape=None, length=spec.length, input_range=list(spec.input_range),
                   reference_args=dict(spec.reference_args), shape_mismatch=None)
        for dtype in dtypes:
            row[dtype] = vars(Measured(False, refused=why, options=spec.options))
        return row
    args = dict(spec.reference_args)
    if base is not None:
        args["base"] = base
    row.update(length=spec.length, input_range=list(spec.input_range), reference_args=args,
               shape=describe_shape(spec), shape_mismatch=mismatch)
    inputs = draw_inputs(spec, samples, seed)
    references = [spec.reference(np.array(x, dtype=np.float64), **args) for x in inputs]
    listing_interp = interpret(source, str(path), inputs)
    hand = program_source(spec) if mismatch is None else None
    hand_interp = interpret(hand, spec.program or "", inputs) if hand is not None else None
    hand_refs = references  # programs/softmax.rasp computes e itself, not the listing's 2.718 or 2.73
    if base is not None and base != math.e:
        hand_refs = [spec.reference(np.array(x, dtype=np.float64), **{**args, "base": math.e})
                     for x in inputs]
    for dtype in dtypes:
        row[dtype] = vars(measure(source, str(path), spec, dtype, inputs, references, listing_interp,
                                  spec.options))
        if hand is not None and hand_interp is not None:
            # the hand-written program takes no grid and no excluded set: it needs neither
            row[f"program_{dtype}"] = vars(measure(hand, spec.program or "", spec, dtype, inputs,
                                                   hand_refs, hand_interp, {}))
    if hand is not None:
        row["program"] = f"programs/{spec.program}" + (
            " (" + ", ".join(f"{k}={v}" for k, v in spec.shape.items()) + ")" if spec.shape else "")
    return row


def matmul_sweep(found: tuple[Path, str, str], ks: list[int]) -> list[dict[str, Any]]:
    """The 3 x k times k x 4 listing against programs/matmul.rasp at r = 3, c = 4, for each k:
    parameters and layers of both (float32, inputs in -9..9), and their ratio."""
    from rasp_compiler.compiler import compile_weights
    from rasp_compiler.errors import UserError
    from rasp_compiler.lang import program_from_source

    spec = BY_NAME["matmul_3xk_kx4"]
    _, text, function = found
    out = []
    for k in ks:
        n = 7 * k
        hand = Listing(spec.name, spec.names, spec.tokens, n, spec.input_range, spec.reference,
                       program="matmul.rasp", shape={"r": 3, "k": k, "c": 4})
        kw = dict(fixed_length=n, input_range=spec.input_range)
        try:
            ours = compile_weights(program_from_source(listing_source(text, function, spec.tokens),
                                                       str(found[0])), None, n, **kw)
        except UserError as err:  # a listing whose k is hard-coded: not at this length
            print(f"matmul 3x{k} . {k}x4 (length {n}): listing refused: {one_line(err)}", file=sys.stderr)
            continue
        theirs = compile_weights(program_from_source(program_source(hand) or "", "matmul.rasp"),
                                 None, n, **kw)
        out.append({"k": k, "length": n, "listing_params": ours.params, "listing_layers": ours.n_layers,
                    "program_params": theirs.params, "program_layers": theirs.n_layers,
                    "ratio": ours.params / theirs.params})
        print(f"matmul 3x{k} . {k}x4 (length {n}): listing {ours.params:,} ({ours.n_layers} layers), "
              f"programs/matmul.rasp {theirs.params:,} ({theirs.n_layers}), "
              f"ratio {ours.params / theirs.params:.2f}",
              file=sys.stderr, flush=True)
    return out


def _fmt_bound(m: dict[str, Any]) -> str:
    if not m["compiled"]:
        return ""
    a, r = m["bound"]["absolute"], m["bound"]["relative"]
    if a == 0 and r == 0:
        return "exact"
    return " + ".join(p for p in ((f"{a:.2g}" if a else ""), (f"{r:.2g}·\\|y\\|" if r else "")) if p)


def _fmt_cell(m: dict[str, Any] | None) -> list[str]:
    if m is None:
        return ["—"] * 5
    if not m["compiled"]:
        return [f"refused: {m['refused']}", "", "", "", ""]
    flagged = f" ({m['flagged']} flagged)" if m["flagged"] else ""
    return [f"{m['params']:,}", str(m["layers"]), f"{m['numpy_error']:.2g}{flagged}",
            f"{m['interp_error']:.2g}", _fmt_bound(m)]


def sources_table(rows: list[dict[str, Any]], directory: Path) -> list[str]:
    """What each row compiled: the file, the program (the call appended, or the file as it stands),
    the output s-op, and the shape the interpreter's output was identified at."""
    lines = ["| listing | file | program | output | shape | reference |", "|" + "---|" * 6]
    for row in rows:
        try:
            shown = str(Path(row["file"]).relative_to(directory))
        except ValueError:
            shown = row["file"]
        program = f"`{row['call']}` appended" if row.get("call") else "the file as it stands"
        if row.get("shape") is None:
            shape = "— (the file is refused)"
        elif row.get("shape_mismatch"):
            shape = (f"{row['shape']}: NOT identified: at no candidate shape does the interpreter agree with "
                     f"NumPy, so the listing computes something else there ({row['shape_mismatch']})")
        else:
            shape = row["shape"]
        ref_args = ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
                             for k, v in row.get("reference_args", {}).items())
        lines.append(f"| {row['listing']} | {shown} | {program} | {row.get('output') or '—'} | {shape} | "
                     f"{row['reference']}({ref_args}) |")
    return lines


def table(rows: list[dict[str, Any]], dtypes: tuple[str, ...]) -> list[str]:
    head = ("| listing | dtype | params | layers | max \\|compiled − NumPy\\| | max \\|compiled − "
            "interpreter\\| | stated bound | within bound | programs/ | params | layers | "
            "max \\|− NumPy\\| |")
    lines = [head, "|" + "---|" * 12]
    for row in rows:
        for dtype in dtypes:
            m = row[dtype]
            p = row.get(f"program_{dtype}")
            cells = _fmt_cell(m)
            within = f"{m['within_bound']}/{m['answered']}" if m["compiled"] else ""
            pc = _fmt_cell(p)
            opts = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in m["options"].items())
            name = row["listing"] + ("" if row["published"] else " *") + (f" ({opts})" if opts else "")
            lines.append(f"| {name} | {dtype} | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} | "
                         f"{cells[4]} | {within} | {row.get('program', '—')} | {pc[0]} | {pc[1]} | {pc[2]} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("directory", type=Path, help="a checkout of the authors' listings (searched recursively)")
    ap.add_argument("--samples", type=int, default=1000, help="random inputs per listing (default 1,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", help="only these listings (names as in the table)")
    ap.add_argument("--dtypes", nargs="*", default=list(DTYPES), choices=DTYPES)
    ap.add_argument("--matmul-k", nargs="*", type=int, default=[2, 3, 4, 6, 8], metavar="K",
                    help="inner sizes k of the 3 x k times k x 4 listing compared with programs/matmul.rasp")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    if not args.directory.is_dir():
        ap.error(f"{args.directory} is not a directory")
    unknown = sorted(set(args.only or []) - set(BY_NAME))
    if unknown:
        ap.error(f"unknown listing(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    import torch

    torch.set_num_threads(1)
    found = find_listings(args.directory)
    rows, missing = [], []
    dtypes = tuple(args.dtypes)
    for spec in LISTINGS:
        if args.only and spec.name not in args.only:
            continue
        if spec.name not in found:
            missing.append(spec.name)
            continue
        t0 = time.perf_counter()
        row = run_listing(spec, found[spec.name], args.samples, args.seed, dtypes)
        rows.append(row)
        for dtype in dtypes:
            m = row[dtype]
            what = (f"{m['params']:,} params, {m['layers']} layers, |− NumPy| {m['numpy_error']:.2g}, "
                    f"within bound {m['within_bound']}/{m['answered']}, flagged {m['flagged']}"
                    if m["compiled"] else f"refused: {m['refused']}")
            print(f"{spec.name:18s} {dtype}: {what}", file=sys.stderr, flush=True)
        print(f"{spec.name:18s} {row['file']}: "
              + (f"{row['call']} appended" if row.get("call") else "the file as it stands")
              + f", output {row.get('output')}, shape {row.get('shape')}"
              + (f" (NOT identified: {row['shape_mismatch']})" if row.get("shape_mismatch") else ""),
              file=sys.stderr, flush=True)
        print(f"{spec.name:18s} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    if missing:
        print(f"not found under {args.directory}: {', '.join(missing)} (a file defining one of these "
              "functions, or named after one of them; names looked for: "
              + "; ".join(f"{s.name}: {', '.join(s.names)}" for s in LISTINGS if s.name in missing) + ")",
              file=sys.stderr)
    print("\n".join(sources_table(rows, args.directory)) + "\n")
    lines = table(rows, dtypes)
    print("\n".join(lines))
    bars = {
        "all_compile": all(r[d]["compiled"] for r in rows for d in dtypes),
        "all_within_bound": all(r[d]["compiled"] and r[d]["within_bound"] == r[d]["answered"]
                                for r in rows for d in dtypes),
        "none_answered_wrongly": all(r[d].get("unanswered_wrongly", 0) == 0 for r in rows for d in dtypes),
        "all_shapes_identified": all(r.get("shape") and not r.get("shape_mismatch") for r in rows),
    }
    matmul = {}
    for r in rows:
        if r["listing"].startswith("matmul") and r["float32"]["compiled"] and "program_float32" in r:
            matmul[r["listing"]] = r["float32"]["params"] / r["program_float32"]["params"]
    bars["matmul_params_over_program"] = matmul
    print("bars: " + json.dumps(bars))
    sweep = []
    at_3x4 = any(r["listing"] == "matmul_3xk_kx4" and r.get("reference_args", {}).get("r") == 3
                 and r["reference_args"].get("c") == 4 for r in rows)  # the sweep varies k of 3 x k . k x 4
    if at_3x4 and args.matmul_k and (not args.only or "matmul_3xk_kx4" in args.only):
        sweep = matmul_sweep(found["matmul_3xk_kx4"], args.matmul_k)
        print("\n| k | length | listing params (layers) | programs/matmul.rasp params (layers) | ratio |")
        print("|---|---|---|---|---|")
        for c in sweep:
            print(f"| {c['k']} | {c['length']} | {c['listing_params']:,} ({c['listing_layers']}) | "
                  f"{c['program_params']:,} ({c['program_layers']}) | {c['ratio']:.2f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": "bench/published_listings.py " + " ".join(sys.argv[1:]),
                                    "directory": str(args.directory), "missing": missing, "bars": bars,
                                    "rows": rows, "matmul_sweep": sweep}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
