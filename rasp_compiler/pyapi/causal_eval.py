"""tracr's ``causal_eval``: evaluation with every selector masked causally (a query position
sees only keys at or before it), as a decoder's attention does.

    from rasp_compiler.pyapi import causal_eval      # tracr: from tracr.rasp import causal_eval
    causal_eval.evaluate(program, xs)
"""

from __future__ import annotations

from typing import Any

from rasp_compiler.pyapi.base import RASPExpr, Selector, indices
from rasp_compiler.pyapi.program import evaluate_expr
from rasp_compiler.pyapi.selectors import Comparison, Select, SelectorAnd


def _masked(expr: RASPExpr, done: dict[int, RASPExpr]) -> RASPExpr:
    """``expr`` with each selector it depends on (itself included) and-ed with ``key <= query``."""
    if expr.uid in done:
        return done[expr.uid]
    inputs = tuple(_masked(e, done) for e in expr.inputs)
    out = expr
    if any(a is not b for a, b in zip(inputs, expr.inputs, strict=True)):
        out = expr.copy()
        out.inputs = inputs
    if isinstance(expr, Selector):
        out = SelectorAnd(out, Select(indices, indices, Comparison.LEQ))
    done[expr.uid] = out
    return out


def masked_program(expr: RASPExpr) -> RASPExpr:
    """``expr`` with every selector it reads and-ed with ``Select(indices, indices, LEQ)``: a program
    whose plain meaning is ``expr``'s causal one (what ``evaluate`` here computes).  Compiled with
    ``causal=True`` it is tracr's causal model of ``expr``."""
    return _masked(expr, {})


def evaluate(expr: RASPExpr, xs: Any) -> Any:
    """``expr`` on ``xs`` with causal selectors (tracr's ``causal_eval.evaluate``)."""
    return evaluate_expr(masked_program(expr), xs)


class CausalEvaluator:
    """tracr's class: ``CausalEvaluator().evaluate(expr, xs)``."""

    def evaluate(self, expr: RASPExpr, xs: Any) -> Any:
        return evaluate(expr, xs)
