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
...).  The file is compiled whole (its helper functions too) with the call appended.  With no
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


LISTINGS = [
    Listing("transpose", ("transpose",), "tokens_int", 12, (-9, 9), transpose_ref,
            program="transpose.rasp", shape={"r": 3, "c": 4}),
    Listing("matmul_4x4", ("matmul_4x4", "matmul4x4", "matmul_44"), "tokens_int", 32, (-9, 9),
            matmul_ref, {"r": 4, "c": 4}, program="matmul.rasp", shape={"r": 4, "k": 4, "c": 4}),
    Listing("matmul_3xk_kx4", ("matmul_3xk_kx4", "matmul_34", "matmul3x4", "matmul"), "tokens_int", 28,
            (-9, 9), matmul_ref, {"r": 3, "c": 4}, program="matmul.rasp", shape={"r": 3, "k": 4, "c": 4}),
    Listing("softmax_3x3", ("softmax_3x3", "softmax3x3", "softmax_33"), "tokens_float", 9, (-5, 5),
            softmax_ref, {"width": 3}, program="softmax.rasp", shape={"r": 3, "c": 3},
            base_from_listing=True),
    Listing("softmax_3xc", ("softmax_3xc", "softmax3xc", "softmax"), "tokens_float", 12, (-5, 5),
            softmax_ref, {"width": 4}, program="softmax.rasp", shape={"r": 3, "c": 4},
            base_from_listing=True),
    Listing("softmax_multihead", ("softmax_multihead", "multihead_softmax", "softmax_mh"), "tokens_float",
            18, (-5, 5), softmax_ref, {"width": 3}, program="softmax.rasp", shape={"r": 6, "c": 3},
            base_from_listing=True),
    Listing("softmax_rowmax", ("softmax_rowmax",), "tokens_float", 12, (-5, 5), softmax_ref,
            {"width": 4}, {"input_grid": "0.001"}, grid=0.001, program="softmax.rasp",
            shape={"r": 3, "c": 4}, base_from_listing=True, published=False),
    Listing("maxmin", ("maxmin", "max_min", "groupsort"), "tokens_float", 8, (-5, 5), maxmin_ref,
            options={"input_grid": "0.001"}, grid=0.001, program="maxmin.rasp"),
    Listing("match2", ("match2", "match_2"), "tokens_int", 8, (-9, 9), match2_ref, program="match2.rasp"),
    Listing("relu", ("relu", "ReLU"), "tokens_float", 8, (-5, 5), relu_ref),
    Listing("det3", ("det3", "determinant", "det"), "tokens_int", 9, (-9, 9), det3_ref, singular_share=0.1),
    Listing("inverse3", ("inverse3", "inverse", "inv3"), "tokens_int", 9, (-9, 9), inverse3_ref,
            options={"min_denominator": 0.5}, singular_share=0.2),
]
BY_NAME = {spec.name: spec for spec in LISTINGS}
_DEF = re.compile(r"^\s*def\s+([A-Za-z_][A-Za-z_0-9]*)\s*\(", re.M)


def find_listings(directory: Path) -> dict[str, tuple[Path, str, str]]:
    """Per listing found under ``directory``: (file, its text, the function name)."""
    files = sorted(p for ext in ("*.rasp", "*.txt") for p in directory.rglob(ext) if p.is_file())
    defined: list[tuple[Path, str, set[str]]] = []
    for path in files:
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        defined.append((path, text, set(_DEF.findall(text))))
    found: dict[str, tuple[Path, str, str]] = {}
    for spec in LISTINGS:
        for fn in spec.names:
            hit = next(((p, t) for p, t, names in defined if fn in names), None)
            if hit is not None:
                found[spec.name] = (hit[0], hit[1], fn)
                break
    return found


def listing_source(text: str, function: str, tokens: str) -> str:
    """The listing's text with its function's call appended as the program's result."""
    return f"{text.rstrip()}\n\n{function}({tokens});\n"


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
    """The base a softmax listing raises to the power of x (``2.718 ^ x``; e where none is read)."""
    m = re.search(r"(\d+\.\d+)\s*\^", text)
    return float(m.group(1)) if m else math.e


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
        return Measured(False, refused=err.message.splitlines()[0], options=options)
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


def run_listing(spec: Listing, found: tuple[Path, str, str], samples: int, seed: int,
                dtypes: tuple[str, ...]) -> dict[str, Any]:
    path, text, function = found
    source = listing_source(text, function, spec.tokens)
    inputs = draw_inputs(spec, samples, seed)
    args = dict(spec.reference_args)
    if spec.base_from_listing:
        args["base"] = listing_base(text)
    references = [spec.reference(np.array(x, dtype=np.float64), **args) for x in inputs]
    row: dict[str, Any] = {"listing": spec.name, "file": str(path), "function": function,
                           "length": spec.length, "input_range": list(spec.input_range),
                           "published": spec.published, "reference": spec.reference.__name__,
                           "reference_args": args, "samples": samples, "seed": seed}
    listing_interp = interpret(source, function, inputs)
    hand = program_source(spec)
    hand_interp = interpret(hand, spec.program or "", inputs) if hand is not None else None
    for dtype in dtypes:
        row[dtype] = vars(measure(source, function, spec, dtype, inputs, references, listing_interp,
                                  spec.options))
        if hand is not None and hand_interp is not None:
            # the hand-written program takes no grid and no excluded set: it needs neither
            row[f"program_{dtype}"] = vars(measure(hand, spec.program or "", spec, dtype, inputs,
                                                   references, hand_interp, {}))
    if hand is not None:
        row["program"] = f"programs/{spec.program}" + (
            " (" + ", ".join(f"{k}={v}" for k, v in spec.shape.items()) + ")" if spec.shape else "")
    return row


def matmul_sweep(found: tuple[Path, str, str], ks: list[int]) -> list[dict[str, Any]]:
    """The 3 x k times k x 4 listing against programs/matmul.rasp at r = 3, c = 4, for each k:
    parameters and layers of both (float32, inputs in -9..9), and their ratio."""
    from rasp_compiler.compiler import compile_weights
    from rasp_compiler.lang import program_from_source

    spec = BY_NAME["matmul_3xk_kx4"]
    _, text, function = found
    out = []
    for k in ks:
        n = 7 * k
        hand = Listing(spec.name, spec.names, spec.tokens, n, spec.input_range, spec.reference,
                       program="matmul.rasp", shape={"r": 3, "k": k, "c": 4})
        kw = dict(fixed_length=n, input_range=spec.input_range)
        ours = compile_weights(program_from_source(listing_source(text, function, spec.tokens), function),
                               None, n, **kw)
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
        print(f"{spec.name:18s} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    if missing:
        print(f"not found under {args.directory}: {', '.join(missing)} (function names looked for: "
              + "; ".join(f"{s.name}: {', '.join(s.names)}" for s in LISTINGS if s.name in missing) + ")",
              file=sys.stderr)
    lines = table(rows, dtypes)
    print("\n".join(lines))
    bars = {
        "all_compile": all(r[d]["compiled"] for r in rows for d in dtypes),
        "all_within_bound": all(r[d]["compiled"] and r[d]["within_bound"] == r[d]["answered"]
                                for r in rows for d in dtypes),
        "none_answered_wrongly": all(r[d].get("unanswered_wrongly", 0) == 0 for r in rows for d in dtypes),
    }
    matmul = {}
    for r in rows:
        if r["listing"].startswith("matmul") and r["float32"]["compiled"] and "program_float32" in r:
            matmul[r["listing"]] = r["float32"]["params"] / r["program_float32"]["params"]
    bars["matmul_params_over_program"] = matmul
    print("bars: " + json.dumps(bars))
    sweep = []
    if "matmul_3xk_kx4" in found and args.matmul_k and (not args.only or "matmul_3xk_kx4" in args.only):
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
