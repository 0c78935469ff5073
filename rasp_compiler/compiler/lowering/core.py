"""The ``Lowering`` class: its state, and ``need``, which makes an s-op a residual feature.

``need`` dispatches on what the s-op is: embeddings here, and the parts mixed in for the rest:
maps (``maps``, over the rows of ``map_rows``; ``affine``), aggregates (``aggregates``, scored by
``selector_blocks``, checked by ``causal``) and selector widths (``widths``, ``width_parts``).
"""

from __future__ import annotations

from rasp_compiler.compiler.analysis import Analysis, SInfo
from rasp_compiler.compiler.lowering.affine import AffineNumbers
from rasp_compiler.compiler.lowering.aggregates import Aggregates
from rasp_compiler.compiler.lowering.causal import CausalCheck
from rasp_compiler.compiler.lowering.map_rows import MapRows
from rasp_compiler.compiler.lowering.maps import Maps
from rasp_compiler.compiler.lowering.ops import BOS_WEIGHT, EmbedOp, Feature, MLPOp, Op, is_bos_weight
from rasp_compiler.compiler.lowering.selector_blocks import SelectorBlocks
from rasp_compiler.compiler.lowering.width_parts import WidthParts
from rasp_compiler.compiler.lowering.widths import Widths
from rasp_compiler.compiler.numeric import SharedSteps, StepGroup
from rasp_compiler.graph.nodes import Aggregate, Indices, Length, Map, SelectorWidth, SequenceMap, Tokens


class Lowering(Maps, MapRows, AffineNumbers, SelectorBlocks, CausalCheck, Aggregates, Widths, WidthParts):
    """The features and ops of an analysed program (``an``), from its output back to the inputs."""

    def __init__(self, an: Analysis) -> None:
        self.an = an
        self.features: dict[str, Feature] = {}
        self.ops: dict[str, Op] = {}  # keyed by the feature they write
        self._frontiers: dict[str, list[str]] = {}
        self._part_owner: dict[str, str] = {}  # part head id -> its width (``_width_parts``)
        self._quotients: dict[tuple, str] = {}  # (s-op, its classes) -> the map onto them (``_quotient``)
        # rows whose step MLP is cheaper with shared steps -> (the rows, their SharedSteps)
        self._shared: dict[int, tuple[list, SharedSteps]] = {}
        # (rows' id, inputs, numerical output?) -> (the rows, their hidden units) (``_units``)
        self._unit_counts: dict[tuple, tuple[list, int | None]] = {}
        # (rows' id, inputs) -> (the rows, their numerical positions, their step MLP's groups, whether
        # they were found not affine) (``_units``)
        self._step_plans: dict[tuple, tuple[list, list[int], list[StepGroup], bool]] = {}
        self.output = self.need(an.program.output)

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
        elif is_bos_weight(sid):
            self._width_head(sid[: -len(BOS_WEIGHT)])
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
                                     "distinct values (e.g. 0/1 indicators), or use a smaller --max-len",
                                too_large=True)
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
