"""Maps that get no unit of their own (``Deferred``): why not, and how a consumer inlines them.

A map that is no form (``real_forms``) and is no continuous function of one number gets no unit.
It is not an error yet: a consumer may inline it (the condition of a max), and only something that
needs its value reports the message recorded here, at the line of the first map that had no form.
"""

from __future__ import annotations

from typing import Any

from rasp_compiler.compiler.real.specs import Deferred
from rasp_compiler.errors import CompileError
from rasp_compiler.graph.expr import Binary, Contains, Lookup, PyFn, Ternary, Unary, children, variables

# operators whose value can jump as a real argument moves: a piecewise-linear unit cannot follow a
# jump, and a grid of samples cannot bound the error near one (`indicator(x == 0.5)` was compiled
# as the constant 0 with a stated bound of 0)
STEP_BINARY = frozenset({"==", "!=", "<", ">", "<=", ">=", "%", "and", "or"})
STEP_UNARY = frozenset({"not", "round", "indicator"})


def step_part(expr: Any) -> Any:
    """The first sub-expression of ``expr`` that reads an input and can jump, or None."""
    if variables(expr):
        if isinstance(expr, Binary) and expr.op in STEP_BINARY:
            return expr
        if isinstance(expr, Unary) and expr.op in STEP_UNARY:
            return expr
        if isinstance(expr, (Ternary, Lookup, Contains)):
            return expr
    for c in children(expr):
        found = step_part(c)
        if found is not None:
            return found
    return None


def _step_name(step: Any) -> str:
    if isinstance(step, (Binary, Unary)):
        return f"'{step.op}'"
    return {Ternary: "a choice", Lookup: "a table lookup", Contains: "'in'"}[type(step)]


def has_python_fn(expr: Any) -> bool:
    return isinstance(expr, PyFn) or any(has_python_fn(c) for c in children(expr))


class DeferredMaps:
    """Part of ``NumericCompiler`` (``core``): maps without a unit, inlined or refused."""

    def _inline(self, fn: Any, inputs: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
        """``fn`` over ``inputs`` with deferred (inline-only) maps substituted by their expressions."""
        from rasp_compiler.graph.expr import Var, substitute

        if not any(i in self.deferred for i in inputs):
            return fn, tuple(inputs)
        new_inputs: list[str] = []
        bindings = {}
        for k, i in enumerate(inputs):
            if i in self.deferred:
                sub_fn, sub_inputs = self.deferred[i].fn, self.deferred[i].inputs
                inner = {}
                for j, si in enumerate(sub_inputs):
                    if si not in new_inputs:
                        new_inputs.append(si)
                    inner[j] = Var(new_inputs.index(si))
                bindings[k] = substitute(sub_fn, inner)
            else:
                if i not in new_inputs:
                    new_inputs.append(i)
                bindings[k] = Var(new_inputs.index(i))
        return substitute(fn, bindings), tuple(new_inputs)

    def _why_no_unit(self, node: Any, fn: Any, inputs: tuple[str, ...], why: str) -> Deferred | None:
        """Why the map ``node`` (``fn`` over ``inputs`` after inlining) gets no piecewise-linear
        unit, as a Deferred; None when it gets one (a continuous function of one number)."""
        nid = node.id
        upstream = next((self.deferred[i] for i in node.inputs if i in self.deferred), None)
        if upstream is not None:
            # the inlined map is still no form: the first map that had none is the one to change
            return Deferred(fn, inputs, upstream.origin, upstream.message, upstream.hint)
        step = step_part(fn)
        if step is not None:
            return Deferred(fn, inputs, nid,
                            f"{{node}} can jump as a real number moves ({_step_name(step)} of a real "
                            "number): no piecewise-linear unit follows a jump, and no error bound holds "
                            "near one",
                            "compare real numbers only inside a max or min (a if a > b else b), which "
                            "is exact; or select on positions")
        if sum(i not in self.pos for i in inputs) > 1:
            return Deferred(fn, inputs, nid,
                            f"{{node}} is not exactly compilable ({why}) and reads several real "
                            "numbers; only a function of one real number gets a piecewise-linear "
                            "unit with an error bound",
                            "a max or min (a if a > b else b) is exact; otherwise compute the "
                            "argument as its own s-op first")
        if has_python_fn(fn):
            return Deferred(fn, inputs, nid,
                            "{node} applies a Python function to a real number: the compiler cannot "
                            "see whether it is continuous, so no error bound can be stated",
                            "write the map as a RASP expression (+, *, ^, /, max/min as a if a > b "
                            "else b)")
        return None

    def _deferred_error(self, sid: str) -> CompileError:
        d = self.deferred[sid]
        return self.error(d.origin, d.message, hint=d.hint)
