"""Analysis: what every s-op can hold, how it is encoded, and which values occur together.

Each s-op gets an ``SInfo``: its encoding (one-hot ``categorical`` or one-dimensional
``numerical``), its sorted value set, and a *table*: its value as a function of a few **base**
s-ops.  Bases are the s-ops whose values the compiler treats as free: the token, the index, the
length, and the outputs of attention (aggregates, selector widths).  Index and length are tied
(index < length), and an attention output whose selector only reads positions (a prefix mean, a
full selector) is a *conditional* base: its possible values are enumerated for each
(index, length) pair, so ``(indices + 1) * prefix_mean`` knows the mean's denominator.

The joint value tuples of any set of s-ops are then read off by enumerating their bases: this is
what lets a fused MLP use hidden units only for value combinations that can occur, and it keeps
every value set an over-approximation (never an under-approximation) of what the interpreter can
produce.

The analysis is one class, ``Analysis`` (``core``), built from parts with one job each:

* ``sinfo``: ``SInfo``, what is recorded for one s-op;
* ``domains``: the joint assignments of bases that can occur at one position;
* ``maps``: tables of maps; ``affine``: integer maps of the index and the length, without a table;
* ``aggregates``: value sets of aggregates and selector widths;
* ``selector_formulas``: each selector's formula, simplified; ``selector_facts``: what can be
  proved about a selection (widths, at most one key, keys that differ at every position);
* ``bool_number``: booleans against equal numbers (0 and False), checked last;
* ``limits``: the size limits past which a coarser path is taken.
"""

from __future__ import annotations

from rasp_compiler.compiler.analysis.core import Analysis
from rasp_compiler.compiler.analysis.sinfo import SInfo, convert_token, is_numeric

__all__ = ["Analysis", "SInfo", "convert_token", "is_numeric"]
