"""Lowering: the analysed program → residual *features* and the *ops* that write them.

A feature is an s-op held in the residual stream (one-hot or one dimension).  Ops:
* ``EmbedOp``  — tokens, indices and constants, written by the embeddings;
* ``HeadOp``   — one attention head: an aggregate, the BOS share of a selector width, or length;
* ``MLPOp``    — one positionwise function, a row per value combination of its input features.

Maps are fused: a map's MLP reads the nearest non-map s-ops (its *frontier*), so a chain of maps
costs one MLP sublayer, and only maps that something else reads are written to the residual.
Where the fused table would be too large, or would need a nonlinear function of two numerical
inputs (one hidden ReLU layer cannot do that exactly), the map reads its direct inputs instead,
with numerical ones converted to one-hot first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rasp_compiler.compiler import selectors as sl
from rasp_compiler.compiler.analysis import Analysis, SInfo
from rasp_compiler.compiler.numeric import _same, projection
from rasp_compiler.compiler.values import sorted_values
from rasp_compiler.graph.nodes import (
    Aggregate,
    Indices,
    Length,
    Map,
    SelectorWidth,
    SequenceMap,
    SourcePos,
    Tokens,
)

# Most hidden units one fused map may use before it falls back to reading its direct inputs.
UNIT_CAP = 40_000
# Fusing a function of several numerical inputs is only tried over this many joint assignments.
MULTI_NUMERIC_CAP = 6_000
ONE = "one"


@dataclass
class Feature:
    id: str
    encoding: str  # "categorical" | "numerical"
    values: list[Any]  # one-hot order (categorical) / possible values (numerical)
    node: str | None  # program node it holds, if any
    kind: str = ""

    @property
    def size(self) -> int:
        return len(self.values) if self.encoding == "categorical" else 1


@dataclass
class Block:
    query: str  # feature id or ONE
    key: str
    matrix: np.ndarray  # bool [len(query values), len(key values)]


@dataclass
class HeadOp:
    id: str
    node: str
    kind: str  # "aggregate" | "width" | "length"
    target: str
    blocks: list[Block]
    bos: str  # "default": BOS wins only when nothing is selected; "always": BOS is one of the selected
    value: str | None = None  # feature read as the value
    value_weights: list[Any] = field(default_factory=list)  # per value-feature entry
    default: Any = None
    mean: bool = False  # whether several keys may be averaged (numerical) — sets the margin
    pos: SourcePos | None = None

    @property
    def inputs(self) -> list[str]:
        out = [b.query for b in self.blocks] + [b.key for b in self.blocks]
        if self.value:
            out.append(self.value)
        return sorted({f for f in out if f != ONE})


@dataclass
class MLPOp:
    id: str
    node: str | None
    target: str
    inputs: list[str]
    rows: list[tuple[tuple, Any]]
    pos: SourcePos | None = None
    kind: str = "map"


@dataclass
class EmbedOp:
    id: str
    target: str
    kind: str  # "token" | "index" | "const"
    value: Any = None
    token_type: str = "str"

    inputs: list[str] = field(default_factory=list)


Op = HeadOp | MLPOp | EmbedOp


class Lowering:
    def __init__(self, an: Analysis) -> None:
        self.an = an
        self.features: dict[str, Feature] = {}
        self.ops: dict[str, Op] = {}  # keyed by the feature they write
        self._frontiers: dict[str, list[str]] = {}
        self.output = self.need(an.program.output)

    # ------------------------------------------------------------------ features
    def _feature(self, sid: str, info: SInfo, node: str | None, kind: str = "") -> Feature:
        f = Feature(sid, info.encoding, list(info.values), node, kind or info.kind)
        self.features[sid] = f
        return f

    def need(self, sid: str) -> str:
        """Make s-op ``sid`` a residual feature (in its own encoding); returns the feature id."""
        if sid in self.features:
            return sid
        an = self.an
        info = an.info[sid]
        node = an.node(sid) if sid in an.graph else None
        if sid.endswith(".bos_weight"):
            self._width_head(sid[: -len(".bos_weight")])
        elif info.base_kind == "const":
            self._feature(sid, info, sid)
            self.ops[sid] = EmbedOp(sid, sid, "const", value=info.values[0])
        elif isinstance(node, Tokens):
            self._feature(sid, info, sid)
            self.ops[sid] = EmbedOp(sid, sid, "token", token_type=node.type)
        elif isinstance(node, Indices):
            self._feature(sid, info, sid)
            self.ops[sid] = EmbedOp(sid, sid, "index")
        elif isinstance(node, Length):
            self._width(sid, None, info)
        elif isinstance(node, Aggregate):
            self._aggregate(sid, node, info)
        elif isinstance(node, SelectorWidth):
            self._width(sid, node.inputs[0], info)
        elif isinstance(node, (Map, SequenceMap)) or info.kind in ("convert", "tuple"):
            self._map(sid, info)
        else:
            raise an.error(sid, f"cannot compile {an.describe(sid)}")
        return sid

    def need_categorical(self, sid: str) -> str:
        info = self.an.info[sid]
        if info.encoding == "categorical":
            return self.need(sid)
        cid = f"{sid}:onehot"
        if cid not in self.an.info:
            self.an.info[cid] = SInfo(cid, "convert", "categorical", list(info.values), info.bases,
                                      info.table, base_kind=info.base_kind, cond=info.cond,
                                      pos=info.pos, inputs=(sid,), fn=lambda x: x)
        if cid not in self.features:
            src = self.need(sid)
            self._feature(cid, self.an.info[cid], None, "convert")
            rows = [((v,), v) for v in info.values]
            if self._units([sid], rows, False) is None:
                hint = ("use --dtype float64" if self.an.dtype == "float32" else
                        "give it fewer possible values")
                if info.kind == "aggregate":
                    hint = ("make its selector provably pick at most one key (an == against an s-op "
                            "that differs at every position, such as indices), so it stays categorical; "
                            "or " + hint)
                raise self.an.error(sid, f"{self.an.describe(sid)} is numerical with {len(info.values)} "
                                    "possible values, too close together to turn into a one-hot "
                                    f"encoding exactly at {self.an.dtype}", hint=hint)
            self.ops[cid] = MLPOp(cid, sid, cid, [src], rows, info.pos, "convert")
        return cid

    # ------------------------------------------------------------------ maps
    def frontier(self, sid: str) -> list[str]:
        if sid in self._frontiers:
            return self._frontiers[sid]
        out: set[str] = set()
        for u in self.an.info[sid].inputs:
            ui = self.an.info[u]
            if ui.base_kind == "const":
                continue
            if ui.kind in ("map", "sequence_map") and ui.base_kind is None:
                out |= set(self.frontier(u))
            elif ui.kind in ("selector_width", "length"):
                out.add(self.scratch(u))  # read the head's BOS weight directly: no decode layer
            else:
                out.add(u)
        self._frontiers[sid] = sorted(out)
        return self._frontiers[sid]

    def _rows(self, sid: str, inputs: list[str]) -> list[tuple[tuple, Any]]:
        info = self.an.info[sid]
        if info.base_kind is not None:  # an opaque map: tabulate on its direct inputs' values
            import itertools
            if "independent" in info.notes:
                seen: dict[tuple, None] = {}
                for ctx in self.an.ctx_all:
                    for combo in itertools.product(*(self.an.ctx_values(i, ctx) for i in inputs)):
                        seen[combo] = None
                combos = list(seen)
            elif info.base_kind == "cond":
                combos = self.an.joint(inputs)
            else:
                combos = list(itertools.product(*(self.an.info[i].values for i in inputs)))
            rows = []
            fn = info.fn
            consts = {u: self.an.info[u].values[0] for u in info.inputs
                      if self.an.info[u].base_kind == "const"}
            for combo in combos:
                # ``inputs`` are in feature order; the function takes the node's argument order
                held = dict(zip(inputs, combo, strict=True))
                args = tuple(held[u] if u in held else consts[u] for u in info.inputs)
                try:
                    rows.append((tuple(combo), fn(*args)))  # type: ignore[misc]
                except Exception:
                    continue
            return rows
        return [(tuple(r[:-1]), r[-1]) for r in self.an.joint(inputs, sid)]

    def _units(self, inputs: list[str], rows: list[tuple[tuple, Any]], out_numeric: bool) -> int | None:
        """Hidden units the MLP would need; None if one hidden layer cannot compute it exactly
        at this precision (see ``numeric.projection``)."""
        num = [k for k, i in enumerate(inputs) if self.an.info[i].encoding == "numerical"]
        if not num:
            return len(rows)
        if len(num) >= 2 and len(num) == len(inputs) and out_numeric and affine(rows) is not None:
            return len(num)
        mags = [max((abs(float(v)) for v in self.an.info[inputs[j]].values), default=0.0) for j in num]
        groups: dict[tuple, list] = {}
        for args, y in rows:
            key = tuple(a for k, a in enumerate(args) if k not in num)
            groups.setdefault(key, []).append((tuple(float(args[j]) for j in num), y))
        total = 0
        for pts in groups.values():
            coef = projection(pts, mags, self.an.dtype)
            if coef is None:
                return None
            zs = sorted(((float(np.dot(coef, x)), y) for x, y in pts), key=lambda p: p[0])
            total += 1 + 2 * sum(1 for a, b in zip(zs, zs[1:], strict=False) if not _same(a[1], b[1]))
        return total

    def _map(self, sid: str, info: SInfo) -> None:
        out_numeric = info.encoding == "numerical"
        linear = getattr(info, "linear", None)
        if linear is not None:  # w·x + c of numerical inputs: one unit per input, no table
            feats = [self.need(u) for u in info.inputs if self.an.info[u].base_kind != "const"]
            self._feature(sid, info, sid)
            op = MLPOp(sid, sid, sid, feats, [], info.pos, "map")
            w, c = linear
            for u, wj in zip(info.inputs, w, strict=False):
                if self.an.info[u].base_kind == "const":
                    c += wj * float(self.an.info[u].values[0])
            op.linear = ([float(wj) for u, wj in zip(info.inputs, w, strict=False)
                          if self.an.info[u].base_kind != "const"], float(c))  # type: ignore[attr-defined]
            self.ops[sid] = op
            return
        opaque = info.base_kind is not None
        choice: list[str] | None = None
        if not opaque:
            front = self.frontier(sid)
            if len(front) == 1 and self.an.info[front[0]].base_kind in ("token", "index"):
                # A function of the token alone (or of the position alone) is one more column of
                # the embedding table: no MLP, no layer.
                src = front[0]
                kind = "token_fn" if self.an.info[src].base_kind == "token" else "index_fn"
                node = self.an.node(src)
                self._feature(sid, info, sid if sid in self.an.graph else None)
                self.ops[sid] = EmbedOp(sid, sid, kind, token_type=getattr(node, "type", "str"),
                                        value={k[0]: v for k, v in self._rows(sid, front)})
                return
            n_num = sum(self.an.info[u].encoding == "numerical" for u in front)
            bases = tuple(sorted({b for u in front for b in self.an.info[u].bases}))
            if n_num < 2 or self.an.domain_size(bases) <= MULTI_NUMERIC_CAP:
                rows = self._rows(sid, front)
                units = self._units(front, rows, out_numeric)
                if units is not None and units <= UNIT_CAP:
                    choice = front
        if choice is None:
            direct = [u for u in info.inputs if self.an.info[u].base_kind != "const"]
            direct = sorted(set(direct))
            rows = self._rows(sid, direct)
            nums = [u for u in direct if self.an.info[u].encoding == "numerical"]
            if len(nums) >= 2 and self._units(direct, rows, out_numeric) is None:
                keep = max(nums, key=lambda u: (len(self.an.info[u].values), u))
                direct = [u if (u == keep or u not in nums) else f"{u}:onehot" for u in direct]
                for u in nums:
                    if u != keep:
                        self.need_categorical(u)
                rows = [(args, y) for args, y in rows]  # same values, now one-hot read
            choice = direct
            units = self._units([u for u in choice], rows, out_numeric)
            if units is None or units > 4 * UNIT_CAP:
                raise self.an.error(sid, f"{self.an.describe(sid)} needs {units or 'unboundedly many'} "
                                    "hidden units", hint="shrink the value sets of its inputs "
                                    "(smaller vocabulary or --max-len) or split it into steps")
        feats = [self.need(u) if not u.endswith(":onehot") else u for u in choice]
        self._feature(sid, info, sid if sid in self.an.graph else None)
        self.ops[sid] = MLPOp(sid, sid if sid in self.an.graph else info.inputs[0], sid, feats, rows,
                              info.pos, info.kind if info.kind in ("convert", "tuple") else "map")

    # ------------------------------------------------------------------ attention
    def blocks(self, sel_id: str) -> list[Block]:
        """Additive score blocks of a selector (see ``selectors``)."""
        an = self.an
        groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[sl.Formula]] = {}
        for c in sl.conjuncts(an.formula(sel_id)):
            ats = sl.atoms(c)
            ks = tuple(sorted({a.key for a in ats if an.info[a.key].base_kind != "const"}))
            qs = tuple(sorted({a.query for a in ats if an.info[a.query].base_kind != "const"}))
            groups.setdefault((ks, qs), []).append(c)
        out = []
        for (ks, qs), conj in sorted(groups.items()):
            kfeat, kassign = self._side(ks, sel_id)
            qfeat, qassign = self._side(qs, sel_id)
            mats: dict[sl.Atom, np.ndarray] = {}
            for c in conj:
                for a in sl.atoms(c):
                    if a in mats:
                        continue
                    kvals = an.info[a.key].values
                    qvals = an.info[a.query].values
                    small = sl.atom_matrix(a, qvals, kvals)
                    kidx = np.array([kvals.index(d[a.key]) if a.key in d else 0 for d in kassign], dtype=int)
                    qidx = np.array([qvals.index(d[a.query]) if a.query in d else 0 for d in qassign],
                                    dtype=int)
                    mats[a] = small[qidx[:, None], kidx[None, :]]
            matrix = np.ones((len(qassign), len(kassign)), dtype=bool)
            for c in conj:
                matrix &= sl.evaluate(c, mats)
            if matrix.all():
                continue  # always true: contributes nothing
            out.append(Block(qfeat, kfeat, matrix))
        return out

    def _side(self, sids: tuple[str, ...], sel_id: str) -> tuple[str, list[dict]]:
        if not sids:
            return ONE, [{}]
        if len(sids) == 1:
            fid = self.need_categorical(sids[0])
            return fid, [{sids[0]: v} for v in self.features[fid].values]
        tid = "(" + ",".join(sids) + ")"
        if tid not in self.an.info:
            pos = self.an.node(sel_id).pos
            self.an.info[tid] = self.an.map_info(tid, "tuple", sids, lambda *a: tuple(a), "categorical", pos)
        self.need(tid)
        return tid, [dict(zip(sids, v, strict=False)) for v in self.features[tid].values]

    def _check_causal(self, sel_id: str, node_id: str) -> None:
        an = self.an
        f = an.formula(sel_id)
        n = max(an.lengths)
        known = {}
        for a in sl.atoms(f):
            if all(an.positional(s) and all(an.info[b].base_kind == "index" for b in an.info[s].bases)
                   for s in (a.key, a.query)):
                kv = [an._positional_value(a.key, j, n) for j in range(n)]
                qv = [an._positional_value(a.query, i, n) for i in range(n)]
                m = np.array([[sl.compare(a.op, k, q) for k in kv] for q in qv], dtype=bool)
                known[a] = ~m if a.negated else m
        can_true, _ = sl.tri_evaluate(f, known, (n, n))
        if np.triu(can_true, 1).any():
            ats = sl.atoms(f)
            where = next((a.select for a in ats if a not in known), ats[0].select if ats else sel_id)
            raise an.error(where, f"{an.describe(node_id)} may select a key after its query position, "
                           "which a causal model cannot see",
                           hint="combine the selector with select(indices, indices, <=), or compile "
                                "without --causal")

    def _aggregate(self, sid: str, node: Aggregate, info: SInfo) -> None:
        an = self.an
        sel_id, src = node.inputs
        if an.causal:
            self._check_causal(sel_id, sid)
        blocks = self.blocks(sel_id)
        target = self._feature(sid, info, sid)
        sinfo = an.info[src]
        if info.encoding == "categorical":
            vfeat = self.need_categorical(src)
            # -1: a source value the analysis proved is never selected (e.g. a selector that never
            # selects anything) has no dimension in the result
            weights = [target.values.index(v) if v in target.values else -1
                       for v in self.features[vfeat].values]
            # -1: the selection is never empty, so the default has no one-hot dimension
            default = target.values.index(node.default) if node.default in target.values else -1
            mean = False
        else:
            vfeat = self.need(src)
            if sinfo.encoding == "categorical":
                weights = [float(v) for v in self.features[vfeat].values]
            else:
                weights = [1.0]
            default = float(node.default)
            mean = not an.at_most_one(sel_id)
        self.ops[sid] = HeadOp(sid, sid, "aggregate", sid, blocks, "default", vfeat, weights, default,
                               mean, node.pos)

    def scratch(self, sid: str) -> str:
        """The numerical s-op 1/(w+1) that the head of width ``sid`` writes (BOS's attention weight)."""
        scratch = f"{sid}.bos_weight"
        if scratch not in self.an.info:
            info = self.an.info[sid]
            values = sorted_values(1.0 / (w + 1) for w in info.values)
            self.an.info[scratch] = SInfo(scratch, "width_scratch", "numerical", values, (sid,),
                                          {(w,): 1.0 / (w + 1) for w in info.values}, pos=info.pos,
                                          inputs=(sid,))
        return scratch

    def _width_head(self, sid: str) -> None:
        """Selector width (or length): one head where BOS is always among the selected keys, so BOS
        gets weight 1/(w+1)."""
        an = self.an
        node = an.node(sid)
        sel_id = node.inputs[0] if isinstance(node, SelectorWidth) else None
        if sel_id is not None and an.causal:
            self._check_causal(sel_id, sid)
        blocks = self.blocks(sel_id) if sel_id is not None else []
        scratch = self.scratch(sid)
        self._feature(scratch, an.info[scratch], None, "width_scratch")
        self.ops[scratch] = HeadOp(scratch, sid, "length" if sel_id is None else "width", scratch, blocks,
                                   "always", None, [1.0], 1.0, True, node.pos)

    def _width(self, sid: str, sel_id: str | None, info: SInfo) -> None:
        """The width itself, decoded from the BOS weight by an MLP (only when something reads it)."""
        scratch = self.need(self.scratch(sid))
        self._feature(sid, info, sid)
        rows = [((1.0 / (w + 1),), w) for w in sorted_values(info.values)]
        self.ops[sid] = MLPOp(sid, sid, sid, [scratch], rows, self.an.node(sid).pos, "width_decode")


def affine(rows: list[tuple[tuple, Any]]) -> tuple[np.ndarray, float] | None:
    """(w, c) with y = w·x + c exactly on every row, if such exist."""
    if not rows:
        return np.zeros(0), 0.0
    x = np.array([[float(a) for a in args] for args, _ in rows], dtype=np.float64)
    y = np.array([float(v) for _, v in rows], dtype=np.float64)
    design = np.hstack([x, np.ones((len(rows), 1))])
    sol, *_ = np.linalg.lstsq(design, y, rcond=None)
    if np.max(np.abs(design @ sol - y), initial=0.0) > 1e-9 * (1 + np.max(np.abs(y), initial=0.0)):
        return None
    w = sol[:-1]
    w[np.abs(w) < 1e-12] = 0.0
    return w, float(sol[-1])
