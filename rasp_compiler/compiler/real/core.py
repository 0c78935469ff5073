"""The ``NumericCompiler`` class: its state, its errors, and ``need``, which makes an s-op a
residual feature.

``need`` dispatches on what the s-op is: positional s-ops are embedded (``positions``), tokens
are the value dimension, aggregates become heads (``heads``, scored by ``score_blocks``) and maps
become gated units (``gated_units``, ``piecewise``).  The constructor runs the analysis
(``positions``, ``intervals``, ``deferred``); ``assembly`` then asks for the output.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from rasp_compiler.compiler.assemble import GAP
from rasp_compiler.compiler.real.deferred import DeferredMaps
from rasp_compiler.compiler.real.gated_units import GatedUnits
from rasp_compiler.compiler.real.grids import Grids
from rasp_compiler.compiler.real.heads import Heads
from rasp_compiler.compiler.real.integer_tokens import reads_integer_tokens
from rasp_compiler.compiler.real.intervals import Intervals
from rasp_compiler.compiler.real.piecewise import PiecewiseLinear
from rasp_compiler.compiler.real.positions import PositionalFolding
from rasp_compiler.compiler.real.reciprocal import Reciprocals
from rasp_compiler.compiler.real.row_selectors import RowSelectors
from rasp_compiler.compiler.real.score_blocks import ScoreBlocks
from rasp_compiler.compiler.real.specs import Deferred, Feat, HeadSpec, MLPSpec
from rasp_compiler.compiler.real_forms import Form
from rasp_compiler.errors import CompileError
from rasp_compiler.graph.nodes import Aggregate, Program, SoftmaxAggregate, Tokens


class NumericCompiler(PositionalFolding, Intervals, Grids, DeferredMaps, PiecewiseLinear, Reciprocals,
                      RowSelectors, ScoreBlocks, Heads, GatedUnits):
    """The features, heads and MLPs of a program over real-valued tokens in ``input_range``."""

    def __init__(self, program: Program, input_range: tuple[float, float], max_len: int, *,
                 fixed_length: int | None, dtype: str, causal: bool,
                 input_grid: Fraction | None = None, min_denominator: float | None = None) -> None:
        lo, hi = float(input_range[0]), float(input_range[1])
        if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            raise CompileError(f"--input-range needs finite LO <= HI, got {lo} {hi}")
        self.program, self.graph = program, program.graph
        self.range = (lo, hi)
        self.fixed = fixed_length
        self.n = fixed_length or max_len
        self.max_len = max_len
        self.dtype, self.causal = dtype, causal
        self.gap = GAP[dtype]
        self.pos: dict[str, Any] = {}  # positional node -> per-position values / selector matrix
        self.interval: dict[str, tuple[float, float]] = {}
        self.forms: dict[str, Form] = {}
        self.feats: dict[str, Feat] = {}
        self.heads: list[HeadSpec] = []
        self.mlps: list[MLPSpec] = []
        self.embed_cache: dict[bytes, str] = {}
        self.narrow_cache: dict[bytes, str] = {}  # features of narrow alternatives (``embed``)
        self.narrowing = False
        self.map_reports: list[dict[str, Any]] = []
        self.deferred: dict[str, Deferred] = {}
        # grids (``grids``): integer tokens are multiples of 1, real ones of --input-grid if given
        self.input_grid = input_grid
        self.min_denominator = min_denominator
        self.token_grid = Fraction(1) if reads_integer_tokens(program) else input_grid
        self.grid: dict[str, list[Fraction | None]] = {}
        self.grid_why: dict[str, str] = {}
        self.stand_in: dict[str, str] = {}  # a key gathered for a data selector -> its s-op
        self.delta: dict[str, float] = {}
        self.step_grid: dict[Any, np.ndarray] = {}  # a step's difference -> its grid step per position
        self._recips: dict[str, dict[str, Any]] = {}  # reciprocal maps (``reciprocal``)
        self._rows: dict[str, dict[str, Any]] = {}  # data selectors (``row_selectors``)
        self.guards: list[dict[str, Any]] = []  # denominators the model flags near 0
        self.relative_bounds: dict[str, float] = {}  # |error| <= this x |value| (approximate maps)
        # computed once an s-op, not once a use (``grids``, ``intervals``, ``score_blocks``): the
        # positional s-ops never change, and a grid list is cached with the list it was coded from
        self._grid_codes: dict[str, tuple[Any, Any]] = {}
        self._pos_delta: dict[str, float] = {}
        self._pos_interval: dict[str, tuple[float, float]] = {}
        self._sel_rows: dict[str, dict[str, np.ndarray]] = {}
        self._atom_cache: dict[tuple, Any] = {}
        self._report_nodes: list[Any] = [0, set()]  # map_reports read so far, their nodes
        # the last forms' loops (``grids.resume``): grids and intervals
        self._form_states: dict[str, dict[str, Any]] = {"grid": {}, "interval": {}}
        try:
            self._analyse()
        except CompileError as err:  # how large the categorical plan would be, as far as known
            err.largest_table = self.largest_table()  # type: ignore[attr-defined]
            raise
        # the analysis's caches that building the weights does not read (recomputed where asked):
        # the coded grids of positional s-ops (their distinct steps can be one a position), the
        # selectors' key pairs; the other coded grids stay (``largest_table`` reads every one)
        for sid in [s for s in self._grid_codes if s in self.pos]:
            del self._grid_codes[sid]
        self._sel_rows.clear()
        self._form_states["grid"].clear()
        self._form_states["interval"].clear()

    def error(self, node_id: str, message: str, hint: str | None = None) -> CompileError:
        node = self.program.node(node_id) if node_id in self.graph else None
        pos = node.pos if node is not None else None
        source = self.program.sources.get(pos.file) if pos is not None else None
        shown = pos is not None and pos.text and pos.text != node_id
        text = f"'{node_id}'" + (f" ({pos.text})" if shown else "")
        return CompileError(message.replace("{node}", text), pos.file if pos else self.program.source_file,
                            pos.line if pos else None, pos.col if pos else None, source, hint=hint)

    def need(self, sid: str) -> str:
        """Make ``sid`` a residual feature; returns its id."""
        if sid in self.feats:
            return sid
        if sid in self.pos:
            vals = self.pos[sid]
            nums = np.array([float(v) if isinstance(v, (int, float)) else np.nan for v in vals])
            return self.embed(nums, sid)
        node = self.program.node(sid)
        if sid in self.deferred:
            raise self._deferred_error(sid)
        if isinstance(node, Tokens):
            self.feats[sid] = Feat(sid, 1, -1, sid, "token", labels=[sid])
        elif sid in self._rows:
            self._row_features(node)
        elif isinstance(node, Aggregate):
            self._head(node)
        elif isinstance(node, SoftmaxAggregate):
            self._head(node)
        else:
            self._mlp(node)
        return sid

    def slot(self, fid: str) -> int:
        return self.feats[fid].slot

