"""Expressions: how each expression form of the syntax tree elaborates (a mixin of ``Session``).

Atoms, lists and dicts are computed on the spot; an operation with an s-op operand adds a node to
the graph (see the table in ``rasp_compiler.lang.elaborator``).  Each ``e_<form>`` method handles
the grammar alias ``<form>``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable

from lark import Token, Tree

from rasp_compiler.errors import RaspError
from rasp_compiler.graph.expr import Binary, Const, Contains, Expr, Lookup, Ternary, Unary, Var
from rasp_compiler.graph.nodes import (
    COMPARISONS,
    Aggregate,
    Constant,
    Map,
    Select,
    SelectorAnd,
    SelectorNot,
    SelectorOr,
    SequenceMap,
)
from rasp_compiler.lang.values import Builtin, Env, Function, Selector, SOp, a_kind, is_atom, kind_name

if TYPE_CHECKING:
    from rasp_compiler.lang.elaborator import _Context

# The REPL's names for s-ops and selectors nobody named, as the original's (tech-srl/RASP): a name
# longer than this falls back to the kind (FunctionalSupport.py, name_maxlen and setname).
NAME_MAXLEN = 30
# `1 < x` names as Python reflects it to x's operator: `( x > 1 )` (make_operators.py).
REFLECTED = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}

ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


def decode_string(token_text: str) -> str:
    """The value of a STRING token: quotes removed, known backslash escapes decoded (any other
    backslash stays, as the original kept every backslash)."""
    body, out, i = token_text[1:-1], [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body) and body[i + 1] in ESCAPES:
            out.append(ESCAPES[body[i + 1]])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


class Expressions:
    """The expression half of the elaborator; ``Session`` supplies builder, error, pos, calls."""

    display_names: dict[str, str]  # node id -> the REPL's name for it (set up by Session)

    # -- display names: what the REPL calls an s-op or selector inside a printed list or dict.  They
    # follow the original's mutable names (``setname``): every object is named when made (kind,
    # operator or call), and renamed by each assignment to it and each function call returning it.
    # Only the REPL reads them (``display_names``); node ids and programs do not depend on them.
    def display_name(self, value: SOp | Selector) -> str:
        name = self.display_names.get(value.node)
        if name is None:  # the original's defaults: select(...) and aggregate(...) are not named
            return "plain select" if isinstance(value, Selector) else "s-op"
        return name

    def set_display_name(self, value: SOp | Selector, name: str) -> None:
        if len(name) > NAME_MAXLEN:
            name = "sel" if isinstance(value, Selector) else "s-op"
        self.display_names[value.node] = name

    def operand_name(self, value: Any) -> str:
        """An operand as the original's operator names show it: an s-op by name, an atom bare."""
        return self.display_name(value) if isinstance(value, (SOp, Selector)) else str(value)

    def describe(self, value: Any, cap: int | None = None) -> str:
        """An argument as the original's call names show it (Evaluator.py, strdesc): strings quoted,
        a list or dict longer than ``cap`` as (list) / (dict)."""
        if isinstance(value, (SOp, Selector)):
            return self.display_name(value)
        if isinstance(value, (list, dict)):
            if isinstance(value, list):
                text = "[" + ", ".join(self.describe(v) for v in value) + "]"
            else:
                text = "{" + ", ".join(f"{self.describe(k)}: {self.describe(v)}"
                                       for k, v in value.items()) + "}"
            if cap is not None and len(text) > cap:
                return "(list)" if isinstance(value, list) else "(dict)"
            return text
        if isinstance(value, str):
            return f'"{value}"'
        if isinstance(value, (Function, Builtin)):
            return self.describe_function(value)
        return str(value)

    def describe_function(self, fn: Function | Builtin) -> str:
        """A function argument in a call's name (the REPL words it as it prints functions)."""
        return str(fn)

    def name_call_result(self, fn_name: str, args: list[Any], result: Any) -> None:
        """A function call names the s-op or selector it returns after itself: ``f("a" , x)``."""
        if isinstance(result, (SOp, Selector)):
            described = " , ".join(self.describe(a, 20) for a in args)
            self.set_display_name(result, f"{fn_name}({described})")

    def expr(self, tree: Tree | Token, env: Env, ctx: _Context) -> Any:
        method = getattr(self, "e_" + tree.data, None)
        if method is None:  # pragma: no cover - every grammar alias has a method
            raise self.error(f"unsupported expression {tree.data}", tree, ctx)
        return method(tree, env, ctx)

    def e_var(self, tree: Tree, env: Env, ctx: _Context) -> Any:
        name = tree.children[0].value
        try:
            return env.lookup(name)
        except KeyError:
            close = env.suggest(name)
            hint = f"did you mean '{close}'?" if close else None
            if name in _MAP_NAMES:  # the paper's map/zipmap, tracr's Map ('map' was close to 'max')
                hint = ("RASP has no map function: write the elementwise expression on the s-ops "
                        "themselves (indices + 1, tokens == \"a\", {\"a\": 1, \"b\": 2}[tokens]); a "
                        "Python function is a map in rasp_compiler.pyapi (docs/python-api.md)")
            if name.startswith("_") and close is None:
                hint = "names starting with '_' stay private to the file that defines them"
            if name == "print":  # Python's habit: the REPL shows what a statement gives
                hint = ("RASP has no print: at the prompt a statement shows its value (`x;`, or "
                        "`x(\"abc\");` on an input); a file's result is its last statement (rasp run FILE "
                        "--output NAME for another)")
            raise self.error(f"unknown name '{name}'", tree, ctx, hint=hint) from None

    def e_int(self, tree: Tree, env: Env, ctx: _Context) -> int:
        from rasp_compiler.graph.semantics import MAX_INT_BITS, too_large

        text = tree.children[0].value.lstrip("0") or "0"
        # a digit is log2(10) = 3.32 bits: a literal of more digits than this cannot fit, and int()
        # refuses more than 4,300 digits with a ValueError
        if len(text) > MAX_INT_BITS * 0.302 + 1 or int(text).bit_length() > MAX_INT_BITS:
            raise self.error(str(too_large(f"the integer literal of {len(text):,} digits")), tree, ctx)
        return int(text)

    def e_float(self, tree: Tree, env: Env, ctx: _Context) -> float:
        value = float(tree.children[0].value)
        if not math.isfinite(value):  # 1e999 reads as inf
            raise self.error("the number is past the float range (about 1.8e308)", tree, ctx)
        return value

    def e_string(self, tree: Tree, env: Env, ctx: _Context) -> str:
        return decode_string(tree.children[0].value)

    def e_list(self, tree: Tree, env: Env, ctx: _Context) -> list:
        exprs = tree.children[0]
        return [] if exprs is None else [self.expr(e, env, ctx) for e in exprs.children]

    def e_dict(self, tree: Tree, env: Env, ctx: _Context) -> dict:
        out: dict = {}
        for pair in tree.children:
            if pair is None:
                continue
            key = self.expr(pair.children[0], env, ctx)
            if not is_atom(key):
                raise self.error("a dict key must be an atom (number, string or bool), got "
                                 f"{a_kind(key)}",
                                 pair.children[0], ctx)
            out[key] = self.expr(pair.children[1], env, ctx)
        return out

    def e_listcomp(self, tree: Tree, env: Env, ctx: _Context) -> list:
        value_tree, names_tree, iterable_tree = tree.children
        names = [t.value for t in names_tree.children]
        out = []
        for item in self._iterate(self.expr(iterable_tree, env, ctx), names, iterable_tree, ctx,
                                  "list comprehension"):
            inner = Env(parent=env, label="comprehension")
            self._bind_iterator(names, item, names_tree, inner, ctx)
            with self._loop_context(names, item, ctx):
                out.append(self.expr(value_tree, inner, ctx))
        return out

    def e_dictcomp(self, tree: Tree, env: Env, ctx: _Context) -> dict:
        key_tree, value_tree, names_tree, iterable_tree = tree.children
        names = [t.value for t in names_tree.children]
        out: dict = {}
        for item in self._iterate(self.expr(iterable_tree, env, ctx), names, iterable_tree, ctx,
                                  "dict comprehension"):
            inner = Env(parent=env, label="comprehension")
            self._bind_iterator(names, item, names_tree, inner, ctx)
            with self._loop_context(names, item, ctx):
                key = self.expr(key_tree, inner, ctx)
                if not is_atom(key):
                    raise self.error(f"a dict key must be an atom, got {a_kind(key)}", key_tree, ctx)
                out[key] = self.expr(value_tree, inner, ctx)
        return out

    # -- operators
    def e_binop(self, tree: Tree, env: Env, ctx: _Context) -> Any:
        left_tree, op_tok, right_tree = tree.children
        op = op_tok.value
        left = self.expr(left_tree, env, ctx)
        right = self.expr(right_tree, env, ctx)
        return self.binary(op, left, right, tree, ctx)

    def binary(self, op: str, left: Any, right: Any, tree, ctx: _Context) -> Any:
        sel_l, sel_r = isinstance(left, Selector), isinstance(right, Selector)
        if sel_l or sel_r:
            if op in ("and", "or") and sel_l and sel_r:
                cls = SelectorAnd if op == "and" else SelectorOr
                return Selector(self.builder.add(cls, (left.node, right.node), self.pos(tree, ctx)))
            other = right if sel_l else left
            if op in ("and", "or"):
                raise self.error(f"'{op}' combines two selectors (or two s-ops), not a selector and "
                                 f"{a_kind(other)}", tree, ctx)
            raise self.error(f"cannot apply '{op}' to a selector", tree, ctx,
                             hint="selectors combine only with and / or / not")
        if isinstance(left, SOp) or isinstance(right, SOp):
            for side in (left, right):
                if not isinstance(side, SOp) and not is_atom(side):
                    raise self.error(f"cannot apply '{op}' to an s-op and {a_kind(side)}", tree, ctx,
                                     hint=("to index by an s-op write table[sop]; for membership write "
                                           "sop in list") if isinstance(side, (list, dict)) else None)
            result = self.elementwise(lambda a, b: Binary(op, a, b), [left, right], tree, ctx)
            lname, rname = self.operand_name(left), self.operand_name(right)
            if op in ("and", "or"):
                self.set_display_name(result, f"( {lname} {op} {rname})")
            elif not isinstance(left, SOp) and op in REFLECTED:
                self.set_display_name(result, f"( {rname} {REFLECTED[op]} {lname} )")
            else:
                self.set_display_name(result, f"( {lname} {'pow' if op == '^' else op} {rname} )")
            return result
        return self.atom_binary(op, left, right, tree, ctx)

    def atom_binary(self, op: str, left: Any, right: Any, tree, ctx: _Context) -> Any:
        if isinstance(left, (Function, Builtin)) or isinstance(right, (Function, Builtin)):
            raise self.error(f"cannot apply '{op}' to a function", tree, ctx)
        try:
            if op == "and":
                return left and right
            if op == "or":
                return left or right
            from rasp_compiler.graph.semantics import OperatorError, apply_binary
            try:
                return apply_binary(op, left, right)
            except OperatorError as err:
                raise self.error(str(err), tree, ctx) from None
        except RaspError:
            raise
        except Exception as err:  # e.g. comparing a list with a number
            raise self.error(f"cannot apply '{op}' to {kind_name(left)} and {kind_name(right)}: {err}",
                             tree, ctx) from None

    def e_unop(self, tree: Tree, env: Env, ctx: _Context) -> Any:
        op_tok, arg_tree = tree.children
        op = op_tok.value
        value = self.expr(arg_tree, env, ctx)
        if isinstance(value, Selector):
            if op == "not":
                return Selector(self.builder.add(SelectorNot, (value.node,), self.pos(tree, ctx)))
            raise self.error(f"cannot apply '{op}' to a selector", tree, ctx)
        if isinstance(value, SOp):
            result = self.elementwise(lambda a: Unary(op, a), [value], tree, ctx)
            name = self.display_name(value)
            self.set_display_name(result, f"I({name})" if op == "indicator" else f"( {op} {name} )")
            return result
        if not is_atom(value):
            raise self.error(f"cannot apply '{op}' to {a_kind(value)}", tree, ctx)
        from rasp_compiler.graph.semantics import OperatorError, apply_unary
        try:
            return apply_unary(op, value)
        except OperatorError as err:
            raise self.error(str(err), tree, ctx) from None

    def elementwise(self, make: Callable[..., Expr], args: list[Any], tree, ctx: _Context) -> SOp:
        """A Map / SequenceMap applying ``make(*exprs)`` positionwise; atoms become constants."""
        inputs: list[str] = []
        exprs: list[Expr] = []
        for a in args:
            if isinstance(a, SOp):
                if a.node not in inputs:
                    inputs.append(a.node)
                exprs.append(Var(inputs.index(a.node)))
            else:
                exprs.append(Const(a))
        fn = make(*exprs)
        cls = Map if len(inputs) == 1 else SequenceMap
        return SOp(self.builder.add(cls, tuple(inputs), self.pos(tree, ctx), fn=fn))

    def e_ternary(self, tree: Tree, env: Env, ctx: _Context) -> Any:
        then_tree, cond_tree, else_tree = tree.children
        cond = self.expr(cond_tree, env, ctx)
        if isinstance(cond, Selector):
            raise self.error("the condition of 'if' cannot be a selector", cond_tree, ctx)
        if not isinstance(cond, SOp):
            # an atom condition is lazy: only the chosen branch is elaborated
            return self.expr(then_tree if cond else else_tree, env, ctx)
        then = self.expr(then_tree, env, ctx)
        other = self.expr(else_tree, env, ctx)
        for side, t in ((then, then_tree), (other, else_tree)):
            if not isinstance(side, SOp) and not is_atom(side):
                raise self.error(f"an elementwise 'if' picks between s-ops or atoms, not {a_kind(side)}",
                                 t, ctx)
        result = self.elementwise(lambda c, a, b: Ternary(a, c, b), [cond, then, other], tree, ctx)
        self.set_display_name(result, f"{self.operand_name(then)} if {self.display_name(cond)} else "
                                      f"{self.operand_name(other)}")
        return result

    def e_contains(self, tree: Tree, env: Env, ctx: _Context) -> Any:
        item_tree, coll_tree = tree.children
        item = self.expr(item_tree, env, ctx)
        coll = self.expr(coll_tree, env, ctx)
        if isinstance(item, SOp):
            # named `x in vowels` after the variable, else after the list as Python prints it
            coll_name = coll_tree.children[0].value if coll_tree.data == "var" else str(coll)
            if isinstance(coll, dict):
                coll = list(coll)
            if not isinstance(coll, (list, tuple)):
                raise self.error(f"'s-op in X' needs X to be a list of atoms, got {a_kind(coll)}",
                                 coll_tree, ctx)
            for v in coll:
                if not is_atom(v):
                    raise self.error(f"'s-op in X' needs X to be a list of atoms; it holds {a_kind(v)}",
                                     coll_tree, ctx)
            result = self.elementwise(lambda a: Contains(a, tuple(coll)), [item], tree, ctx)
            self.set_display_name(result, f"{self.display_name(item)} in {coll_name}")
            return result
        if is_atom(item):
            if isinstance(coll, SOp):
                contains = self._library_function("contains", tree, ctx)
                result = self.call_value(contains, [coll, item], tree, ctx)
                if isinstance(result, SOp):  # the original's `aggregate(full_s, indicator) > 0`
                    self.set_display_name(result, "( s-op > 0 )")
                return result
            if isinstance(coll, (list, dict)):
                return item in coll
            if isinstance(coll, str):
                if not isinstance(item, str):
                    raise self.error(f"'{kind_name(item)} in string' needs a string on the left", tree, ctx)
                return item in coll
            raise self.error("'atom in X' needs X to be a list, dict, string or s-op, got "
                             f"{a_kind(coll)}",
                             coll_tree, ctx)
        if isinstance(item, (list, dict)) and isinstance(coll, list):
            return item in coll
        raise self.error(f"cannot test whether {a_kind(item)} is in {a_kind(coll)}", tree, ctx)

    def _library_function(self, name: str, tree, ctx: _Context) -> Any:
        try:
            return self.library.lookup(name)
        except KeyError:
            raise self.error(f"the library function '{name}' is not available", tree, ctx) from None

    def e_index(self, tree: Tree, env: Env, ctx: _Context) -> Any:
        obj_tree, idx_tree = tree.children
        obj = self.expr(obj_tree, env, ctx)
        idx = self.expr(idx_tree, env, ctx)
        if isinstance(obj, SOp):
            if isinstance(idx, bool) or not isinstance(idx, int):
                raise self.error(f"an s-op can be indexed only by an int (element k for every position), "
                                 f"not by {a_kind(idx)}", idx_tree, ctx)
            return self.sop_element(obj, idx, tree, ctx)
        if isinstance(idx, SOp):
            if isinstance(obj, dict):
                table = tuple(obj.items())
                if not all(is_atom(v) for v in obj.values()):
                    raise self.error("a dict indexed by an s-op must hold atoms", obj_tree, ctx)
                return self.elementwise(lambda a: Lookup(table, a, True), [idx], tree, ctx)
            if isinstance(obj, (list, str)):
                if isinstance(obj, list) and not all(is_atom(v) for v in obj):
                    raise self.error("a list indexed by an s-op must hold atoms", obj_tree, ctx)
                table = tuple(obj) if isinstance(obj, list) else obj
                return self.elementwise(lambda a: Lookup(table, a, False), [idx], tree, ctx)
            raise self.error(f"cannot index {a_kind(obj)} by an s-op", tree, ctx)
        if isinstance(obj, dict):
            if not is_atom(idx):
                raise self.error(f"a dict index must be an atom, got {a_kind(idx)}", idx_tree, ctx)
            if idx not in obj:
                raise self.error(f"key {idx!r} is not in the dict", idx_tree, ctx)
            return obj[idx]
        if isinstance(obj, (list, str)):
            if isinstance(idx, bool) or not isinstance(idx, int):
                raise self.error(f"a {kind_name(obj)} index must be an int, got {a_kind(idx)}",
                                 idx_tree, ctx)
            if idx >= len(obj) or -idx > len(obj):
                raise self.error(f"index {idx} is out of range for {a_kind(obj)} of length {len(obj)}",
                                 idx_tree, ctx)
            return obj[idx]
        raise self.error(f"cannot index {a_kind(obj)}", tree, ctx)

    def sop_element(self, sop: SOp, k: int, tree, ctx: _Context) -> SOp:
        """``sop[k]``: the value at position k (from the end if negative) at every position."""
        pos = self.pos(tree, ctx)
        indices = self._builtin_node("indices")
        if k >= 0:
            where = self.builder.add(Constant, (), pos, value=k)
            self.set_display_name(SOp(where), str(k))
        else:
            length = self._builtin_node("length")
            where = self.builder.add(Map, (length,), pos, fn=Binary("+", Var(0), Const(k)))
            self.set_display_name(SOp(where), f"{self.display_name(SOp(length))}{k}")
        sel = self.builder.add(Select, (indices, where), pos, op="==")
        self.set_display_name(Selector(sel), f"load from {k}")
        result = SOp(self.builder.add(Aggregate, (sel, sop.node), pos, default=0))
        self.set_display_name(result, f"{self.display_name(sop)}[{k}]")
        return result

    def _builtin_node(self, name: str) -> str:
        return self.builtins.vars[name].node

    def e_select(self, tree: Tree, env: Env, ctx: _Context) -> Selector:
        keys_tree, queries_tree, op_tok = tree.children
        keys = self.as_sop(self.expr(keys_tree, env, ctx), keys_tree, ctx, "select's keys")
        queries = self.as_sop(self.expr(queries_tree, env, ctx), queries_tree, ctx, "select's queries")
        op = op_tok.value
        if op_tok.type == "NAME" and op not in ("TRUE", "FALSE"):  # the grammar takes any name here
            raise self.error(f"select needs a comparison operator (==, !=, <, >, <=, >=, or TRUE / FALSE "
                             f"to select every key / none) as its 3rd argument, not the name '{op}'",
                             op_tok, ctx, hint=_comparison_hint(op))
        if op in ("TRUE", "FALSE"):
            # The paper's constant predicates no longer read the s-ops: the select of two equal
            # constants (the library's full_s), which compiles to no head of its own
            keys = queries = self.as_sop(0, tree, ctx, "select's keys")
            op = "==" if op == "TRUE" else "!="
        assert op in COMPARISONS
        return Selector(self.builder.add(Select, (keys, queries), self.pos(tree, ctx), op=op))

    def as_sop(self, value: Any, tree, ctx: _Context, what: str) -> str:
        """Node id of an s-op, broadcasting an atom to a Constant node."""
        if isinstance(value, SOp):
            return value.node
        if is_atom(value):
            node = self.builder.add(Constant, (), self.pos(tree, ctx), value=value)
            self.set_display_name(SOp(node), str(value))
            return node
        raise self.error(f"{what} must be an s-op or an atom, got {a_kind(value)}", tree, ctx)

    def e_aggregate(self, tree: Tree, env: Env, ctx: _Context) -> SOp:
        sel_tree, sop_tree, default_tree = tree.children
        sel = self.expr(sel_tree, env, ctx)
        if not isinstance(sel, Selector):
            raise self.error(f"aggregate's first argument must be a selector, got {a_kind(sel)}",
                             sel_tree, ctx)
        sop = self.as_sop(self.expr(sop_tree, env, ctx), sop_tree, ctx, "aggregate's second argument")
        default = 0
        if default_tree is not None:
            default = self.expr(default_tree, env, ctx)
            if not is_atom(default):
                raise self.error(f"aggregate's default must be an atom, got {a_kind(default)}",
                                 default_tree, ctx)
        return SOp(self.builder.add(Aggregate, (sel.node, sop), self.pos(tree, ctx), default=default))


# tracr's Comparison members and the bare operator each is in RASP text
_TRACR_COMPARISONS = {"EQ": "==", "NEQ": "!=", "LT": "<", "LEQ": "<=", "GT": ">", "GEQ": ">="}


_MAP_NAMES = {"map", "zipmap", "Map", "SequenceMap", "sequence_map", "numerical_map"}


def _comparison_hint(name: str) -> str:
    if name.upper() in ("TRUE", "FALSE"):
        return f"the constant predicates are written in capitals: select(keys, queries, {name.upper()})"
    op = _TRACR_COMPARISONS.get(name.upper())
    if op is None:
        return "write it bare, e.g. select(indices, indices, <=)"
    return f"tracr's Comparison.{name.upper()} is the bare operator {op} here: select(keys, queries, {op})"
