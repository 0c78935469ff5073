"""Syntax tree → program graph.

Elaboration runs the parts of a RASP program that are known before any input exists — atoms,
lists, dicts, functions, loops, ``load`` — and turns every s-op / selector operation into a node
of the program graph (``rasp_compiler.graph``).  What happens to each construct:

* atoms, lists, dicts, comprehensions, ``range``/``zip``/``len``: computed here, as Python values;
* an operator with an s-op operand: a ``Map`` (one s-op input) or ``SequenceMap`` (several) whose
  function is an expression tree over ``Var(i)``; atoms appear as ``Const``;
* a ternary with an s-op condition: an elementwise map; with an atom condition: lazy, as in Python
  (so a recursive function can stop on an atom);
* ``select``/``aggregate``/``selector_width``/``and``/``or``/``not`` on selectors: their nodes;
* ``list/str/dict[sop]``: a ``Lookup`` map; ``sop in list``: a ``Contains`` map; ``atom in sop``:
  the library's ``contains``; ``sop[k]`` (int k): element k broadcast, by select + aggregate.

The ``Session`` keeps one environment chain: built-ins ← library (``rasplib.rasp``) ← user file, so
a program may shadow any library name, and the REPL can feed it statement after statement.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

from lark import Token, Tree

from rasp_compiler.errors import RaspError
from rasp_compiler.graph.expr import Binary, Const, Contains, Expr, Lookup, Ternary, Unary, Var
from rasp_compiler.graph.nodes import (
    COMPARISONS, Aggregate, Constant, Indices, Length, Map, Program, Select, SelectorAnd,
    SelectorNot, SelectorOr, SelectorWidth, SequenceMap, SourcePos, Tokens,
)
from rasp_compiler.lang.builder import LOCAL, OUT, TOP_LEVEL, GraphBuilder
from rasp_compiler.lang.parser import parse_source
from rasp_compiler.lang.values import (
    Builtin, Env, Function, Selector, SOp, is_atom, kind_name,
)

LIBRARY_PATH = Path(__file__).resolve().parent / "rasplib.rasp"
LIBRARY_FILE = "rasplib.rasp"
PROGRAMS_DIR = Path(__file__).resolve().parents[2] / "programs"
MAX_CALL_DEPTH = 100
TOKEN_TYPES = ("str", "int", "float", "bool")
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}

BINARY_WORDS = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "%": "take the modulo of",
                "^": "raise to a power"}


class _Return(Exception):
    """Unwinds a function body at ``return`` (carries the returned value)."""

    def __init__(self, value: Any) -> None:
        self.value = value


class _Context:
    """Where the statements being elaborated come from (for positions and naming)."""

    def __init__(self, file: str, source: str, directory: Path | None, function: str | None = None,
                 top_level: bool = True) -> None:
        self.file, self.source, self.directory = file, source, directory
        self.function = function
        self.top_level = top_level


def decode_string(token_text: str) -> str:
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


class Session:
    """An elaboration session: the graph built so far and the user's environment."""

    def __init__(self, with_library: bool = True) -> None:
        self.builder = GraphBuilder()
        self.sources: dict[str, str] = {}
        self.depth = 0
        self._loading: list[Path] = []
        # While a library function runs for user code, its nodes and errors point at the user's
        # call (the user's line is what they can act on), not into rasplib.rasp.
        self._call_site: list[tuple[Tree, _Context]] = []
        self.builtins = Env(label="built-ins")
        self._install_builtins()
        self.library = Env(parent=self.builtins, label="library")
        if with_library:
            text = LIBRARY_PATH.read_text(encoding="utf-8")
            self.exec_source(text, LIBRARY_FILE, self.library, LIBRARY_PATH.parent, library=True)
        self.user = Env(parent=self.library, label="program")

    # ----------------------------------------------------------------- running source text
    def exec_source(self, text: str, file: str, env: Env | None = None, directory: Path | None = None,
                    library: bool = False, on_result: Callable[[str, Any], None] | None = None) -> None:
        """Parse and run ``text`` in ``env`` (default: the user's). ``on_result(name, value)`` is
        called for each binding a top-level statement makes (the REPL prints them)."""
        tree = parse_source(text, file)
        self.sources[file] = text
        ctx = _Context(file, text, directory)
        env = self.user if env is None else env
        old_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old_limit, 20000))
        try:
            for stmt in tree.children:
                self.statement(stmt, env, ctx, on_result=on_result, library=library)
        except RecursionError:
            raise RaspError("the program nests too deeply to elaborate", file) from None
        finally:
            sys.setrecursionlimit(old_limit)

    def eval_expression(self, text: str, file: str = "<expression>") -> Any:
        """The value of one expression in the user's environment (binds nothing)."""
        source = text.strip().rstrip(";") + ";"
        tree = parse_source(source, file)
        self.sources[file] = source
        stmts = tree.children
        if len(stmts) != 1 or stmts[0].data != "statement" or stmts[0].children[0].data != "expr_stmt":
            raise RaspError("expected one expression", file, 1, 1, source)
        return self.expr(stmts[0].children[0].children[0], self.user, _Context(file, source, None))

    def program(self, output: str = "out", file: str | None = None) -> Program:
        """The program graph whose output is the user variable ``output``."""
        names = self.user_names()
        if output not in names:
            value = self._lookup_user(output)
            if value is None:
                if output == "out":
                    raise RaspError("the program has no result: no expression statement binds 'out'",
                                    file, hint="end the file with the s-op to compute, e.g. `reverse;`")
                hint = self.user.suggest(output)
                raise RaspError(f"no s-op or selector named '{output}' in the program", file,
                                hint=f"did you mean '{hint}'?" if hint else None)
            raise RaspError(f"'{output}' is a {kind_name(value)}, not an s-op or selector", file)
        roots = sorted(set(names.values()), key=lambda t: int(t[1:]))
        program, _ = self.builder.finalize(roots, names[output], names, file, self.sources)
        return program

    def program_for(self, value: SOp | Selector) -> Program:
        """A program computing just ``value`` (the REPL evaluates one value at a time)."""
        program, _ = self.builder.finalize([value.node], value.node, {}, None, self.sources)
        return program

    def user_names(self) -> dict[str, str]:
        """Top-level user variables bound to s-ops / selectors → temp node ids."""
        return {k: v.node for k, v in self.user.vars.items() if isinstance(v, (SOp, Selector))}

    def _lookup_user(self, name: str) -> Any:
        try:
            return self.user.lookup(name)
        except KeyError:
            return None

    # ----------------------------------------------------------------- positions and errors
    def pos(self, tree: Tree | Token, ctx: _Context) -> SourcePos:
        if ctx.file == LIBRARY_FILE and self._call_site:
            tree, ctx = self._call_site[0]
        line, col, start, end = _span(tree)
        return SourcePos(ctx.file, line or 0, col or 0, ctx.source[start:end] if start is not None else "")

    def error(self, message: str, tree: Tree | Token | None, ctx: _Context, hint: str | None = None
              ) -> RaspError:
        if ctx.file == LIBRARY_FILE and self._call_site:
            tree, ctx = self._call_site[0]
        if tree is None:
            return RaspError(message, ctx.file, source=ctx.source, hint=hint)
        line, col, start, end = _span(tree)
        width = 1
        if start is not None and end is not None and "\n" not in ctx.source[start:end]:
            width = end - start
        return RaspError(message, ctx.file, line, col, ctx.source, hint=hint, width=width)

    # ----------------------------------------------------------------- statements
    def statement(self, stmt: Tree, env: Env, ctx: _Context, on_result=None, library: bool = False) -> None:
        kind = stmt.data
        if kind == "statement":  # `expr;` or `names = exprs;`
            inner = stmt.children[0]
            if inner.data == "expr_stmt":
                value = self.expr(inner.children[0], env, ctx)
                env.vars["out"] = value
                if isinstance(value, (SOp, Selector)):
                    self.builder.bind(value.node, "out" if ctx.function is None else f"{ctx.function}.out",
                                      OUT if ctx.function is None else LOCAL)
                if on_result:
                    shown = inner.children[0]
                    on_result(shown.children[0].value if shown.data == "var" else "out", value)
                return
            self.assign(inner, env, ctx, on_result)
        elif kind == "funcdef":
            name_tok, params_tree, *body = stmt.children
            params = [t.value for t in params_tree.children] if params_tree is not None else []
            if len(set(params)) != len(params):
                raise self.error(f"function '{name_tok}' names a parameter twice", params_tree, ctx)
            self._check_bindable(name_tok.value, name_tok, ctx)
            fn = Function(name_tok.value, params, body, env, ctx.file, ctx.source)
            fn.directory = ctx.directory  # type: ignore[attr-defined]
            env.vars[name_tok.value] = fn
            if on_result:
                on_result(name_tok.value, fn)
        elif kind == "forloop":
            names_tree, iterable_tree, *body = stmt.children
            names = [t.value for t in names_tree.children]
            iterable = self.expr(iterable_tree, env, ctx)
            for item in self._iterate(iterable, names, iterable_tree, ctx, "for loop"):
                self._bind_iterator(names, item, names_tree, env, ctx)
                for inner in body:
                    self.statement(inner, env, ctx, library=library)
        elif kind == "load":
            self.load(stmt.children[0], env, ctx, on_result)
        elif kind == "return_stmt":
            if ctx.function is None:
                raise self.error("'return' outside a function", stmt, ctx)
            values = [self.expr(e, env, ctx) for e in stmt.children[0].children]
            raise _Return(values[0] if len(values) == 1 else values)
        else:  # pragma: no cover - the grammar has no other statements
            raise self.error(f"unknown statement {kind}", stmt, ctx)

    def _check_bindable(self, name: str, tree, ctx: _Context) -> None:
        if name == "out":
            raise self.error("'out' is reserved: it holds the value of the last expression statement",
                             tree, ctx, hint="choose another name, or write the expression alone "
                                             "(`e;`) to make it the result")

    def assign(self, tree: Tree, env: Env, ctx: _Context, on_result=None) -> None:
        names_tree, exprs_tree = tree.children
        names = [t.value for t in names_tree.children]
        for tok in names_tree.children:
            self._check_bindable(tok.value, tok, ctx)
        values = [self.expr(e, env, ctx) for e in exprs_tree.children]
        value: Any = values[0] if len(values) == 1 else values
        if len(names) == 1:
            pairs = [(names[0], value)]
        else:
            if isinstance(value, tuple):
                value = list(value)
            if not isinstance(value, list):
                raise self.error(f"cannot unpack one {kind_name(value)} into {len(names)} names "
                                 f"({', '.join(names)})", exprs_tree, ctx)
            if len(value) != len(names):
                raise self.error(f"unpacking: {len(names)} names ({', '.join(names)}) but "
                                 f"{len(value)} values", tree, ctx)
            pairs = list(zip(names, value))
        for name, v in pairs:
            env.vars[name] = v
            if isinstance(v, (SOp, Selector)):
                if ctx.function is None:
                    self.builder.bind(v.node, name, TOP_LEVEL)
                else:
                    self.builder.bind(v.node, f"{ctx.function}.{name}", LOCAL)
            if on_result:
                on_result(name, v)

    def load(self, token: Token, env: Env, ctx: _Context, on_result=None) -> None:
        name = decode_string(token.value)
        path = self._find_file(name, ctx)
        if path is None:
            raise self.error(f"cannot find '{name}.rasp' to load", token, ctx,
                             hint="load looks next to the loading file, then in the current directory, "
                                  "then in programs/")
        resolved = path.resolve()
        if resolved in self._loading:
            raise self.error(f"'{name}' loads itself (through {' → '.join(p.stem for p in self._loading)})",
                             token, ctx)
        text = path.read_text(encoding="utf-8")
        file_env = Env(parent=self.library, label=str(path))
        self._loading.append(resolved)
        try:
            self.exec_source(text, str(path), file_env, path.parent)
        finally:
            self._loading.pop()
        for var, value in file_env.vars.items():
            if var.startswith("_") or var == "out":
                continue  # private to the loaded file, as in the original
            env.vars[var] = value
            if isinstance(value, (SOp, Selector)) and ctx.function is None:
                self.builder.bind(value.node, var, TOP_LEVEL)
            if on_result:
                on_result(var, value)

    def _find_file(self, name: str, ctx: _Context) -> Path | None:
        filename = name if name.endswith(".rasp") else name + ".rasp"
        candidates = []
        if Path(filename).is_absolute():
            candidates.append(Path(filename))
        else:
            if ctx.directory is not None:
                candidates.append(ctx.directory / filename)
            candidates += [Path.cwd() / filename, PROGRAMS_DIR / filename]
        for c in candidates:
            if c.is_file():
                return c
        return None

    def _iterate(self, iterable: Any, names: list[str], tree, ctx: _Context, what: str) -> list[Any]:
        if isinstance(iterable, dict):
            # `for k in D` gives the keys (the original); `for k, v in D` gives (key, value) pairs.
            return list(iterable.items()) if len(names) == 2 else list(iterable)
        if isinstance(iterable, (list, tuple, str)):
            return list(iterable)
        hint = None
        if isinstance(iterable, SOp):
            hint = "an s-op's values are only known when it runs; loops unroll over atoms (lists, dicts)"
        raise self.error(f"a {what} needs a list or dict to go over, got a {kind_name(iterable)}", tree, ctx,
                         hint=hint)

    def _bind_iterator(self, names: list[str], item: Any, tree, env: Env, ctx: _Context) -> None:
        for tok in tree.children:
            self._check_bindable(tok.value, tok, ctx)
        if len(names) == 1:
            env.vars[names[0]] = item
            return
        if isinstance(item, tuple):
            item = list(item)
        if not isinstance(item, (list, str)) or len(item) != len(names):
            got = f"{len(item)} values" if isinstance(item, (list, str)) else f"one {kind_name(item)}"
            raise self.error(f"cannot unpack {got} into {len(names)} loop names ({', '.join(names)})",
                             tree, ctx)
        for n, v in zip(names, item):
            env.vars[n] = v

    # ----------------------------------------------------------------- expressions
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
            if name.startswith("_") and close is None:
                hint = "names starting with '_' stay private to the file that defines them"
            raise self.error(f"unknown name '{name}'", tree, ctx, hint=hint) from None

    def e_int(self, tree: Tree, env: Env, ctx: _Context) -> int:
        return int(tree.children[0].value)

    def e_float(self, tree: Tree, env: Env, ctx: _Context) -> float:
        return float(tree.children[0].value)

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
                raise self.error(f"a dict key must be an atom (number, string or bool), got a {kind_name(key)}",
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
            key = self.expr(key_tree, inner, ctx)
            if not is_atom(key):
                raise self.error(f"a dict key must be an atom, got a {kind_name(key)}", key_tree, ctx)
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
                                 f"a {kind_name(other)}", tree, ctx)
            raise self.error(f"cannot apply '{op}' to a selector", tree, ctx,
                             hint="selectors combine only with and / or / not")
        if isinstance(left, SOp) or isinstance(right, SOp):
            for side in (left, right):
                if not isinstance(side, SOp) and not is_atom(side):
                    raise self.error(f"cannot apply '{op}' to an s-op and a {kind_name(side)}", tree, ctx,
                                     hint=("to index by an s-op write table[sop]; for membership write "
                                           "sop in list") if isinstance(side, (list, dict)) else None)
            return self.elementwise(lambda a, b: Binary(op, a, b), [left, right], tree, ctx)
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
            return self.elementwise(lambda a: Unary(op, a), [value], tree, ctx)
        if not is_atom(value):
            raise self.error(f"cannot apply '{op}' to a {kind_name(value)}", tree, ctx)
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
                raise self.error(f"an elementwise 'if' picks between s-ops or atoms, not a {kind_name(side)}",
                                 t, ctx)
        return self.elementwise(lambda c, a, b: Ternary(a, c, b), [cond, then, other], tree, ctx)

    def e_contains(self, tree: Tree, env: Env, ctx: _Context) -> Any:
        item_tree, coll_tree = tree.children
        item = self.expr(item_tree, env, ctx)
        coll = self.expr(coll_tree, env, ctx)
        if isinstance(item, SOp):
            if isinstance(coll, dict):
                coll = list(coll)
            if not isinstance(coll, (list, tuple)):
                raise self.error(f"'s-op in X' needs X to be a list of atoms, got a {kind_name(coll)}",
                                 coll_tree, ctx)
            for v in coll:
                if not is_atom(v):
                    raise self.error(f"'s-op in X' needs X to be a list of atoms; it holds a {kind_name(v)}",
                                     coll_tree, ctx)
            return self.elementwise(lambda a: Contains(a, tuple(coll)), [item], tree, ctx)
        if is_atom(item):
            if isinstance(coll, SOp):
                contains = self._library_function("contains", tree, ctx)
                return self.call_value(contains, [coll, item], tree, ctx)
            if isinstance(coll, (list, dict)):
                return item in coll
            if isinstance(coll, str):
                if not isinstance(item, str):
                    raise self.error(f"'{kind_name(item)} in string' needs a string on the left", tree, ctx)
                return item in coll
            raise self.error(f"'atom in X' needs X to be a list, dict, string or s-op, got a {kind_name(coll)}",
                             coll_tree, ctx)
        if isinstance(item, (list, dict)) and isinstance(coll, list):
            return item in coll
        raise self.error(f"cannot test whether a {kind_name(item)} is in a {kind_name(coll)}", tree, ctx)

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
                                 f"not by a {kind_name(idx)}", idx_tree, ctx)
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
            raise self.error(f"cannot index a {kind_name(obj)} by an s-op", tree, ctx)
        if isinstance(obj, dict):
            if not is_atom(idx):
                raise self.error(f"a dict index must be an atom, got a {kind_name(idx)}", idx_tree, ctx)
            if idx not in obj:
                raise self.error(f"key {idx!r} is not in the dict", idx_tree, ctx)
            return obj[idx]
        if isinstance(obj, (list, str)):
            if isinstance(idx, bool) or not isinstance(idx, int):
                raise self.error(f"a {kind_name(obj)} index must be an int, got a {kind_name(idx)}", idx_tree, ctx)
            if idx >= len(obj) or -idx > len(obj):
                raise self.error(f"index {idx} is out of range for a {kind_name(obj)} of length {len(obj)}",
                                 idx_tree, ctx)
            return obj[idx]
        raise self.error(f"cannot index a {kind_name(obj)}", tree, ctx)

    def sop_element(self, sop: SOp, k: int, tree, ctx: _Context) -> SOp:
        """``sop[k]``: the value at position k (from the end if negative) at every position."""
        pos = self.pos(tree, ctx)
        indices = self._builtin_node("indices")
        if k >= 0:
            where = self.builder.add(Constant, (), pos, value=k)
        else:
            length = self._builtin_node("length")
            where = self.builder.add(Map, (length,), pos, fn=Binary("+", Var(0), Const(k)))
        sel = self.builder.add(Select, (indices, where), pos, op="==")
        return SOp(self.builder.add(Aggregate, (sel, sop.node), pos, default=0))

    def _builtin_node(self, name: str) -> str:
        return self.builtins.vars[name].node

    def e_select(self, tree: Tree, env: Env, ctx: _Context) -> Selector:
        keys_tree, queries_tree, op_tok = tree.children
        keys = self.as_sop(self.expr(keys_tree, env, ctx), keys_tree, ctx, "select's keys")
        queries = self.as_sop(self.expr(queries_tree, env, ctx), queries_tree, ctx, "select's queries")
        op = op_tok.value
        assert op in COMPARISONS
        return Selector(self.builder.add(Select, (keys, queries), self.pos(tree, ctx), op=op))

    def as_sop(self, value: Any, tree, ctx: _Context, what: str) -> str:
        """Node id of an s-op, broadcasting an atom to a Constant node."""
        if isinstance(value, SOp):
            return value.node
        if is_atom(value):
            return self.builder.add(Constant, (), self.pos(tree, ctx), value=value)
        raise self.error(f"{what} must be an s-op or an atom, got a {kind_name(value)}", tree, ctx)

    def e_aggregate(self, tree: Tree, env: Env, ctx: _Context) -> SOp:
        sel_tree, sop_tree, default_tree = tree.children
        sel = self.expr(sel_tree, env, ctx)
        if not isinstance(sel, Selector):
            raise self.error(f"aggregate's first argument must be a selector, got a {kind_name(sel)}",
                             sel_tree, ctx)
        sop = self.as_sop(self.expr(sop_tree, env, ctx), sop_tree, ctx, "aggregate's second argument")
        default = 0
        if default_tree is not None:
            default = self.expr(default_tree, env, ctx)
            if not is_atom(default):
                raise self.error(f"aggregate's default must be an atom, got a {kind_name(default)}",
                                 default_tree, ctx)
        return SOp(self.builder.add(Aggregate, (sel.node, sop), self.pos(tree, ctx), default=default))

    # -- calls
    def e_call(self, tree: Tree, env: Env, ctx: _Context) -> Any:
        fn_tree, args_tree = tree.children
        fn = self.expr(fn_tree, env, ctx)
        args = [] if args_tree is None else [self.expr(a, env, ctx) for a in args_tree.children]
        return self.call_value(fn, args, tree, ctx, fn_tree=fn_tree)

    def call_value(self, fn: Any, args: list[Any], tree, ctx: _Context, fn_tree=None) -> Any:
        if isinstance(fn, Builtin):
            ok = len(args) in fn.arity if isinstance(fn.arity, range) else len(args) == fn.arity
            if not ok:
                raise self.error(f"{fn.name} called with {len(args)} argument{'s' * (len(args) != 1)}; "
                                 f"usage: {fn.usage}", tree, ctx)
            return fn.impl(self, args, tree, ctx)
        if isinstance(fn, Function):
            return self.call_function(fn, args, tree, ctx)
        if isinstance(fn, (SOp, Selector)):
            return self.apply_to_input(fn, args, tree, ctx)
        what = kind_name(fn)
        raise self.error(f"a {what} is not a function and cannot be called", fn_tree or tree, ctx)

    def call_function(self, fn: Function, args: list[Any], tree, ctx: _Context) -> Any:
        if len(args) != len(fn.params):
            raise self.error(f"{fn.name}() takes {len(fn.params)} argument{'s' * (len(fn.params) != 1)} "
                             f"({', '.join(fn.params)}), but {len(args)} were given", tree, ctx)
        if self.depth >= MAX_CALL_DEPTH:
            raise self.error(f"recursion too deep: more than {MAX_CALL_DEPTH} nested calls (in {fn.name})",
                             tree, ctx, hint="a recursive function needs a base case decided by an atom, "
                                             "e.g. `x if n == 0 else f(n - 1)`")
        call_env = Env(dict(zip(fn.params, args)), parent=fn.env, label=fn.name)
        inner = _Context(fn.file, fn.source, getattr(fn, "directory", None), function=fn.name, top_level=False)
        entering_library = fn.file == LIBRARY_FILE and ctx.file != LIBRARY_FILE
        if entering_library:
            self._call_site.append((tree, ctx))
        self.depth += 1
        try:
            for stmt in fn.body:
                self.statement(stmt, call_env, inner)
        except _Return as ret:
            return ret.value
        finally:
            self.depth -= 1
            if entering_library:
                self._call_site.pop()
        raise self.error(f"function {fn.name} ended without 'return'", tree, ctx)

    def apply_to_input(self, value: SOp | Selector, args: list[Any], tree, ctx: _Context) -> Any:
        """``reverse("hello")``: run an s-op or selector on a concrete input, now."""
        from rasp_compiler.interpreter import evaluate

        if len(args) != 1:
            raise self.error(f"applying an {kind_name(value)} to an input takes one argument, got {len(args)}",
                             tree, ctx)
        data = args[0]
        if isinstance(data, str):
            data = list(data)
        if not isinstance(data, list) or not all(is_atom(v) for v in data):
            raise self.error(f"an {kind_name(value)} runs on a string or a list of atoms, "
                             f"got a {kind_name(args[0])}", tree, ctx)
        program = self.program_for(value)
        result = evaluate(program, data)[program.output]
        if isinstance(value, Selector):
            return [[bool(x) for x in row] for row in result]
        return list(result)

    # ----------------------------------------------------------------- built-ins
    def _install_builtins(self) -> None:
        b = self.builder
        env = self.builtins.vars
        for t in TOKEN_TYPES:
            env[f"tokens_{t}"] = SOp(b.add(Tokens, (), None, type=t))
            b.bind(env[f"tokens_{t}"].node, f"tokens_{t}" if t != "str" else "tokens", LOCAL + 1)
        env["tokens"] = env["tokens_str"]
        env["indices"] = SOp(b.add(Indices, (), None))
        b.bind(env["indices"].node, "indices", LOCAL + 1)
        env["length"] = SOp(b.add(Length, (), None))
        b.bind(env["length"].node, "length", LOCAL + 1)
        env["True"], env["False"] = True, False
        for builtin in _BUILTINS:
            env[builtin.name] = builtin


def _span(tree: Tree | Token) -> tuple[int | None, int | None, int | None, int | None]:
    if isinstance(tree, Token):
        return tree.line, tree.column, tree.start_pos, tree.end_pos
    meta = tree.meta
    if getattr(meta, "empty", True):
        for child in tree.children:
            if isinstance(child, (Tree, Token)):
                return _span(child)
        return None, None, None, None
    return meta.line, meta.column, meta.start_pos, meta.end_pos


# --------------------------------------------------------------------- built-in functions
def _selector_width(s: Session, args, tree, ctx) -> SOp:
    sel = args[0]
    if not isinstance(sel, Selector):
        raise s.error(f"selector_width needs a selector, got a {kind_name(sel)}", tree, ctx)
    return SOp(s.builder.add(SelectorWidth, (sel.node,), s.pos(tree, ctx)))


def _range(s: Session, args, tree, ctx) -> list:
    for a in args:
        if isinstance(a, bool) or not isinstance(a, int):
            raise s.error(f"range needs int arguments, got a {kind_name(a)}", tree, ctx)
    if len(args) == 3 and args[2] == 0:
        raise s.error("range step cannot be zero", tree, ctx)
    return list(range(*args))


def _zip(s: Session, args, tree, ctx) -> list:
    for i, a in enumerate(args):
        if not isinstance(a, list):
            raise s.error(f"zip needs lists; argument {i + 1} is a {kind_name(a)}", tree, ctx)
    lengths = {len(a) for a in args}
    if len(lengths) > 1:
        raise s.error(f"zip needs lists of one length, got lengths {[len(a) for a in args]}", tree, ctx)
    return [list(v) for v in zip(*args)]


def _len(s: Session, args, tree, ctx) -> int:
    a = args[0]
    if not isinstance(a, (list, dict, str)):
        hint = "the sequence length is the s-op `length`" if isinstance(a, SOp) else None
        raise s.error(f"len needs a list, dict or string, got a {kind_name(a)}", tree, ctx, hint=hint)
    return len(a)


def _annotate(encoding: str) -> Callable[..., Any]:
    def impl(s: Session, args, tree, ctx) -> SOp:
        value = args[0]
        if not isinstance(value, SOp):
            raise s.error(f"{encoding}(…) annotates an s-op, got a {kind_name(value)}", tree, ctx)
        s.builder.replace(value.node, encoding=encoding)
        return value
    return impl


_BUILTINS = [
    Builtin("selector_width", _selector_width, 1, "selector_width(selector)"),
    Builtin("range", _range, range(1, 4), "range(stop) / range(start, stop[, step])"),
    Builtin("zip", _zip, range(1, 100), "zip(list, list, …)"),
    Builtin("len", _len, 1, "len(list)"),
    Builtin("numerical", _annotate("numerical"), 1, "numerical(sop)"),
    Builtin("categorical", _annotate("categorical"), 1, "categorical(sop)"),
]


# --------------------------------------------------------------------- public entry points
def program_from_source(text: str, file: str = "<string>", output: str = "out") -> Program:
    """Parse and elaborate RASP source; the program's output is the s-op named ``output``."""
    session = Session()
    directory = Path(file).resolve().parent if Path(file).is_file() else None
    session.exec_source(text, file, directory=directory)
    return session.program(output, file)


def load_program(path: str | Path, output: str = "out") -> Program:
    """Elaborate the RASP file at ``path``."""
    from rasp_compiler.errors import UserError

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"no such file: {path}") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read {path}: {err}") from None
    session = Session()
    session.exec_source(text, str(path), directory=p.resolve().parent)
    return session.program(output, str(path))
