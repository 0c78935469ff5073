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

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rasp_compiler.compiler import selectors as sl
from rasp_compiler.compiler.analysis import Analysis, SInfo, is_numeric
from rasp_compiler.compiler.numeric import (
    SharedSteps,
    group_points,
    projection,
    shared_steps,
    step_units,
)
from rasp_compiler.compiler.tables import affine, priority_split, separable
from rasp_compiler.compiler.values import label, sorted_values, value_key
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

# A quadratic score block's largest score over its lead of 1, times the dtype's epsilon, above
# which it is not used (``Lowering._quadratic``): the rounding of a score is a few epsilons of its
# size, and it must stay under a quarter of the lead.  Measured in float32: keys i^2 and i^3 first
# picked a wrong key at 2.5 (squares at N = 68, cubes at N = 18), ten times this.
QUADRATIC_ROUNDING = 1 / 4
# Most hidden units one fused map may use before it falls back to reading its direct inputs.
UNIT_CAP = 40_000
# Fusing a function of several numerical inputs is tried first over this many joint assignments,
MULTI_NUMERIC_CAP = 6_000
# and, when nothing else avoids reading the direct inputs (which costs a layer), over this many
# (the analysis has tabulated them already, up to its DOMAIN_CAP).  The original paper's Dyck-1,
# with separate means of openers and closers, has 87,000 at max_len 64: fused, it keeps 2 layers
# (127,657 parameters); unfused, its balance and sign cost three more layers (12.3M parameters).
MULTI_NUMERIC_LAST_CAP = 120_000
# Rows of a map tabulated on a split width's part heads and its other inputs (``_through_parts``):
# (N+1)^2/2 splits times the other inputs' values, e.g. 137k at N = 64 with the index; the step
# MLP merges the index values that share a table, so the units stay O(N).
THROUGH_PARTS_CAP = 480_000
# A selector side with at least this many values is read through its classes of values that
# select alike, when there are at most half as many (``Lowering._quotient``).
QUOTIENT_MIN = 16
# Most values a joint (tuple) one-hot read by a selector may have.
MAX_TUPLE = 1 << 14
# Largest query x key score table of one selector block (a bool matrix, then W_Q / W_K).
MAX_BLOCK = 1 << 26
# Most rows a map fused over the product of its inputs' value sets may have (``_product_inputs``).
PRODUCT_CAP = 4_096
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
    # A quadratic block (``Lowering._quadratic``): the query is one number q, the key a one-hot
    # over the numbers ``values``; key v scores (2(v-c)(q-c) - (v-c)^2) / d2 = ((q-c)^2 - (q-v)^2) / d2.
    quad: tuple[list[float], float, float] | None = None  # (key values, c, 1/d2)
    # scored exactly (``Lowering._exact_quadratic``): a power-of-two scale, d_head a power of 4
    quad_exact: bool = False


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
    bos_score: float | None = None  # the BOS key's score (units of S) when not the usual m - 1/2 / m
    bos_log: float = 0.0  # nats added to the BOS key's score: BOS counts as e^bos_log keys

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
        self._part_owner: dict[str, str] = {}  # part head id -> its width (``_width_parts``)
        self._quotients: dict[tuple, str] = {}  # (s-op, its classes) -> the map onto them (``_quotient``)
        # rows whose step MLP is cheaper with shared steps -> (the rows, their SharedSteps)
        self._shared: dict[int, tuple[list, SharedSteps]] = {}
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
        if sid in self._part_owner:
            self._part_heads(self._part_owner[sid])
        elif sid.endswith(".bos_weight"):
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
        elif isinstance(node, (Map, SequenceMap)) or info.kind in ("convert", "tuple") or \
                (node is None and info.kind == "map"):  # a selector's predicate (``_predicate``)
            self._map(sid, info)
        else:
            raise an.error(sid, f"cannot compile {an.describe(sid)}")
        return sid

    def need_categorical(self, sid: str) -> str:
        info = self.an.info[sid]
        if info.encoding == "categorical":
            return self.need(sid)
        cid = f"{sid}:onehot"
        if "unbounded" in info.notes:  # only its range is known: no one-hot can hold it
            raise self.an.error(sid, f"{self.an.describe(sid)} is a mean with too many possible values "
                                "to enumerate, and it is compared or looked up, which needs them all",
                                hint="make its selector provably pick at most one key, average fewer "
                                     "distinct values (e.g. 0/1 indicators), or use a smaller --max-len")
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
            elif ui.kind == "selector_width" and self._width_parts(u) is not None:
                out.add(u)  # a width of two heads: read the decoded sum
            elif ui.kind in ("selector_width", "length"):
                out.add(self.scratch(u))  # read the head's BOS weight directly: no decode layer
            else:
                out.add(u)
        self._frontiers[sid] = sorted(out)
        return self._frontiers[sid]

    def _closest_values(self, inputs: list[str], rows: list) -> tuple[str, float, float] | None:
        """A numerical input and two of its values closer than float32 resolves (a relative gap
        under 1e-6) on which the map's rows give different answers; None when there are none."""
        for j, u in enumerate(inputs):
            if self.an.info[u].encoding != "numerical":
                continue
            by_rest: dict[tuple, list[tuple[float, Any]]] = {}
            for args, y in rows:
                if isinstance(args[j], (int, float)):
                    rest = tuple(map(repr, args[:j] + args[j + 1:]))
                    by_rest.setdefault(rest, []).append((float(args[j]), y))
            for pts in by_rest.values():
                pts.sort(key=lambda p: p[0])
                for (a, ya), (b, yb) in zip(pts, pts[1:], strict=False):
                    if b - a < 1e-6 * max(1.0, abs(a), abs(b)) and _differ(ya, yb):
                        return u, a, b
        return None

    def _partial_frontiers(self, sid: str) -> list[list[str]]:
        """The input sets between the direct inputs and the whole frontier, deepest first: the
        direct inputs with maps expanded into their own inputs k times (k = depth-1 .. 1).  When
        the whole frontier cannot be fused, a chain of maps then still costs one MLP, not one per
        map (the paper's sort by frequency: ``-filtered_freq`` beside ``filtered_freq``)."""
        an = self.an
        full = set(self.frontier(sid))
        level = sorted({u for u in an.info[sid].inputs if an.info[u].base_kind != "const"})
        cuts = []
        while True:
            grown: set[str] = set()
            for u in level:
                ui = an.info[u]
                if ui.kind in ("map", "sequence_map") and ui.base_kind is None:
                    grown |= {x for x in ui.inputs if an.info[x].base_kind != "const"}
                else:
                    grown.add(u)
            if grown == set(level) or grown == full:
                break
            level = sorted(grown)
            cuts.append(level)
        return cuts[::-1]

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

    def mlp_units(self, inputs: list[str], rows: list[tuple[tuple, Any]], out_numeric: bool) -> int | None:
        """Hidden units an MLP reading ``inputs`` needs for ``rows``; None if one hidden layer
        cannot compute it exactly at this precision (see ``numeric.projection``)."""
        return self._units(inputs, rows, out_numeric)

    def _units(self, inputs: list[str], rows: list[tuple[tuple, Any]], out_numeric: bool) -> int | None:
        """Hidden units the MLP would need; None if one hidden layer cannot compute it exactly
        at this precision (see ``numeric.projection``)."""
        num = [k for k, i in enumerate(inputs) if self.an.info[i].encoding == "numerical"]
        if not num:
            return len(rows)
        if len(num) >= 2 and len(num) == len(inputs) and out_numeric and affine(rows) is not None:
            return len(num)
        mags = [max((abs(float(v)) for v in self.an.info[inputs[j]].values), default=0.0) for j in num]
        groups = group_points(rows, num)
        total = step_units(groups, mags, self.an.dtype)
        if total is not None and len(num) == 1 and len(inputs) > 1 and not out_numeric:
            shared = shared_steps(groups)
            if shared is not None and shared.units() < total:
                # the MLP op made from these rows shares its steps (see ``_mlp_op``)
                self._shared[id(rows)] = (rows, shared)
                total = shared.units()
        return total

    def _with_shared(self, op: MLPOp) -> MLPOp:
        """``op``, marked to share its steps where ``_units`` found that cheaper for its rows."""
        held = self._shared.get(id(op.rows))
        if held is not None and held[0] is op.rows:
            op.shared_steps = held[1]  # type: ignore[attr-defined]
        return op

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
        if opaque and "affine" in info.notes:
            self._affine_map(sid, info)
            return
        choice: list[str] | None = None
        parts = None
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
            fused = self._through_parts(sid, front, out_numeric) or \
                self._fused(sid, front, out_numeric, MULTI_NUMERIC_CAP)
            if fused is not None:
                choice, rows, parts = fused
            if any(self.an.info[u].base_kind is not None and self.an.info[u].kind in ("map", "sequence_map")
                   for u in front) and parts is None:
                product = self._product_inputs(sid, info, front)  # see through the opaque map
                if product is not None:  # at most PRODUCT_CAP rows, and it never reads later s-ops
                    choice, rows = product
        if choice is None and sid == self.an.program.output and self._priority(sid, info):
            return
        if choice is None and not opaque and not any(
                self.an.info[u].kind in ("map", "sequence_map") for u in self.frontier(sid)):
            # a frontier of attention outputs and embeddings: fusing saves the layers the direct
            # inputs would cost, so a larger table is worth enumerating
            fused = self._fused(sid, self.frontier(sid), out_numeric, MULTI_NUMERIC_LAST_CAP,
                                only_above=MULTI_NUMERIC_CAP)
            if fused is not None:
                choice, rows, parts = fused
        if choice is None:
            product = self._product_inputs(sid, info)
            if product is not None:
                choice, rows = product
        if choice is None and not opaque:
            for inputs in self._partial_frontiers(sid):
                fused = self._fused(sid, inputs, out_numeric, MULTI_NUMERIC_CAP)
                if fused is not None:
                    choice, rows, parts = fused
                    break
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
            if units is None:
                close = self._closest_values(choice, rows) if not any(
                    u.endswith(":onehot") for u in choice) else None
                if close is not None:  # no projection separates values this close in the dtype
                    u, a, b = close
                    raise self.an.error(sid, f"{self.an.describe(sid)} reads {u}, whose values {a!r} and "
                                        f"{b!r} differ only by float rounding: no layer of the model can "
                                        "tell them apart, but the map's answer depends on which it is",
                                        hint="round first (round(m * 10) == 1), or keep the values "
                                        "whole numbers (count instead of averaging 0.1s)")
            if units is None or units > 4 * UNIT_CAP:
                raise self.an.error(sid, f"{self.an.describe(sid)} needs {units or 'unboundedly many'} "
                                    "hidden units", hint=self.an.pair_table_hint(sid) or (
                                        "shrink the value sets of its inputs (smaller vocabulary or "
                                        "--max-len) or split it into steps"))
        feats = [self.need(u) if not u.endswith(":onehot") else u for u in choice]
        self._feature(sid, info, sid if sid in self.an.graph else None)
        self.ops[sid] = self._with_shared(MLPOp(
            sid, sid if sid in self.an.graph else info.inputs[0], sid, feats, rows, info.pos,
            info.kind if info.kind in ("convert", "tuple") else "map"))
        if parts is not None:
            self.ops[sid].separable = parts  # type: ignore[attr-defined]

    def _fused(self, sid: str, front: list[str], out_numeric: bool, cap: int, only_above: int = -1
               ) -> tuple[list[str], list[tuple[tuple, Any]], Any] | None:
        """The map fused over its frontier: (inputs, rows, separable parts or None), or None when
        that needs too many units, or when it reads two or more numbers whose joint assignments
        number more than ``cap`` (or at most ``only_above``: that size was tried already)."""
        n_num = sum(self.an.info[u].encoding == "numerical" for u in front)
        if n_num >= 2:
            size = self.an.domain_size(tuple(sorted({b for u in front for b in self.an.info[u].bases})))
            if size > cap or size <= only_above:
                return None
        elif only_above >= 0:
            return None
        rows = self._rows(sid, front)
        units = self._units(front, rows, out_numeric)
        sep = self._separable(front, rows) if out_numeric and len(front) >= 2 else None
        if sep is not None and sep[0] <= UNIT_CAP and (units is None or sep[0] < units):
            return front, rows, sep[1]  # y = c + sum_j g_j(x_j): O(values) units
        if units is not None and units <= UNIT_CAP:
            return front, rows, None
        return None

    def _product_inputs(self, sid: str, info: SInfo, start: list[str] | None = None
                        ) -> tuple[list[str], list[tuple[tuple, Any]]] | None:
        """When the fused table over the frontier is too large to enumerate jointly, fuse through
        opaque categorical maps anyway over the *product* of their inputs' value sets (an
        over-approximation of the combinations that occur, so still exact), while that product
        stays within PRODUCT_CAP.  dyck2's `indicator(bad)` at max_len 64 then reads (depth < 0,
        opener, tokens) — 50 rows — instead of computing `matched`, `bad` and the indicator in three
        MLP sublayers of their own."""
        an = self.an

        def size(sids: set[str]) -> int:
            return int(np.prod([len(an.info[u].values) for u in sids], dtype=np.float64))

        direct = set(start) if start is not None else {u for u in info.inputs
                                                         if an.info[u].base_kind != "const"}
        leaves = set(direct)
        grown = True
        while grown:
            grown = False
            for x in sorted(leaves):
                xi = an.info[x]
                if xi.kind not in ("map", "sequence_map") or xi.fn is None or getattr(xi, "linear", None):
                    continue
                # an opaque map is replaced by its direct inputs, a fusable one by its frontier
                sub = ({u for u in xi.inputs if an.info[u].base_kind != "const"}
                       if xi.base_kind is not None else set(self.frontier(x)))
                if not sub or any(an.info[u].encoding != "categorical" or u.endswith(".bos_weight")
                                  for u in sub):
                    continue
                bigger = (leaves - {x}) | sub
                if size(bigger) <= PRODUCT_CAP:
                    leaves, grown = bigger, True
                    break
        if leaves == direct or any(an.info[u].encoding != "categorical" for u in leaves):
            return None
        order = sorted(leaves)

        def value(x: str, held: dict[str, Any]) -> Any:
            if x in held:
                return held[x]
            xi = an.info[x]
            if xi.base_kind == "const":
                return xi.values[0]
            held[x] = xi.fn(*(value(u, held) for u in xi.inputs))  # type: ignore[misc]
            return held[x]

        import itertools
        possible = {value_key(v) for v in info.values}
        rows = []
        for combo in itertools.product(*(an.info[u].values for u in order)):
            try:
                y = value(sid, dict(zip(order, combo, strict=True)))
            except Exception:  # the interpreter raises on this combination, so it cannot occur
                continue
            # a value outside the analysed (over-approximated) value set: the combination cannot
            # occur either, and the output has no dimension for it (random program seed 40910)
            if value_key(y) in possible:
                rows.append((combo, y))
        return order, rows

    def _priority(self, sid: str, info: SInfo) -> bool:
        """The program's output ``y = X if C(u) else h(v)`` over two direct inputs u, v whose
        fused table is too large for one MLP (dyck1's and dyck2's last line): one MLP writes
        ``2·[C(u)]`` into X's output dimension and the one-hot of h(v) beside it, each part fused
        over its own frontier, and the unembedding's argmax reads X when C holds (2 against at
        most 1) and h(v) otherwise (1 against 0).  The residual then holds scores, not a one-hot,
        which is why only the output (read by nothing but the unembedding) may do this; it saves
        the layer that computing C(u) and h(v) first would cost."""
        direct = sorted({u for u in info.inputs if self.an.info[u].base_kind != "const"})
        if len(direct) != 2 or info.encoding != "categorical":
            return False
        rows = self._rows(sid, direct)
        for k in (0, 1):
            found = priority_split(rows, k)
            if found is None:
                continue
            x_value, overriding, rest = found
            u, v = direct[k], direct[1 - k]
            part_u = self._lift(u, lambda val, s=overriding: 2.0 if value_key(val) in s else 0.0, True)
            part_v = self._lift(v, lambda val, r=rest, x=x_value: r.get(value_key(val), x), False)
            if part_u is None or part_v is None:
                continue
            self._feature(sid, info, sid)
            subs = []
            for tag, (inputs, prow) in (("override", part_u), ("rest", part_v)):
                feats = [self.need(i) for i in inputs]
                sub = self._with_shared(MLPOp(f"{sid}#{tag}", sid, sid, feats, prow, info.pos, "map"))
                subs.append(sub)
            subs[0].override = x_value  # type: ignore[attr-defined]
            feats = sorted({f for sub in subs for f in sub.inputs})
            op = MLPOp(sid, sid, sid, feats, [], info.pos, "priority")
            op.parts = subs  # type: ignore[attr-defined]
            self.ops[sid] = op
            return True
        return False

    def _lift(self, x: str, g: Any, out_numeric: bool) -> tuple[list[str], list[tuple[tuple, Any]]] | None:
        """``g(x)`` as a table over x's frontier (x's own feature if x is not a fusable map)."""
        xi = self.an.info[x]
        if xi.kind in ("map", "sequence_map") and xi.base_kind is None:
            inputs = self.frontier(x)
            rows = [(args, g(val)) for args, val in self._rows(x, inputs)]
            units = self._units(inputs, rows, out_numeric)
            if units is not None and units <= UNIT_CAP:
                return inputs, rows
        rows = [((val,), g(val)) for val in xi.values]
        units = self._units([x], rows, out_numeric)
        return ([x], rows) if units is not None and units <= UNIT_CAP else None

    def _separable(self, inputs: list[str], rows: list[tuple[tuple, Any]]) -> tuple[int, Any] | None:
        """(hidden units, (parts, constant)) when the table is a sum of univariate parts (see
        ``separable``): steps on each numerical input, one unit per categorical input."""
        got = separable(rows, len(inputs))
        if got is None:
            return None
        parts, _ = got
        units = 0
        for j, u in enumerate(inputs):
            g = parts[j]
            if self.an.info[u].encoding == "numerical":
                pts = [((float(g[k][0]),), g[k][1]) for k in sorted(g)]
                vals = [v for _, v in pts]
                units += 2 * sum(1 for a, b in zip(vals, vals[1:], strict=False) if a != b)
                mag = max(abs(x[0]) for x, _ in pts)
                if self.an.info[u].kind != "width_scratch" and projection(pts, [mag], self.an.dtype) is None:
                    return None  # its values are too close together to step between at this dtype
            elif any(v != 0.0 for _, v in g.values()):
                units += 1
        return units, got

    # ------------------------------------------------------------------ attention
    def blocks(self, sel_id: str, formula: sl.Formula | None = None) -> list[Block]:
        """Additive score blocks of a selector (see ``selectors``), or of part of it."""
        an = self.an
        groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[sl.Formula]] = {}
        for c in sl.conjuncts(formula if formula is not None else an.formula(sel_id)):
            c = self._narrowed(c, sel_id)
            ats = sl.atoms(c)
            ks = tuple(sorted({a.key for a in ats if an.info[a.key].base_kind != "const"}))
            qs = tuple(sorted({a.query for a in ats if an.info[a.query].base_kind != "const"}))
            groups.setdefault((ks, qs), []).append(c)
        out = []
        for (ks, qs), conj in sorted(groups.items()):
            # one s-op on a side: its one-hot (or a quotient of it) is made once the table is known
            kfeat, kassign = self._side(ks, sel_id) if len(ks) != 1 else \
                ("", [{ks[0]: v} for v in an.info[ks[0]].values])
            qfeat, qassign = self._side(qs, sel_id) if len(qs) != 1 else \
                ("", [{qs[0]: v} for v in an.info[qs[0]].values])
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
            if len(qassign) * len(kassign) > MAX_BLOCK:
                raise an.error(sel_id, f"this selector compares {qfeat} ({len(qassign):,} values) with "
                               f"{kfeat} ({len(kassign):,} values) in one attention score: a "
                               f"{len(qassign):,} x {len(kassign):,} table, too large to compile",
                               hint="a selector combining several s-ops with `or` needs a one-hot over "
                                    "their joint values: compare fewer s-ops at once, give them fewer "
                                    "possible values, or use a smaller --max-len")
            matrix = np.ones((len(qassign), len(kassign)), dtype=bool)
            for c in conj:
                matrix &= sl.evaluate(c, mats)
            if matrix.all():
                continue  # always true: contributes nothing
            if len(ks) == 1:
                kfeat, matrix = self._quotient(ks[0], matrix.T, sel_id)
                matrix = matrix.T
            if len(qs) == 1:
                qfeat, matrix = self._quotient(qs[0], matrix, sel_id)
            out.append(Block(qfeat, kfeat, matrix))
        return out

    def _quotient(self, sid: str, matrix: np.ndarray, sel_id: str) -> tuple[str, np.ndarray]:
        """The one-hot feature a score block reads for ``sid`` (rows of ``matrix``: its values),
        and the block over it: ``sid``'s own one-hot, or a map of ``sid`` onto one representative
        per class of values that select alike (equal rows), when that saves at least half of the
        one-hot.  In ``select(indices + length - plus_at, indices, ==)``, with ``plus_at`` a mean
        of indices, the key holds hundreds of fractions that match no query: one class, instead of
        one dimension each."""
        n = matrix.shape[0]
        if n < QUOTIENT_MIN or self.an.info[sid].base_kind == "const":
            return self.need_categorical(sid), matrix
        _, first, cls = np.unique(matrix, axis=0, return_index=True, return_inverse=True)
        if 2 * len(first) > n:
            return self.need_categorical(sid), matrix
        values = self.an.info[sid].values
        classes = tuple(cls.ravel().tolist())
        # one map per partition: blocks of one selector (or the parts of a split width) may
        # class the same s-op differently
        qid = self._quotients.get((sid, classes))
        if qid is None:
            qid = f"{sid}~{sel_id}"
            k = 1
            while qid in self.an.info:
                k += 1
                qid = f"{sid}~{sel_id}_{k}"
            self._quotients[(sid, classes)] = qid
            rep = {value_key(v): values[first[c]] for v, c in zip(values, classes, strict=True)}
            pos = self.an.node(sel_id).pos
            self.an.info[qid] = self.an.map_info(qid, "map", (sid,), lambda v: rep[value_key(v)],
                                                 "categorical", pos)
        self.need(qid)
        index = {value_key(v): i for i, v in enumerate(values)}
        rows = [index[value_key(v)] for v in self.features[qid].values]
        return qid, matrix[rows]

    def _narrowed(self, c: sl.Formula, sel_id: str) -> sl.Formula:
        """The conjunct ``c`` with the atoms that compare an s-op with a constant (e.g.
        ``select(indices, 0, ==)``) rewritten over that comparison's truth value, where ``c``
        reads several s-ops on that side and this s-op only in such atoms.  The product one-hot
        then holds (truth values, other s-ops): the original paper's hand-made BOS,
        ``s or select(indices, 0, ==)`` with ``s = select(tokens, tokens, ==)``, needs 2·|vocab|
        values instead of max_len·|vocab|."""
        an = self.an
        ats = sl.atoms(c)

        def const(x: str) -> bool:
            return an.info[x].base_kind == "const"

        def narrowable(side: str, other: str) -> set[str]:
            """The s-ops on ``side`` ("key" / "query") read only against constants, by fewer atoms
            than it takes to tell their values apart."""
            sids = {getattr(a, side) for a in ats if not const(getattr(a, side))}
            if len(sids) < 2:
                return set()
            out = set()
            for x in sids:
                mine = [a for a in ats if getattr(a, side) == x]
                if all(const(getattr(a, other)) for a in mine) and 2 ** len(mine) < len(an.info[x].values):
                    out.add(x)
            return out
        keys, queries = narrowable("key", "query"), narrowable("query", "key")
        if not keys and not queries:
            return c

        def narrow(a: sl.Atom) -> sl.Formula:
            # a Python predicate has no operator text: name it by its select, which is unique
            op = a.op if a.fn is None else f" {a.select} "
            if a.key in keys:
                c_ = an.info[a.query].values[0]
                pred = self._predicate(a.key, f"{op}{label(c_)}", sel_id,
                                       lambda v: sl.holds(a, v, c_))
                return sl.Atom(a.select, pred, self._true(), "==", a.negated)
            if a.query in queries:
                c_ = an.info[a.key].values[0]
                pred = self._predicate(a.query, f"{label(c_)}{op}", sel_id,
                                       lambda v: sl.holds(a, c_, v))
                return sl.Atom(a.select, self._true(), pred, "==", a.negated)
            return a
        return sl.substitute(c, narrow)

    def _predicate(self, sid: str, text: str, sel_id: str, fn: Any) -> str:
        """A boolean map of ``sid`` (fused into whatever reads it, like any map)."""
        pid = f"[{sid}{text}]"
        if pid not in self.an.info:
            pos = self.an.node(sel_id).pos
            self.an.info[pid] = self.an.map_info(pid, "map", (sid,), fn, "categorical", pos)
        return pid

    def _true(self) -> str:
        if "const:True" not in self.an.info:
            self.an.info["const:True"] = self.an._const("const:True", "constant", True, None, "categorical")
        return "const:True"

    def _side(self, sids: tuple[str, ...], sel_id: str) -> tuple[str, list[dict]]:
        if not sids:
            return ONE, [{}]
        if len(sids) == 1:
            fid = self.need_categorical(sids[0])
            return fid, [{sids[0]: v} for v in self.features[fid].values]
        tid = "(" + ",".join(sids) + ")"
        if tid not in self.an.info:
            bound = min(int(np.prod([float(len(self.an.info[u].values)) for u in sids])),
                        self.an.domain_size(tuple(sorted({b for u in sids for b in self.an.info[u].bases}))))
            if bound > MAX_TUPLE:  # refuse before tabulating it (that alone can take gigabytes)
                listing = " and ".join(f"{self.an.describe(u)} ({len(self.an.info[u].values):,} values)"
                                       for u in sids)
                raise self.an.error(sel_id, f"this selector needs a one-hot over the joint values of "
                                    f"{listing}: up to {bound:,} combinations, too many to compile",
                                    hint="compare fewer s-ops at once with `or`, give them fewer "
                                         "possible values, or use a smaller --max-len")
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
                m = np.array([[sl.holds(a, k, q) for k in kv] for q in qv], dtype=bool)
                known[a] = ~m if a.negated else m
            else:
                possible = self._possible(a, n)
                if possible is not None:
                    known[a] = possible[::-1] if a.negated else possible
        can_true, _ = sl.tri_evaluate(f, known, (n, n))
        if np.triu(can_true, 1).any():
            ats = sl.atoms(f)
            where = next((a.select for a in ats if a not in known), ats[0].select if ats else sel_id)
            raise an.error(where, f"{an.describe(node_id)} may select a key after its query position, "
                           "which a causal model cannot see",
                           hint="combine the selector with select(indices, indices, <=), or compile "
                                "without --causal")

    def _possible(self, atom: sl.Atom, n: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(can hold, can fail) for the atom's predicate at each (query, key) position pair, from
        the values its two s-ops can take at each position.  A key that is its own index or -1
        (``i if t == "a" else -1``) is then never selected by a later query: ``k == q`` fails for
        every key after the query.  None when the value sets are too large to pair up."""
        an = self.an

        def at(sid: str, j: int) -> list[Any]:
            return sorted_values({v for m in an.lengths if m > j for v in an.ctx_values(sid, (j, m))})
        keys = [at(atom.key, j) for j in range(n)]
        queries = [at(atom.query, i) for i in range(n)]
        if sum(map(len, keys)) * sum(map(len, queries)) > 1_000_000:
            return None
        can_hold = np.zeros((n, n), dtype=bool)
        can_fail = np.zeros((n, n), dtype=bool)
        for q, qvals in enumerate(queries):
            for k, kvals in enumerate(keys):
                truths = {sl.holds(atom, kv, qv) for kv in kvals for qv in qvals}
                can_hold[q, k], can_fail[q, k] = True in truths, False in truths
        return can_hold, can_fail

    def _aggregate(self, sid: str, node: Aggregate, info: SInfo) -> None:
        an = self.an
        sel_id, src = node.inputs
        if an.causal:
            self._check_causal(sel_id, sid)
        quad = self._quadratic(sel_id)
        blocks = quad if quad is not None else self.blocks(sel_id)
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
        if quad is not None:
            # every query has a matching key (``_always_matched``), whose score (q-c)^2/d2 >= 0;
            # BOS only has to lose to it
            self.ops[sid].bos_score = -1.0

    def _quadratic(self, sel_id: str) -> list[Block] | None:
        """``select(k, q, ==)`` with q a number and k a one-hot over numbers, as one quadratic score
        block: key v scores -(q - v)^2 / d2 up to a term of the query alone, so the matching key
        leads every other by at least 1 (d2: the smallest squared distance between key values) and
        an error e in q costs only 2e|v - v'|/d2.  The query stays one number — for a map like
        ``length - indices - 1`` an MLP of O(N) units (``separable``) instead of the N^2-unit table
        its one-hot needs.  Used only when the analysis proves that every query value occurs among
        the keys at every length: then BOS can simply score below every match."""
        an = self.an
        f = an.formula(sel_id)
        if not isinstance(f, sl.Atom) or f.op != "==" or f.negated:
            return None
        k, q = f.key, f.query
        ki, qi = an.info[k], an.info[q]
        if ki.base_kind == "const" or qi.base_kind == "const" or ki.encoding != "categorical":
            return None
        if not (is_numeric(ki.values) and is_numeric(qi.values)) or "unbounded" in qi.notes:
            return None
        if len(ki.values) < 2 or not self._always_matched(k, q):
            return None
        kv = sorted({float(v) for v in ki.values})
        d2 = min((a - b) ** 2 for a, b in zip(kv, kv[1:], strict=False))
        # Scores reach (max - min)^2 / d2 while the match leads by 1: the dtype's rounding of the
        # scores (and of q) must stay well below that lead, or another key wins without a trace
        # (keys i^3 at N = 24 gave a clean, wrong answer in float32).  Otherwise: one-hot blocks.
        eps = float(np.finfo(np.float32 if an.dtype == "float32" else np.float64).eps)
        exact = False
        if eps * (kv[-1] - kv[0]) ** 2 / d2 > QUADRATIC_ROUNDING:
            if not self._exact_quadratic(kv, qi):
                return None
            exact = True
        if qi.encoding == "numerical":
            qfeat = self.need(q)
        elif q not in self.features and qi.posaff is not None and \
                qi.posaff[0] and qi.posaff[1]:
            qfeat = self._affine_number(q)  # a·index + b·length + c: O(N) units, no table
        else:
            if q in self.features or qi.base_kind is not None or qi.kind not in ("map", "sequence_map"):
                return None  # its one-hot exists already, or costs no table MLP
            front = self.frontier(q)
            if len(front) < 2 or self._separable(front, self._rows(q, front)) is None:
                return None
            qfeat = f"{q}:num"
            if qfeat not in self.features:
                an.info[qfeat] = SInfo(qfeat, qi.kind, "numerical", list(qi.values), qi.bases, qi.table,
                                       pos=qi.pos, inputs=qi.inputs, fn=qi.fn)
                self._frontiers[qfeat] = front
                self._map(qfeat, an.info[qfeat])
                self.ops[qfeat].node = q
        kfeat = self.need(k)
        kv = [float(v) for v in self.features[kfeat].values]
        c = (min(kv) + max(kv)) / 2.0
        return [Block(qfeat, kfeat, np.ones((1, len(kv)), dtype=bool), quad=(kv, c, 1.0 / d2),
                      quad_exact=exact)]

    def _exact_quadratic(self, kv: list[float], qi: SInfo) -> bool:
        """Whether a quadratic block too wide for the rounding rule (keys 0..N-1 past N ~ 1,450 in
        float32) can be scored *exactly*: integer keys one apart, and an integer query computed
        exactly (``a·index + b·length + c``: its separable MLP runs in float64 and its value rounds
        to the integer).  With a power-of-two score scale and d_head a power of 4 (``assemble``),
        every entry of Q = S'·[q - c, 1] and K = [2(v - c), -(v - c)^2], every product and every
        partial sum of the score is a multiple of S'/4 below 3R^2·S'/4 (R: the key range), all
        representable when 3R^2 <= 2^24 (float32; R <= 2,364): the score is exact and the match
        leads every other key by S."""
        pa = qi.posaff
        if not ("affine" in qi.notes or (qi.encoding != "numerical" and pa is not None and pa[0] and pa[1])):
            return False  # q is not built by ``_affine_number``
        if any(v != int(v) for v in kv) or any(b - a != 1.0 for a, b in zip(kv, kv[1:], strict=False)):
            return False
        if any(not float(v).is_integer() for v in qi.values):
            return False
        mantissa = 24 if self.an.dtype == "float32" else 53
        return 3 * (kv[-1] - kv[0]) ** 2 <= 2.0 ** mantissa

    def _always_matched(self, k: str, q: str) -> bool:
        """Whether at every (index, length) each value q can hold is held by some key position
        (k must be a function of the position: its values at each length are known)."""
        an = self.an
        if not an.positional(k):
            return False
        posaff = an.info[q].posaff
        if posaff is not None and not an.causal and an.info[k].bases and all(
                an.info[b].base_kind == "index" for b in an.info[k].bases):
            # q = a·i + b·n + c (exact integers) against a key of the index alone: per length, one
            # vectorised membership test instead of one set per (index, length)
            a, b, c = posaff
            top = max(an.lengths)
            kvals = [an._positional_value(k, j, top) for j in range(top)]
            if any(not isinstance(v, (int, float)) or isinstance(v, bool) for v in kvals):
                return False
            karr = np.array(kvals, dtype=np.float64)
            for n in an.lengths:
                qs = a * np.arange(n, dtype=np.int64) + b * n + c
                if not np.isin(qs.astype(np.float64), karr[:n]).all():
                    return False
            return True
        keysets: dict[tuple[int, int], set] = {}
        for ctx in an.ctx_all:
            i, n = ctx
            top = i + 1 if an.causal else n
            ks = keysets.get((n, top))
            if ks is None:
                ks = keysets[(n, top)] = {an._positional_value(k, j, n) for j in range(top)}
            if not set(an.ctx_values(q, ctx)) <= ks:
                return False
        return True

    def _affine_number(self, sid: str) -> str:
        """The numerical feature of ``a·index + b·length + c`` (an opaque map of the analysis's
        ``_affine_base``): one separable MLP, a unit on the index's one-hot and one step per length
        on the length head's BOS weight 1/(n+1) — 2N - 1 units, where a table over the (index,
        length) pairs would need N(N+1)/2.  ``sid`` itself when numerical, else ``sid:num``."""
        an = self.an
        info = an.info[sid]
        fid = sid if info.encoding == "numerical" else f"{sid}:num"
        if fid in self.features:
            return fid
        a, b, c = info.posaff  # type: ignore[misc]
        up = _ancestors_of(an, sid)
        idx = next(u for u in sorted(up) if u in an.graph and isinstance(an.node(u), Indices))
        # the length's source: the built-in length, else a width that equals it (tracr's)
        length = min((u for u in up if an.length_like(u)),
                     key=lambda u: (an.info[u].base_kind != "length", u))
        scratch = self.scratch(length)
        feats = [self.need(idx), self.need(scratch)]
        g_idx = {value_key(v): (v, float(a * v)) for v in an.info[idx].values}
        g_len = {value_key(1.0 / (n + 1)): (1.0 / (n + 1), float(b * n)) for n in an.info[length].values}
        if fid != sid:
            an.info[fid] = SInfo(fid, info.kind, "numerical", list(info.values), info.bases, info.table,
                                 base_kind=info.base_kind, cond=info.cond, pos=info.pos,
                                 inputs=info.inputs, fn=info.fn, notes=list(info.notes))
            an.info[fid].posaff = info.posaff
        self._feature(fid, an.info[fid], sid if sid in an.graph else None)
        op = MLPOp(fid, sid if sid in an.graph else info.inputs[0], fid, feats, [], info.pos, "map")
        op.separable = ([g_idx, g_len], float(c))  # type: ignore[attr-defined]
        self.ops[fid] = op
        return fid

    def _affine_map(self, sid: str, info: SInfo) -> None:
        """An opaque ``a·index + b·length + c`` read as itself: its number (``_affine_number``),
        and when it is categorical, that number's one-hot (steps of gap 1) one MLP later."""
        num = self._affine_number(sid)
        if num == sid:
            return
        rows = [((v,), v) for v in info.values]
        units = self._units([num], rows, False)
        if units is None or units > UNIT_CAP:
            raise self.an.error(sid, f"{self.an.describe(sid)} needs {units or 'unboundedly many'} "
                                "hidden units", hint="compare it with == against indices (one "
                                "number, no one-hot), or use a smaller --max-len")
        self._feature(sid, info, sid if sid in self.an.graph else None)
        self.ops[sid] = self._with_shared(MLPOp(sid, sid if sid in self.an.graph else info.inputs[0],
                                                sid, [num], rows, info.pos, "map"))

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

    def _needs_tuple(self, f: sl.Formula) -> bool:
        """Whether some conjunct of ``f`` reads several key (or query) s-ops (a product one-hot)."""
        an = self.an
        for c in sl.conjuncts(f):
            ats = sl.atoms(c)
            if len({a.key for a in ats if an.info[a.key].base_kind != "const"}) > 1 or \
                    len({a.query for a in ats if an.info[a.query].base_kind != "const"}) > 1:
                return True
        return False

    def _disjoint(self, f1: sl.Formula, f2: sl.Formula) -> bool:
        """Whether no (query, key) pair satisfies both: some key/query s-op pair alone rules it out
        (atoms on other pairs count as unknown, so this never claims too much)."""
        an = self.an
        both = sl.All((f1, f2))
        pairs = sorted({(a.key, a.query) for a in sl.atoms(both)})
        for k, q in pairs:
            kv, qv = an.info[k].values, an.info[q].values
            if len(kv) * len(qv) > 1_000_000:
                continue
            known = {a: sl.atom_matrix(a, qv, kv) for a in sl.atoms(both) if (a.key, a.query) == (k, q)}
            can_true, _ = sl.tri_evaluate(both, known, (len(qv), len(kv)))
            if not can_true.any():
                return True
        return False

    def _width_parts(self, sid: str) -> list[str] | None:
        """Scratch ids of the heads of ``width(A or B or …) = width(A) + width(B) + …``, for a
        selector that would need a product one-hot (an MLP layer before its head) while each of its
        disjuncts needs none and no two disjuncts can hold at once.

        One head cannot compute such a width from additive token + position embeddings: for
        ``t_k < t_q or (t_k == t_q and k < q)`` its score would be f(t_q, t_k) + g(q, k) +
        f'(t_q, k) + g'(q, t_k) (bilinear in the two one-hot sums); selected keys must tie and
        unselected ones lose, but for keys k1 < q < k2 the score difference
        g(q,k1) - g(q,k2) + f'(t_q,k1) - f'(t_q,k2) is the same whether t_k equals t_q (must be
        large) or is below it (must be 0).  Two heads whose BOS weights an MLP decodes jointly
        (two numbers -> the sum, by steps along a separating projection) keep the width in the
        first layer."""
        if not hasattr(self, "_parts_cache"):
            self._parts_cache: dict[str, list[str] | None] = {}
            self._part_formulas: dict[str, list[sl.Formula]] = {}
            self._numeric_parts: set[str] = set()
        if sid in self._parts_cache:
            return self._parts_cache[sid]
        an = self.an
        result = None
        node = an.node(sid) if sid in an.graph else None
        f = an.formula(node.inputs[0]) if isinstance(node, SelectorWidth) else None
        if isinstance(f, sl.All) and sum(isinstance(p, sl.Any_) for p in f.parts) == 1:
            # X and (A or B): width(X and A) + width(X and B) when A and B never hold together
            either = next(p for p in f.parts if isinstance(p, sl.Any_))
            rest = tuple(p for p in f.parts if p is not either)
            f = sl.Any_(tuple(sl.All((d, *rest)) for d in either.parts))
        if isinstance(f, sl.Any_) and self._needs_tuple(f) and not an.causal:
            flat: list[sl.Formula] = []
            todo = list(f.parts)
            while todo:
                p = todo.pop(0)
                if isinstance(p, sl.Any_):
                    todo[:0] = list(p.parts)
                else:
                    flat.append(p)
            small = 2 <= len(flat) <= 3 and (max(an.lengths) + 1) ** len(flat) <= 200_000
            if small and not any(self._needs_tuple(p) for p in flat) and all(
                    self._disjoint(a, b) for i, a in enumerate(flat) for b in flat[i + 1:]):
                top = max(an.lengths)
                ids = [f"{sid}.part{j}.bos_weight" for j in range(len(flat))]
                boost = float(top + 1) ** 2  # c = (N+1)^2: see _part_rows
                values = sorted_values(boost / (w + boost) for w in range(top + 1))
                rows = self._part_rows(sid, len(flat))
                for pid in ids:
                    an.info[pid] = SInfo(pid, "width_scratch", "numerical", values, (pid,),
                                         {(v,): v for v in values}, pos=an.info[sid].pos, inputs=(sid,))
                units = self._units(ids, rows, False)
                if units is not None and units <= UNIT_CAP:
                    result = ids
                    self._part_formulas[sid] = flat
                else:
                    # Too close together to decode jointly at this dtype (max_len ~256): plain part
                    # heads (BOS weight 1/(w+1)), each decoded by its own steps into one numerical
                    # sum, then converted to a one-hot — one more MLP sublayer, but O(N) units
                    # where the product one-hot of the whole selector would need O(N^2) values.
                    plain = sorted_values(1.0 / (w + 1) for w in range(top + 1))
                    for pid in ids:
                        an.info[pid] = SInfo(pid, "width_scratch", "numerical", plain, (pid,),
                                             {(v,): v for v in plain}, pos=an.info[sid].pos, inputs=(sid,))
                    result = ids
                    self._part_formulas[sid] = flat
                    self._numeric_parts.add(sid)
        self._parts_cache[sid] = result
        return result

    def _part_heads(self, sid: str) -> None:
        """The heads of a width split into parts (``_width_parts``), each writing its BOS weight."""
        node = self.an.node(sid)
        numeric = sid in self._numeric_parts
        for pid, part in zip(self._width_parts(sid) or [], self._part_formulas[sid], strict=True):
            if pid in self.features:
                continue
            self._feature(pid, self.an.info[pid], None, "width_scratch")
            self.ops[pid] = HeadOp(pid, sid, "width", pid, self.blocks(node.inputs[0], part),
                                   "always", None, [1.0], 1.0, True, node.pos,
                                   bos_log=0.0 if numeric else 2 * math.log(max(self.an.lengths) + 1.0))

    def _through_parts(self, sid: str, front: list[str], out_numeric: bool
                       ) -> tuple[list[str], list[tuple[tuple, Any]], Any] | None:
        """A map of a width split into part heads (and of embeddings or other features),
        tabulated on the parts' BOS weights instead of the decoded width: it then runs in the
        MLP of the heads' own layer, where reading the decoded width costs one more.  The
        original paper's sort computes ``-1 if indices == 0 else num_before`` this way."""
        an = self.an
        widths = [u for u in front if an.info[u].kind == "selector_width"
                  and self._width_parts(u) is not None and u not in self._numeric_parts]
        if len(widths) != 1:
            return None
        u = widths[0]
        k = front.index(u)
        by_width: dict[tuple, list[tuple[tuple, Any]]] = {}
        for args, y in self._rows(sid, front):
            by_width.setdefault(value_key(args[k]), []).append((args[:k] + args[k + 1:], y))
        parts = self._width_parts(u) or []
        rows = []
        for weights, w in self._part_rows(u, len(parts)):
            rows.extend((tuple(weights) + rest, y) for rest, y in by_width.get(value_key(w), []))
            if len(rows) > THROUGH_PARTS_CAP:
                return None
        inputs = parts + front[:k] + front[k + 1:]
        for pid in parts:
            self._part_owner[pid] = u
        units = self._units(inputs, rows, out_numeric)
        if units is None or units > UNIT_CAP:
            return None
        return inputs, rows, None

    def _part_rows(self, sid: str, k: int) -> list[tuple[tuple, Any]]:
        """(BOS weights of the parts, total width) for every split of a possible width.  The part
        heads weigh BOS as c = (N+1)^2 keys (``bos_log``), so BOS's weight c/(w+c) ~ 1 - w/c and
        the sum of two of them orders the splits by w1 + w2 (gaps ~1/c, the second-order terms stay
        below them): the decode is 2N steps along z = b1 + b2, separable at float32 to N ~ 160."""
        import itertools
        widths = [w for w in self.an.info[sid].values if isinstance(w, int)]
        top = max(widths, default=0)
        boost = float(max(self.an.lengths) + 1) ** 2
        ok = set(widths)
        rows = []
        for ws in itertools.product(range(top + 1), repeat=k):
            if sum(ws) in ok:
                rows.append((tuple(boost / (w + boost) for w in ws), sum(ws)))
        return rows

    def _width(self, sid: str, sel_id: str | None, info: SInfo) -> None:
        """The width itself, decoded from the BOS weight by an MLP (only when something reads it)."""
        parts = self._width_parts(sid) if sel_id is not None else None
        if parts is not None:
            self._part_heads(sid)
            numeric = sid in self._numeric_parts
            if numeric:
                self._numeric_width_sum(sid, info, parts)
                return
            self._feature(sid, info, sid)
            rows = self._part_rows(sid, len(parts))
            self.ops[sid] = MLPOp(sid, sid, sid, list(parts), rows, self.an.node(sid).pos, "width_decode")
            sep = self._separable(list(parts), rows) if info.encoding == "numerical" else None
            if sep is not None:
                self.ops[sid].separable = sep[1]  # type: ignore[attr-defined]
            return
        scratch = self.need(self.scratch(sid))
        self._feature(sid, info, sid)
        rows = [((1.0 / (w + 1),), w) for w in sorted_values(info.values)]
        self.ops[sid] = MLPOp(sid, sid, sid, [scratch], rows, self.an.node(sid).pos, "width_decode")


    def _numeric_width_sum(self, sid: str, info: SInfo, parts: list[str]) -> None:
        """w = w1 + w2 (+ w3) as one numerical feature (a separable MLP: each part's own steps on
        its BOS weight 1/(w_j + 1)), then its one-hot (steps of gap 1) when the width is
        categorical."""
        import itertools
        top = max(self.an.lengths)
        ok = {w for w in info.values if isinstance(w, int)}
        rows = [(tuple(1.0 / (w + 1) for w in ws), sum(ws))
                for ws in itertools.product(range(top + 1), repeat=len(parts)) if sum(ws) in ok]
        sep = self._separable(list(parts), rows)
        if sep is None:
            raise self.an.error(sid, f"{self.an.describe(sid)} cannot be decoded exactly at "
                                f"{self.an.dtype}", hint="use --dtype float64 or a smaller --max-len")
        values = sorted(ok)
        if info.encoding == "numerical":
            self._feature(sid, info, sid)
            self.ops[sid] = MLPOp(sid, sid, sid, list(parts), rows, info.pos, "width_decode")
            self.ops[sid].separable = sep[1]  # type: ignore[attr-defined]
            return
        nid = f"{sid}:sum"
        self.an.info[nid] = SInfo(nid, "width_sum", "numerical", values, (nid,),
                                  {(v,): v for v in values}, pos=info.pos, inputs=tuple(parts))
        self._feature(nid, self.an.info[nid], None, "width_sum")
        self.ops[nid] = MLPOp(nid, sid, nid, list(parts), rows, info.pos, "width_decode")
        self.ops[nid].separable = sep[1]  # type: ignore[attr-defined]
        self._feature(sid, info, sid)
        self.ops[sid] = MLPOp(sid, sid, sid, [nid], [((float(w),), w) for w in values], info.pos,
                              "convert")


def _ancestors_of(an: Analysis, sid: str) -> set[str]:
    """The s-ops ``sid`` is computed from (through the analysis's inputs)."""
    out: set[str] = set()
    todo = list(an.info[sid].inputs)
    while todo:
        u = todo.pop()
        if u not in out and u in an.info:
            out.add(u)
            todo.extend(an.info[u].inputs)
    return out


def _differ(a: Any, b: Any) -> bool:
    """Whether two outputs of a map differ by more than float rounding (numbers) or at all."""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    if numbers:
        return abs(a - b) > 1e-6 * max(1.0, abs(a), abs(b))
    return a != b
