"""Numerical compilation: programs over real-valued tokens (``tokens_float``) and an input range.

``compile_program(..., input_range=(lo, hi))`` comes here.  The program graph is the same one the
interpreter reads; what differs from categorical compilation is that token values are not
enumerable, so:

* **Embedding.** The token is embedded linearly: one residual dimension holds its value
  (``embed.value``), no lookup table.  Positional s-ops (functions of ``indices``, constants and,
  at a fixed length, ``length``) are known at every position, so they are folded into the
  position embedding — they cost no layer.
* **Interval analysis.** Every numerical s-op gets an interval, propagated from ``--input-range``
  through aggregates (a mean stays in the hull of its values and default) and maps (interval
  arithmetic on their forms).  Intervals size the margins of heads and the error bounds of maps.
* **Maps** are read as forms (``real_forms``): constants, numbers, products of two numbers and
  max/min, each with a position-dependent coefficient.  Each becomes gated units
  ``relu(x W_in + b_in) * (x W_gate + b_gate)`` that are exact up to one float rounding:
  ``a * b = relu(a) * b + relu(-a) * (-b)``, ``c(p) * a`` gates by an embedded coefficient,
  ``max(a, b) = b + relu(a - b)``.  A map of one number that is no form (``e ^ x``, ``1 / x``) gets
  a piecewise-linear unit over the inferred interval and a stated error bound; a map that cannot
  be bounded (a pole or a jump in the range, several numerical inputs) is a compile error.
* **Heads.** An aggregate whose selector reads positional s-ops is a hard-attention head: the
  selector becomes additive score blocks that are exactly 0 on selected keys and <= -1 elsewhere
  (one-hot blocks, or for ``select(indices, f, ==)`` a quadratic block ``-(k - f)^2`` written
  in base-B digits so that it stays small).  ``softmax_aggregate`` is one head whose scores are the
  dot product of its query and key s-ops plus such a mask, scaled so that masked keys and the BOS
  default underflow to weight 0: the runtime's own max-subtracted softmax does the rest.

The weights use the ordinary saved-model format (``runtime.py``), plus ``embed.value`` and the
optional ``mlp.W_gate`` / ``mlp.b_gate`` of gated MLPs.

The compiler is one class, ``NumericCompiler`` (``core``), built from parts with one job each, and
``compile_numeric`` (``assembly``) turns what it plans into weights:

* ``specs``: what is planned before any weight exists: features, gated units, heads, MLPs;
* ``positions``: positional s-ops, evaluated once and folded into the position embedding;
* ``intervals``: the interval (and form) of every numerical s-op;
* ``deferred``: maps that get no unit of their own: inlined by a consumer, or an error;
* ``gated_units``: maps as gated units; ``piecewise``: maps of one number that are no form;
* ``score_blocks``: a positional selector's score blocks; ``heads``: aggregates and
  ``softmax_aggregate``, with the rounding of softmax scores;
* ``assembly``: layout, merged heads, tensors and config; ``bounds``: the output's error bound
  and the notes of inexact maps;
* ``integer_tokens``: ``--input-range`` for a program over integer tokens (a categorical vocabulary);
* ``limits``: tolerances and the limits of piecewise-linear maps (the score gap is ``assemble.GAP``).

Beside the package: ``real_forms`` reads a map's expression as a form, and ``real_check`` checks
a model against the interpreter on sampled real inputs (``rasp check --input-range``, whose
command-line side is ``rasp_compiler.commands.real_options``).
"""

from __future__ import annotations

from rasp_compiler.compiler.real.assembly import compile_numeric
from rasp_compiler.compiler.real.core import NumericCompiler
from rasp_compiler.compiler.real.integer_tokens import integer_vocab
from rasp_compiler.compiler.real.limits import EXACT_TOL

__all__ = ["EXACT_TOL", "NumericCompiler", "compile_numeric", "integer_vocab"]
