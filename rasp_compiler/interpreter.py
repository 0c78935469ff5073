"""The reference interpreter: evaluates a program graph on one input sequence.

It is the oracle every compiled model is checked against, so it follows the node semantics in
``rasp_compiler.graph.nodes`` literally and takes operator meanings from
``rasp_compiler.graph.semantics`` (the same functions the compiler tabulates).

Values: an s-op is a Python list (one value per position); a selector is a NumPy boolean matrix
``sel[q, k]`` (rows = queries, columns = keys), which keeps length-512 inputs fast.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable, Iterable, Sequence

import networkx as nx
import numpy as np

from rasp_compiler.errors import InputError, RaspError
from rasp_compiler.graph.expr import (
    Binary,
    Const,
    Contains,
    Expr,
    Lookup,
    PyFn,
    Ternary,
    Unary,
    Var,
    deep_recursion,
)
from rasp_compiler.graph.nodes import (
    Aggregate,
    Constant,
    Indices,
    Length,
    Map,
    Node,
    Program,
    Select,
    SelectorAnd,
    SelectorNot,
    SelectorOr,
    SelectorWidth,
    SequenceMap,
    SoftmaxAggregate,
    Tokens,
)
from rasp_compiler.graph.semantics import OperatorError, apply_binary, apply_unary, exact_means, lookup
from rasp_compiler.memory import available_memory

ATOMS = (bool, int, float, str)
_NP_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt,
               "<=": operator.le, ">=": operator.ge}


def convert_input(values: Iterable[Any], type_name: str) -> list[Any]:
    """The input list read as ``tokens_<type_name>`` (the original's str/int/float/bool maps)."""
    convert: Callable[[Any], Any] = {"str": _to_str, "int": int, "float": float, "bool": bool,
                                     "value": _as_given}[type_name]
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) and type_name in ("int", "float"):
            # the compiled model refuses true/false as numbers; the interpreter read them as 1 / 0
            raise InputError(f"tokens_{type_name} cannot read input position {i} "
                             f"({'true' if v else 'false'}) as {type_name}: a boolean is not a number",
                             hint="give numbers, e.g. 1 and 0")
        if type_name == "int" and isinstance(v, float) and not v.is_integer():
            # int() would truncate 1.5 to 1: a silent answer for another input
            raise InputError(f"tokens_int cannot read input position {i} ({v!r}) as int: it is not a "
                             "whole number", hint="give integers, or read the input with tokens_float")
        try:
            value = convert(v)
        except (TypeError, ValueError, OverflowError):
            raise InputError(f"tokens_{type_name} cannot read input position {i} ({v!r}) as {type_name}",
                             hint="give --input-json with numbers for a numeric program") from None
        if type_name == "float" and not math.isfinite(value):
            # float("nan"), float("inf"), float("1e400"): the error blamed the program's arithmetic
            raise InputError(f"tokens_float reads input position {i} ({v!r}) as {value}, not a "
                             "finite number", hint="give finite numbers")
        out.append(value)
    return out


def _as_given(v: Any) -> Any:
    return v


def _to_str(v: Any) -> str:
    # JSON true/false should read as the original's str(True) == "True"
    return str(v)


def check_input(inputs: Any) -> list[Any]:
    """The input as a list of atoms; strings are their characters."""
    if isinstance(inputs, str):
        inputs = list(inputs)
    try:
        data = list(inputs)
    except TypeError:
        raise InputError(f"the input must be a sequence of values, got {type(inputs).__name__}") from None
    if not data:
        raise InputError("the input is empty: a RASP program runs on at least one token")
    for i, v in enumerate(data):
        if isinstance(v, np.generic):
            v = data[i] = v.item()
        if not isinstance(v, ATOMS):
            raise InputError(f"input position {i} holds {v!r}: tokens must be strings, numbers or booleans")
        if isinstance(v, float) and not math.isfinite(v):
            # rasp.evaluate(p, [nan]) answered [nan], where --input-json and a compiled model's
            # vocabulary refuse it
            raise InputError(f"input position {i} holds {v}: a token that is a number is finite")
    return data


def evaluate(program: Program, inputs: Sequence[Any],
             targets: Iterable[str] | str | None = None) -> dict[str, Any]:
    """Value of every node (or of the nodes ``targets`` need) on ``inputs``, keyed by node id.
    ``targets`` are node ids or names (``program.names``; a name also keys its value), or one
    such string."""
    data = check_input(inputs)
    n = len(data)
    _check_selections_fit(program, n)
    graph = program.graph
    chosen: dict[Any, str] = {}
    if targets is not None:
        if isinstance(targets, str) or not isinstance(targets, Iterable):
            targets = [targets]  # one target: a string's characters are no targets
        chosen = {t: _node_id(program, t) for t in targets}
        need: set[str] = set()
        for t in chosen.values():
            need |= nx.ancestors(graph, t) | {t}
        graph = graph.subgraph(need)
    values: dict[str, Any] = {}
    converted: dict[str, list[Any]] = {}
    with deep_recursion():  # a map merged from a long chain nests a call per step (pyapi's Map)
        for node_id in nx.lexicographical_topological_sort(graph):
            node: Node = program.graph.nodes[node_id]["node"]
            args = [values[i] for i in node.inputs]
            try:
                values[node_id] = _evaluate_node(node, args, data, n, converted)
            except OperatorError as err:
                raise _located(program, node, str(err), err.hint) from None
            except RecursionError:
                raise _located(program, node, "this map nests too deeply to evaluate: a chain of "
                               "thousands of maps merged into one, or a function that calls itself "
                               "without end", "name some steps of the chain (.named(...) in Python), "
                               "so that they are nodes of their own") from None
    for name, node_id in chosen.items():
        values.setdefault(name, values[node_id])
    return values


def _node_id(program: Program, target: Any) -> str:
    """A target's node id: node ids come first (callers inside the compiler pass ids, and a
    name may equal the id of another node), then names."""
    try:
        if target in program.graph:
            return target
    except TypeError:  # unhashable: resolve says it names nothing
        pass
    return program.resolve(target)


# Peak memory per (query, key) pair and selector node, with room to spare: measured at 8,000
# tokens, histogram (1 selector node) 2.0 bytes, sort (6) 1.3 and Dyck-2 (9) 2.1 per node.
SELECTION_BYTES = 2.5
SELECTOR_NODES = (Select, SelectorAnd, SelectorOr, SelectorNot)


def _check_selections_fit(program: Program, n: int) -> None:
    """Refuse an input whose n × n selection matrices cannot fit in free memory, before any is
    built: at 100,000 tokens one is 10 GB, and the machine swaps for minutes instead of failing."""
    if n < 4096:  # the common case, checked before walking the graph: evaluate runs per input
        return
    selectors = sum(isinstance(d["node"], SELECTOR_NODES) for _, d in program.graph.nodes(data=True))
    if not selectors:
        return
    free = available_memory()
    need = int(SELECTION_BYTES * selectors * n * n)
    if free is not None and need > free:
        raise InputError(f"an input of {n:,} tokens needs about {need / 2**30:,.1f} GiB for its selection "
                         f"matrices ({n:,} × {n:,} each), more than the {free / 2**30:,.1f} GiB free "
                         "now", hint="give a shorter input")


def run(program: Program, inputs: Sequence[Any], output: str | None = None) -> Any:
    """The output s-op (or the node/variable named ``output``) on ``inputs``: a list of values
    (a selector gives a list of rows of bools)."""
    target = program.output if output is None else program.names.get(output, output)
    if target not in program.graph:
        known = ", ".join(sorted(program.names)) or "none"
        raise RaspError(f"no s-op named '{output}' in the program (named s-ops: {known})",
                        program.source_file)
    value = evaluate(program, inputs, [target])[target]
    if isinstance(value, np.ndarray):
        return [[bool(x) for x in row] for row in value]
    return value


# --------------------------------------------------------------------- nodes
def _evaluate_node(node: Node, args: list[Any], data: list[Any], n: int, converted: dict) -> Any:
    if isinstance(node, Tokens):
        if node.type not in converted:
            converted[node.type] = convert_input(data, node.type)
        return list(converted[node.type])
    if isinstance(node, Indices):
        return list(range(n))
    if isinstance(node, Length):
        return [n] * n
    if isinstance(node, Constant):
        return [node.value] * n
    if isinstance(node, (Map, SequenceMap)):
        return _map(node, args, n)
    if isinstance(node, Select):
        if node.fn is not None:
            return _select_by(node, args[0], args[1])
        return _select(node.op, args[0], args[1])
    if isinstance(node, Aggregate):
        return _aggregate(node, args[0], args[1])
    if isinstance(node, SoftmaxAggregate):
        return _softmax_aggregate(node, args)
    if isinstance(node, SelectorWidth):
        return [int(x) for x in args[0].sum(axis=1)]
    if isinstance(node, SelectorAnd):
        return args[0] & args[1]
    if isinstance(node, SelectorOr):
        return args[0] | args[1]
    if isinstance(node, SelectorNot):
        return ~args[0]
    raise TypeError(f"unknown node kind {node.kind!r}")


def _map(node: Map | SequenceMap, args: list[list[Any]], n: int) -> list[Any]:
    fn = _compile(node.fn)
    cache: dict[tuple, Any] = {}
    out = []
    for i, key in enumerate(zip(*args, strict=True) if args else [()] * n):  # the arguments at i
        try:
            # equal-looking keys of different types (1, 1.0, True) must not share an entry
            ck = key + tuple(map(type, key))
            if ck in cache:
                out.append(cache[ck])
                continue
            value = fn(key)
            cache[ck] = value
        except OperatorError as err:
            raise OperatorError(f"{err} (at position {i})", err.hint) from None
        except TypeError:  # an unhashable key cannot happen with atoms; evaluate without the cache
            value = fn(key)
        out.append(value)
    return out


def _compile(expr: Expr | None) -> Callable[[tuple], Any]:
    """A Python closure computing ``expr`` (evaluating the tree once per position is slower)."""
    if expr is None:
        raise TypeError("map without a function")
    if isinstance(expr, Var):
        i = expr.index
        return lambda a: a[i]
    if isinstance(expr, Const):
        v = expr.value
        return lambda a: v
    if isinstance(expr, Unary):
        f, op = _compile(expr.arg), expr.op
        return lambda a: apply_unary(op, f(a))
    if isinstance(expr, Binary):
        f, g, op = _compile(expr.left), _compile(expr.right), expr.op
        return lambda a: apply_binary(op, f(a), g(a))
    if isinstance(expr, Ternary):
        t, c, e = _compile(expr.then), _compile(expr.cond), _compile(expr.otherwise)
        return lambda a: t(a) if c(a) else e(a)
    if isinstance(expr, Lookup):
        f, table, is_dict = _compile(expr.arg), expr.table, expr.is_dict
        if is_dict:
            mapping = dict(table)

            def dict_lookup(a: tuple) -> Any:
                key = f(a)
                try:
                    return mapping[key]
                except (KeyError, TypeError):
                    return lookup(table, key, True)  # raises the worded error
            return dict_lookup
        return lambda a: lookup(table, f(a), False)
    if isinstance(expr, Contains):
        f, coll = _compile(expr.arg), expr.collection
        return lambda a: f(a) in coll
    if isinstance(expr, PyFn):
        fn = expr.fn

        def call(a: tuple) -> Any:
            try:
                return fn(*a)
            except RecursionError:
                raise  # too deep (see evaluate), not a failure of the function on these values
            except Exception as e:  # the user's Python function: report it as the map's error
                shown = ", ".join(map(repr, a))
                raise OperatorError(f"the map's function failed on {shown}: "
                                    f"{type(e).__name__}: {e}") from None
        return call
    raise TypeError(f"not an expression: {expr!r}")


def _kind(values: list[Any]) -> str:
    """'num' (ints/floats, maybe with bools), 'bool', 'str' or 'mixed'."""
    if all(isinstance(v, bool) for v in values):
        return "bool"
    if all(isinstance(v, (int, float)) for v in values):
        return "num"
    if all(isinstance(v, str) for v in values):
        return "str"
    return "mixed"


def _select(op: str, keys: list[Any], queries: list[Any]) -> np.ndarray:
    """sel[q, k] = keys[k] op queries[q]."""
    kk, qk = _kind(keys), _kind(queries)
    if kk == qk and kk != "mixed" or {kk, qk} <= {"num", "bool"}:
        if kk == "str":  # strings compare as their ranks in sorted order: a comparison of object
            # arrays makes an n x n array of Python bools first, 8 bytes a pair (12.8 GB at 40,000)
            rank = {v: i for i, v in enumerate(sorted(set(keys) | set(queries)))}
            k_arr = np.array([rank[v] for v in keys], dtype=np.int64)
            q_arr = np.array([rank[v] for v in queries], dtype=np.int64)
        else:
            k_arr, q_arr = np.array(keys), np.array(queries)
        return np.asarray(_NP_COMPARE[op](k_arr[None, :], q_arr[:, None]), dtype=bool)
    # strings against numbers: == / != just compare unequal; ordering is an error (as in Python)
    out = np.zeros((len(queries), len(keys)), dtype=bool)
    for qi, q in enumerate(queries):
        for ki, k in enumerate(keys):
            out[qi, ki] = bool(apply_binary(op, k, q))
    return out


def _select_by(node: Select, keys: list[Any], queries: list[Any]) -> np.ndarray:
    """sel[q, k] = fn(keys[k], queries[q]) for a Python predicate (tracr's lambda predicates)."""
    fn = node.fn.fn  # type: ignore[union-attr]
    out = np.zeros((len(queries), len(keys)), dtype=bool)
    for qi, q in enumerate(queries):
        for ki, k in enumerate(keys):
            try:
                out[qi, ki] = bool(fn(k, q))
            except Exception as e:
                raise OperatorError(f"the selector's predicate failed on key {k!r} and query {q!r}: "
                                    f"{type(e).__name__}: {e}") from None
    return out


def _aggregate(node: Aggregate, sel: np.ndarray, values: list[Any]) -> list[Any]:
    counts = sel.sum(axis=1)
    out: list[Any] = [node.default] * len(counts)
    many = np.nonzero(counts > 1)[0]
    if len(many):
        kind = _kind(values)
        if kind == "bool" and node.encoding == "numerical":
            kind = "num"  # tracr: a numerical aggregate averages booleans as 0/1
        if kind != "num":
            q = int(many[0])
            picked = [values[k] for k in np.nonzero(sel[q])[0][:4]]
            what = {"bool": "booleans", "str": "strings"}.get(kind, "values of mixed types")
            raise OperatorError(
                f"mean of non-numbers: aggregate averages several values at query position {q} "
                f"({_preview(picked)}), but the s-op holds {what}",
                hint="a selector that picks several keys averages them, which needs numbers; select at "
                     "most one key per query, or aggregate numbers (indicator(...) turns booleans into 0/1)")
        for q, m in zip(many, exact_means(values, sel[many]), strict=True):
            out[int(q)] = m
    ones = np.nonzero(counts == 1)[0]
    if len(ones):
        keys = sel[ones].argmax(axis=1)
        for q, k in zip(ones, keys, strict=True):
            out[int(q)] = values[int(k)]
    return out


def _softmax_aggregate(node: SoftmaxAggregate, args: list[Any]) -> list[Any]:
    """Softmax-weighted mean: float64, the row maximum subtracted first (never overflows)."""
    sel, m = args[0], node.width
    try:
        qs = np.array(args[1:1 + m], dtype=np.float64).reshape(m, -1)
        ks = np.array(args[1 + m:1 + 2 * m], dtype=np.float64).reshape(m, -1)
        vs = np.array(args[1 + 2 * m], dtype=np.float64)
    except (TypeError, ValueError):
        raise OperatorError("softmax_aggregate needs numbers as queries, keys and values",
                            hint="indicator(...) turns booleans into 0/1") from None
    with np.errstate(over="ignore", invalid="ignore"):  # past the float range: refused just below
        scores = qs.T @ ks  # [query, key]
    if not np.all(np.isfinite(scores[sel.astype(bool)])):
        raise OperatorError("softmax_aggregate's scores (queries times keys) are past the float range",
                            hint="the inputs' numbers are too large for this program")
    out: list[Any] = []
    for q in range(sel.shape[0]):
        picked = np.nonzero(sel[q])[0]
        if not len(picked):
            out.append(node.default)
            continue
        s = scores[q, picked]
        w = np.exp(s - s.max())
        out.append(float(w @ vs[picked] / w.sum()))
    return out


def _preview(values: list[Any]) -> str:
    return ", ".join(repr(v) for v in values) + (", …" if len(values) >= 4 else "")


def _located(program: Program, node: Node, message: str, hint: str | None = None) -> RaspError:
    pos = node.pos
    if pos is None or not pos.line:
        return RaspError(f"{message} (in node {node.id})", program.source_file, hint=hint)
    source = program.sources.get(pos.file)
    width = len(pos.text) if pos.text and "\n" not in pos.text else 1
    if pos.context:  # made inside a function of the program, or a loop: which call or pass
        message += f" (in {pos.context})"
    if pos.called:  # made inside tracr's library (pyapi.lib): where the user called it
        message += f" (in {pos.called})"
    return RaspError(message, pos.file, pos.line, pos.col, source, hint=hint, width=width)
