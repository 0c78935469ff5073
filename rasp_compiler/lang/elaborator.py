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

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from lark import Token, Tree

from rasp_compiler.errors import InputError, RaspError
from rasp_compiler.graph.expr import deep_recursion
from rasp_compiler.graph.nodes import (
    Indices,
    Length,
    Program,
    SelectorWidth,
    SoftmaxAggregate,
    SourcePos,
    Tokens,
)
from rasp_compiler.lang.builder import BUILTIN, LOCAL, OUT, TOP_LEVEL, GraphBuilder
from rasp_compiler.lang.expressions import Expressions, decode_string
from rasp_compiler.lang.parser import check_source, parse_source
from rasp_compiler.lang.values import (
    AppliedResult,
    Builtin,
    Env,
    Function,
    Selector,
    SOp,
    a_kind,
    is_atom,
    kind_name,
)

LIBRARY_PATH = Path(__file__).resolve().parent / "rasplib.rasp"
LIBRARY_FILE = "rasplib.rasp"
PROGRAMS_DIR = Path(__file__).resolve().parents[2] / "programs"
# the original repository's own files, of which a checkout holds copies in tests/data/ (its README
# starts a session with `load "paper_examples";`)
ORIGINAL_FILES = ("paper_examples", "rover", "long_addition")
MAX_CALL_DEPTH = 100
# Budgets that turn a runaway program (exponential recursion, huge loops) into an error, not a hang.
MAX_CALLS = 200_000
MAX_NODES = 300_000
MAX_RANGE = 1_000_000
TOKEN_TYPES = ("str", "int", "float", "bool")


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


class Session(Expressions):
    """An elaboration session: the graph built so far and the user's environment."""

    def __init__(self, with_library: bool = True) -> None:
        self.builder = GraphBuilder()
        self.sources: dict[str, str] = {}
        self.depth = 0
        self.calls = 0
        self._loading: list[Path] = []
        # While a library function runs for user code, its nodes and errors point at the user's
        # call (the user's line is what they can act on), not into rasplib.rasp.
        self._call_site: list[tuple[Tree, _Context]] = []
        # What a node's position records as its context (SourcePos.context): the calls of the
        # program's own functions being run (their source text, outermost first), and the loop
        # names bound now with their values, as they read in a picture (`m = 0`).
        self._user_calls: list[str] = []
        self._loop_values: list[str] = []
        # The original REPL's current name of each s-op / selector node (see Expressions.display_name):
        # read only by the REPL's printing, never by programs, node ids or compilation.
        self.display_names: dict[str, str] = {}
        self.builtins = Env(label="built-ins")
        self._install_builtins()
        self.library = Env(parent=self.builtins, label="library")
        if with_library:
            text = LIBRARY_PATH.read_text(encoding="utf-8")
            self.exec_source(text, LIBRARY_FILE, self.library, LIBRARY_PATH.parent, library=True)
        self.user = Env(parent=self.library, label="program")
        # What a `draw(sop[, example]);` statement does besides checking its arguments: nothing in a
        # program file (it changes nothing the program computes); the REPL sets this to draw and
        # print.  Called as on_draw(sop, example or None, source text of the s-op argument, shown),
        # where shown says whether the draw is a top-level statement of the input being run.
        self.on_draw: Callable[[SOp, Any, str, bool], None] | None = None

    # ----------------------------------------------------------------- running source text
    def exec_source(self, text: str, file: str, env: Env | None = None, directory: Path | None = None,
                    library: bool = False, on_result: Callable[[str, Any], None] | None = None) -> None:
        """Parse and run ``text`` in ``env`` (default: the user's). ``on_result(name, value)`` is
        called for each binding a top-level statement makes (the REPL prints them)."""
        check_source(text, "exec_source")
        text = text.removeprefix("\ufeff")  # a byte-order mark, as Windows editors save UTF-8
        tree = parse_source(text, file)
        self.sources[file] = text
        ctx = _Context(file, text, directory)
        env = self.user if env is None else env
        with deep_recursion():
            for stmt in tree.children:
                try:
                    self.statement(stmt, env, ctx, on_result=on_result, library=library)
                except RecursionError:  # the statement's line is where to split the expression
                    raise self.error("the program nests too deeply to elaborate", stmt, ctx,
                                     hint="split this statement: name parts of it (`a = …; b = a + …;`)"
                                     ) from None

    def eval_expression(self, text: str, file: str = "<expression>", usage: str | None = None,
                        lead: str = "") -> Any:
        """The value of one expression in the user's environment (binds nothing).  ``usage`` is the
        hint when ``text`` is something else (an assignment, several statements).  ``lead`` is what
        precedes the expression on its line (`set example `): errors show that line and count
        columns from its start."""
        source = " " * len(lead) + text.strip().rstrip(";") + ";"
        try:
            tree = parse_source(source, file)
            self.sources[file] = source
            stmts = tree.children
            if len(stmts) != 1 or stmts[0].data != "statement" or stmts[0].children[0].data != "expr_stmt":
                raise RaspError("expected one expression (a value), not a statement", file, 1, len(lead) + 1,
                                source, hint=usage)
            return self.expr(stmts[0].children[0].children[0], self.user, _Context(file, source, None))
        except RaspError as err:
            if lead and err.file == file and err.source == source:
                err.source = lead + source[len(lead):]
            raise

    def program(self, output: str = "out", file: str | None = None) -> Program:
        """The program graph whose output is the user variable ``output``."""
        names = self.user_names()
        if output not in names:
            value = self._lookup_user(output)
            if value is None:
                if output == "out":
                    public = sorted(n for n in names if not n.startswith("_"))
                    hint = "end the file with the s-op to compute, e.g. `reverse;`"
                    functions = [v for k, v in self.user.vars.items()
                                 if isinstance(v, Function) and not k.startswith("_")]
                    if not public and functions:  # a listing of functions, never called
                        shown = ", ".join(str(f).removeprefix("function ") for f in functions[:8])
                        params = functions[-1].params
                        args = ", ".join(["tokens_int", *params[1:]] if params else [])
                        call = f"{functions[-1].name}({args})"
                        raise RaspError(f"the program has no result: the file defines functions "
                                        f"({shown}) but computes no s-op", file,
                                        hint=f"end the file with a call, e.g. `{call};` (tokens_float for "
                                        "real-valued inputs), or `out = ...;`")
                    if public:
                        shown = ", ".join(public[:8]) + (", …" if len(public) > 8 else "")
                        hint += f", or choose one with --output NAME (this file defines {shown})"
                    raise RaspError("the program has no result: no statement binds 'out'",
                                    file, hint=hint)
                close = self.user.suggest(output)
                public = sorted(n for n, v in names.items() if not n.startswith("_") and n != "out")
                shown = ", ".join(public[:8]) + (", …" if len(public) > 8 else "")
                # with no close name, say which there are rather than leave the user guessing
                hint = f"did you mean '{close}'?" if close else \
                    f"this file defines {shown}" if public else None
                raise RaspError(f"no s-op or selector named '{output}' in the program", file, hint=hint)
            if not isinstance(value, (SOp, Selector)):
                message = f"'{output}' is {a_kind(value)}, not an s-op or selector"
                site = getattr(self, "_out_site", None) if output == "out" else None
                if site is not None:
                    hint = "the last expression or assignment is the program's result"
                    sops = [n for n in names if n != "out" and not n.startswith("_")]
                    if sops:  # `y = f(tokens);` then `n = 3;`: which s-op was meant is likely
                        hint += f"; to compile the s-op '{sops[-1]}', give --output {sops[-1]}"
                    raise self.error(message, site[0], site[1], hint=hint)
                hint = None
                if isinstance(value, Function):  # `--output frac_prevs`: the function, not a result
                    public = sorted(n for n in names if not n.startswith("_") and n != "out")
                    hint = (f"--output names an s-op: bind a call in the file, e.g. `r = "
                            f"{value.name}({', '.join(value.params)});`, and give --output r")
                    if public:
                        more = ", …" if len(public) > 8 else ""
                        hint += f" (this file binds {', '.join(public[:8])}{more})"
                raise RaspError(message, file, hint=hint)
            names[output] = value.node  # a built-in or library value: `--output indices`
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
        return SourcePos(ctx.file, line or 0, col or 0, ctx.source[start:end] if start is not None else "",
                         self._context())

    def _context(self) -> str:
        """The context of a node made now (SourcePos.context): ``entry_at(t * k + m), m = 0``."""
        if not self._user_calls and not self._loop_values:
            return ""
        return ", ".join(self._user_calls[:1] + self._loop_values)

    @contextmanager
    def _loop_context(self, names: list[str], item: Any, ctx: _Context) -> Iterator[None]:
        """While one pass of a loop or comprehension runs: its names' atom values in the context
        of the nodes it makes (s-ops, selectors, lists and the like are left out: an s-op's id is
        not final yet; and so are the library's own loops)."""
        values = [item] if len(names) == 1 else list(item)
        shown = []
        if ctx.file != LIBRARY_FILE:
            for name, value in zip(names, values, strict=False):
                if isinstance(value, str):
                    shown.append(f'{name} = "{value}"')
                elif isinstance(value, (bool, int, float)):
                    shown.append(f"{name} = {value}")
        self._loop_values.extend(shown)
        try:
            yield
        finally:
            del self._loop_values[len(self._loop_values) - len(shown):]

    def error(self, message: str, tree: Tree | Token | None, ctx: _Context, hint: str | None = None
              ) -> RaspError:
        if ctx.file == LIBRARY_FILE and self._call_site:
            tree, ctx = self._call_site[0]
        if tree is None:
            return RaspError(message, ctx.file, source=ctx.source, hint=hint)
        context = self._context()
        if context and ctx.file != LIBRARY_FILE:  # which call of the program's function, which pass
            message += f" (in {context})"
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
                if ctx.function is None and not library:  # where `out` was last bound, for errors
                    self._out_site = (inner.children[0], ctx)
                if isinstance(value, (SOp, Selector)):
                    self.builder.bind(value.node, "out" if ctx.function is None else f"{ctx.function}.out",
                                      OUT if ctx.function is None else LOCAL)
                if on_result:
                    shown = inner.children[0]
                    on_result(shown.children[0].value if shown.data == "var" else "out", value)
                return
            self.assign(inner, env, ctx, on_result, library)
        elif kind == "funcdef":
            name_tok, params_tree, *body = stmt.children
            params = [t.value for t in params_tree.children] if params_tree is not None else []
            if len(set(params)) != len(params):
                raise self.error(f"function '{name_tok}' names a parameter twice", params_tree, ctx)
            self._check_bindable(name_tok.value, name_tok, ctx)
            self._check_body_returns(name_tok, body, ctx)
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
                with self._loop_context(names, item, ctx):
                    for inner in body:
                        self.statement(inner, env, ctx, library=library)
        elif kind == "load":
            self.load(stmt.children[0], env, ctx, on_result)
        elif kind == "draw":
            self.draw(stmt, env, ctx, shown=on_result is not None)
        elif kind == "return_stmt":
            if ctx.function is None:
                raise self.error("'return' outside a function", stmt, ctx)
            values = [self.expr(e, env, ctx) for e in stmt.children[0].children]
            raise _Return(values[0] if len(values) == 1 else values)
        else:  # pragma: no cover - the grammar has no other statements
            raise self.error(f"unknown statement {kind}", stmt, ctx)

    def _check_body_returns(self, name_tok: Token, body: list, ctx: _Context) -> None:
        """A def body ends with its `return` (the original's grammar: statements, then one `return`,
        then only comments): a body with no `return` at all, or a statement after the body's
        `return`, is a mistake said where it is written, not when the function is called."""
        def has_return(stmts) -> bool:
            return any(isinstance(t, Tree) and (t.data == "return_stmt" or (
                t.data == "forloop" and has_return(t.children[2:]))) for t in stmts)

        for i, stmt in enumerate(body):
            if isinstance(stmt, Tree) and stmt.data == "return_stmt" and i + 1 < len(body):
                after = body[i + 1]
                raise self.error(f"a statement after the 'return' of function '{name_tok}' is never run",
                                 after, ctx, hint="'return' ends the function: move the statement "
                                                  "before it, or delete it")
        if not has_return(body):
            raise self.error(f"function '{name_tok}' has no 'return'", name_tok, ctx,
                             hint="a def body ends with `return value;`, e.g. "
                                  "def f(x) { y = x + 1; return y; }")

    def _check_bindable(self, name: str, tree, ctx: _Context) -> None:
        if name == "out":
            raise self.error("'out' is reserved: it holds the value of the last expression or assignment",
                             tree, ctx, hint="choose another name, or write the expression alone "
                                             "(`e;`) to make it the result")

    def assign(self, tree: Tree, env: Env, ctx: _Context, on_result=None, library: bool = False) -> None:
        names_tree, exprs_tree = tree.children
        names = [t.value for t in names_tree.children]
        for tok in names_tree.children:
            self._check_bindable(tok.value, tok, ctx)
        values = [self.expr(e, env, ctx) for e in exprs_tree.children]
        value: Any = values[0] if len(values) == 1 else values
        if len(names) == 1:
            pairs = [(names[0], value)]
        else:
            if isinstance(value, (tuple, str, dict)):
                # as the original (and Python): a dict unpacks into its keys, a string into its
                # characters (`for k, v in D` is the one place a dict gives (key, value) pairs)
                value = list(value)
            if not isinstance(value, list):
                raise self.error(f"cannot unpack one {kind_name(value)} into {len(names)} names "
                                 f"({', '.join(names)})", exprs_tree, ctx)
            if len(value) != len(names):
                raise self.error(f"unpacking: {len(names)} names ({', '.join(names)}) but "
                                 f"{len(value)} value{'' if len(value) == 1 else 's'}", tree, ctx)
            pairs = list(zip(names, value, strict=True))
        for name, v in pairs:
            env.vars[name] = v
            if isinstance(v, (SOp, Selector)):
                self.set_display_name(v, name)  # as the original's assignment renames the value
                if ctx.function is None:
                    self.builder.bind(v.node, name, TOP_LEVEL)
                else:
                    self.builder.bind(v.node, f"{ctx.function}.{name}", LOCAL)
            if on_result:
                on_result(name, v)
        # The original sets `out` on every expression it evaluates, an assignment's right-hand
        # side included: a file that ends with `total = ...;` has `total` as its result.
        if library:
            return
        last = values[-1]
        env.vars["out"] = last
        if ctx.function is None:
            self._out_site = (exprs_tree.children[-1], ctx)
            if isinstance(last, (SOp, Selector)):
                self.builder.bind(last.node, "out", OUT)

    def draw(self, stmt: Tree, env: Env, ctx: _Context, shown: bool) -> None:
        """``draw(sop[, example]);``: the arguments are evaluated and checked; it binds nothing (not
        even ``out``), so a program computes the same with or without it (see ``on_draw``)."""
        sop_tree, example_tree = stmt.children
        example = self.expr(example_tree, env, ctx) if example_tree is not None else None
        value = self.expr(sop_tree, env, ctx)
        if not isinstance(value, SOp):
            raise self.error(f"draw takes an s-op and, optionally, an example: draw(reverse) or "
                             f'draw(reverse, "abc"); got {a_kind(value)}', sop_tree, ctx)
        if self.on_draw is not None:
            if example_tree is not None and (bad := _not_an_example(example)):
                # located here: the REPL's own check named no line (a loaded file's neither)
                raise self.error(f"the example to draw on is a non-empty string or list of atoms, got {bad}",
                                 example_tree, ctx)
            try:
                self.on_draw(value, example, self.pos(sop_tree, ctx).text, shown)
            except InputError as err:  # the example cannot be read (tokens_int on "hello"): at the s-op
                raise self.error(err.message, sop_tree, ctx, hint=err.hint) from None

    def load(self, token: Token, env: Env, ctx: _Context, on_result=None) -> None:
        path, text, file_env = self.load_source(token, ctx)
        self._loading.append(path.resolve())
        try:
            self.exec_source(text, str(path), file_env, path.parent)
        except RaspError as err:
            if err.file == str(path):  # the error is in the loaded file: say which load brought it in
                where = self.pos(token, ctx)
                note = f"loaded by {where.file}:{where.line}"
                err.hint = f"{err.hint} ({note})" if err.hint else note
            raise
        finally:
            self._loading.pop()
        for var, value in self.import_public(file_env, env, ctx):
            if on_result:
                on_result(var, value)

    def import_public(self, file_env: Env, env: Env, ctx: _Context,
                      withheld: frozenset[str] = frozenset()) -> list[tuple[str, Any]]:
        """Bind the loaded file's public names in the loader's environment ``env``, except those
        ``withheld``; returns them.  A name starting with '_' (and ``out``) stays private to the
        file, as in the original."""
        public = [(var, value) for var, value in file_env.vars.items()
                  if not var.startswith("_") and var != "out" and var not in withheld]
        for var, value in public:
            env.vars[var] = value
            if isinstance(value, (SOp, Selector)) and ctx.function is None:
                self.builder.bind(value.node, var, TOP_LEVEL)
        return public

    def load_source(self, token: Token, ctx: _Context) -> tuple[Path, str, Env]:
        """The file a ``load "name";`` names, its text, and the fresh environment it runs in: it
        sees the built-ins and the library, not the loader's names (as in the original).  The
        environment is labelled with the name as the load wrote it (the original's REPL calls a
        function defined there a "NAME function")."""
        name = decode_string(token.value)
        if not name.strip():
            raise self.error("load needs a file name", token, ctx, hint='e.g. load "reverse"; (reverse.rasp)')
        path = self._find_file(name, ctx)
        if path is None:
            folder = next((c for c in self._candidates(name, ctx) if c.is_dir()), None)
            if folder is not None:  # "cannot find" misled: the name is there, as a directory
                raise self.error(f"cannot load '{name}': {folder} is a directory, not a RASP file",
                                 token, ctx)
            hint = "load looks next to the loading file, then in the current directory, then in programs/"
            original = PROGRAMS_DIR.parent / "tests" / "data" / f"{name}.rasp"
            if name.endswith(".py"):
                hint = ("load reads RASP files; a Python program (rasp_compiler.pyapi) runs with python, "
                        "and rasp.to_source(sop, vocab=..., max_len=...) writes it as RASP")
            elif name in ORIGINAL_FILES and original.is_file():
                shown = os.path.relpath(original.with_suffix(""))
                shown = str(original.with_suffix("")) if shown.startswith("..") else shown
                hint = (f"{name}.rasp is the original RASP repository's file, not shipped in programs/; "
                        f'this checkout holds a copy: load "{shown}";')
            raise self.error(f"cannot find '{name}.rasp' to load", token, ctx, hint=hint)
        if path.resolve() in self._loading:
            raise self.error(f"'{name}' loads itself (through {' → '.join(p.stem for p in self._loading)})",
                             token, ctx)
        try:
            # a byte-order mark hid the REPL's load a first-line command (`set example`)
            text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
        except (OSError, UnicodeDecodeError) as err:
            raise self.error(f"cannot read {path}: {err}", token, ctx) from None
        return path, text, Env(parent=self.library, label=name.removesuffix(".rasp"))

    def _find_file(self, name: str, ctx: _Context) -> Path | None:
        for c in self._candidates(name, ctx):
            if c.is_file():
                return c
        return None

    @staticmethod
    def _candidates(name: str, ctx: _Context) -> list[Path]:
        """Where ``load "name";`` looks, in order."""
        filename = name if name.endswith(".rasp") else name + ".rasp"
        candidates = []
        if Path(filename).is_absolute():
            candidates.append(Path(filename))
        else:
            if ctx.directory is not None:
                candidates.append(ctx.directory / filename)
            candidates += [Path.cwd() / filename, PROGRAMS_DIR / filename]
        return candidates

    def _iterate(self, iterable: Any, names: list[str], tree, ctx: _Context, what: str) -> list[Any]:
        if isinstance(iterable, dict):
            # `for k in D` gives the keys (the original); `for k, v in D` gives (key, value) pairs.
            return list(iterable.items()) if len(names) == 2 else list(iterable)
        if isinstance(iterable, (list, tuple, str)):
            return list(iterable)
        hint = None
        if isinstance(iterable, SOp):
            hint = "an s-op's values are only known when it runs; loops unroll over atoms (lists, dicts)"
        raise self.error(f"a {what} needs a list or dict to go over, got {a_kind(iterable)}", tree, ctx,
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
        for n, v in zip(names, item, strict=True):
            env.vars[n] = v

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
            result = fn.impl(self, args, tree, ctx)
            if not any(result == a for a in args if isinstance(a, (SOp, Selector))):  # not numerical(x)
                self.name_call_result(fn.name, args, result)
            return result
        if isinstance(fn, Function):
            result = self.call_function(fn, args, tree, ctx)
            self.name_call_result(fn.name, args, result)
            return result
        if isinstance(fn, (SOp, Selector)):
            return self.apply_to_input(fn, args, tree, ctx)
        raise self.error(f"{a_kind(fn)} is not a function and cannot be called", fn_tree or tree, ctx)

    def call_function(self, fn: Function, args: list[Any], tree, ctx: _Context) -> Any:
        if len(args) != len(fn.params):
            raise self.error(f"{fn.name}() takes {len(fn.params)} argument{'s' * (len(fn.params) != 1)} "
                             f"({', '.join(fn.params)}), but {len(args)} were given", tree, ctx)
        if self.depth >= MAX_CALL_DEPTH:
            raise self.error(f"recursion too deep: more than {MAX_CALL_DEPTH} nested calls (in {fn.name})",
                             tree, ctx, hint="a recursive function needs a base case decided by an atom, "
                                             "e.g. `x if n == 0 else f(n - 1)`")
        call_env = Env(dict(zip(fn.params, args, strict=True)), parent=fn.env, label=fn.name)
        inner = _Context(fn.file, fn.source, getattr(fn, "directory", None), function=fn.name,
                         top_level=False)
        entering_library = fn.file == LIBRARY_FILE and ctx.file != LIBRARY_FILE
        if entering_library:
            self._call_site.append((tree, ctx))
        own = fn.file != LIBRARY_FILE  # a function of the program (or of a file it loads)
        if own:
            self._user_calls.append(" ".join(self.pos(tree, ctx).text.split()))
        self.calls += 1
        if self.calls > MAX_CALLS or len(self.builder.nodes) > MAX_NODES:
            raise self.error(f"the program is too large to elaborate (more than {MAX_CALLS} function calls "
                             f"or {MAX_NODES} graph nodes)", tree, ctx,
                             hint="a recursion or loop that multiplies work, e.g. f(n-1) + f(n-1)?")
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
            if own:
                self._user_calls.pop()
        raise self.error(f"function {fn.name} ended without 'return'", tree, ctx,
                         hint="its 'return' sits in a for loop that ran no turn here; end the body "
                              "with a `return` outside the loop too")

    def apply_to_input(self, value: SOp | Selector, args: list[Any], tree, ctx: _Context) -> Any:
        """``reverse("hello")``: run an s-op or selector on a concrete input, now."""
        from rasp_compiler.interpreter import evaluate

        if len(args) != 1:
            raise self.error(f"applying {a_kind(value)} to an input takes one argument, "
                             f"got {len(args)}",
                             tree, ctx)
        data = args[0]
        if isinstance(data, str):
            data = list(data)
        if not isinstance(data, list) or not all(is_atom(v) for v in data):
            raise self.error(f"{a_kind(value)} runs on a string or a list of atoms, "
                             f"got {a_kind(args[0])}", tree, ctx)
        program = self.program_for(value)
        try:
            result = evaluate(program, data)[program.output]
        except InputError as err:  # an empty or unreadable input: the call is what to change
            hint = "give it a list of numbers, e.g. (tokens_int + 1)([1, 2, 3])" \
                if "cannot read" in err.message else None
            raise self.error(err.message, tree, ctx, hint=hint) from None
        if isinstance(value, Selector):
            return AppliedResult([[bool(x) for x in row] for row in result])
        return AppliedResult(result)

    # ----------------------------------------------------------------- built-ins
    def _install_builtins(self) -> None:
        b = self.builder
        env = self.builtins.vars
        for t in TOKEN_TYPES:
            env[f"tokens_{t}"] = SOp(b.add(Tokens, (), None, type=t))
            b.bind(env[f"tokens_{t}"].node, f"tokens_{t}" if t != "str" else "tokens", BUILTIN)
            self.display_names[env[f"tokens_{t}"].node] = f"tokens_{t}" if t != "str" else "tokens"
        env["tokens"] = env["tokens_str"]
        # the input exactly as given: characters of a string, JSON values of a list (the original's)
        env["tokens_asis"] = SOp(b.add(Tokens, (), None, type="value"))
        b.bind(env["tokens_asis"].node, "tokens_asis", BUILTIN)
        self.display_names[env["tokens_asis"].node] = "tokens_asis"
        env["indices"] = SOp(b.add(Indices, (), None))
        b.bind(env["indices"].node, "indices", BUILTIN)
        self.display_names[env["indices"].node] = "indices"
        env["length"] = SOp(b.add(Length, (), None))
        b.bind(env["length"].node, "length", BUILTIN)
        self.display_names[env["length"].node] = "length"
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
        raise s.error(f"selector_width needs a selector, got {a_kind(sel)}", tree, ctx)
    return SOp(s.builder.add(SelectorWidth, (sel.node,), s.pos(tree, ctx)))


def _softmax_aggregate(s: Session, args, tree, ctx) -> SOp:
    """softmax_aggregate(sel, queries, keys, values[, default]): queries and keys are s-ops or
    equally long lists of s-ops; the score of (query i, key j) is sum_t queries[t][i] * keys[t][j]."""
    sel = args[0]
    if not isinstance(sel, Selector):
        raise s.error(f"softmax_aggregate's first argument must be a selector, got {a_kind(sel)}",
                      tree, ctx)
    sides = []
    for what, value in (("queries", args[1]), ("keys", args[2])):
        items = value if isinstance(value, list) else [value]
        if not items:
            raise s.error(f"softmax_aggregate's {what} list is empty", tree, ctx)
        sides.append([s.as_sop(v, tree, ctx, f"softmax_aggregate's {what}") for v in items])
    if len(sides[0]) != len(sides[1]):
        raise s.error(f"softmax_aggregate needs as many queries as keys (got {len(sides[0])} and "
                      f"{len(sides[1])})", tree, ctx, hint="the score is the dot product of the two lists")
    value = s.as_sop(args[3], tree, ctx, "softmax_aggregate's values")
    default = args[4] if len(args) > 4 else 0
    if not is_atom(default):
        raise s.error(f"softmax_aggregate's default must be an atom, got {a_kind(default)}", tree, ctx)
    inputs = (sel.node, *sides[0], *sides[1], value)
    return SOp(s.builder.add(SoftmaxAggregate, inputs, s.pos(tree, ctx), default=default,
                             width=len(sides[0])))


def _range(s: Session, args, tree, ctx) -> list:
    for a in args:
        if isinstance(a, bool) or not isinstance(a, int):
            raise s.error(f"range needs int arguments, got {a_kind(a)}", tree, ctx)
    if len(args) == 3 and args[2] == 0:
        raise s.error("range step cannot be zero", tree, ctx)
    numbers = range(*args)
    try:
        count = len(numbers)
    except OverflowError:  # len() of a range past 2^63 numbers cannot even be taken
        count = None
    if count is None or count > MAX_RANGE:
        many = "more than 2^63" if count is None else f"{count:,}"
        raise s.error(f"range of {many} numbers is too long (the limit is {MAX_RANGE:,})", tree, ctx)
    return list(numbers)


def _zip(s: Session, args, tree, ctx) -> list:
    for i, a in enumerate(args):
        if not isinstance(a, list):
            raise s.error(f"zip needs lists; argument {i + 1} is {a_kind(a)}", tree, ctx)
    lengths = {len(a) for a in args}
    if len(lengths) > 1:
        raise s.error(f"zip needs lists of one length, got lengths {[len(a) for a in args]}", tree, ctx)
    return [list(v) for v in zip(*args, strict=True)]


def _len(s: Session, args, tree, ctx) -> int:
    a = args[0]
    if not isinstance(a, (list, dict, str)):
        hint = "the sequence length is the s-op `length`" if isinstance(a, SOp) else None
        raise s.error(f"len needs a list, dict or string, got {a_kind(a)}", tree, ctx, hint=hint)
    return len(a)


def _annotate(encoding: str) -> Callable[..., Any]:
    def impl(s: Session, args, tree, ctx) -> SOp:
        value = args[0]
        if not isinstance(value, SOp):
            raise s.error(f"{encoding}(…) annotates an s-op, got {a_kind(value)}", tree, ctx)
        fields: dict[str, Any] = {"encoding": encoding}
        if s.builder.nodes[value.node].pos is None:
            # a built-in (tokens, indices, length) has no place of its own: its annotation is where
            # a compile error about its encoding points, not the first s-op that reads it
            fields["pos"] = s.pos(tree, ctx)
        s.builder.replace(value.node, **fields)
        return value
    return impl


_BUILTINS = [
    Builtin("selector_width", _selector_width, 1, "selector_width(selector)"),
    Builtin("softmax_aggregate", _softmax_aggregate, range(4, 6),
            "softmax_aggregate(selector, queries, keys, values[, default])"),
    Builtin("range", _range, range(1, 4), "range(stop) / range(start, stop[, step])"),
    Builtin("zip", _zip, range(1, 100), "zip(list, list, …)"),
    Builtin("len", _len, 1, "len(list)"),
    Builtin("numerical", _annotate("numerical"), 1, "numerical(sop)"),
    Builtin("categorical", _annotate("categorical"), 1, "categorical(sop)"),
]


# --------------------------------------------------------------------- public entry points
def program_from_source(text: str, file: str = "<string>", output: str = "out") -> Program:
    """Parse and elaborate RASP source; the program's output is the s-op named ``output``."""
    check_source(text, "program_from_source")
    session = Session()
    directory = Path(file).resolve().parent if Path(file).is_file() else None
    session.exec_source(text, file, directory=directory)
    return session.program(output, file)


def load_program(path: str | Path, output: str = "out") -> Program:
    """Elaborate the RASP file at ``path``."""
    from rasp_compiler.errors import UserError

    p = Path(path)
    if p.suffix in (".json", ".safetensors") and p.is_file():
        from rasp_compiler.artifact_kinds import describe

        held = describe(p.parent)
        if held is not None:  # config.json was parsed as RASP ("missing ';'" at its last line)
            raise UserError(f"{path} is a file of an artifact, not a RASP program",
                            hint=f"{held}; give a .rasp file here")
    if p.suffix == ".py" and p.is_file():  # a tracr-style script: "missing ';'" at its first import
        raise UserError(f"{path} is a Python file, not a RASP program",
                        hint="run it with python; a program built with rasp_compiler.pyapi compiles with "
                             "rasp.compile_program(sop, vocab, max_len) (model.save(DIR) writes what rasp "
                             "eval reads), and rasp.to_source(sop, vocab=..., max_len=...) writes it as RASP")
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"no such file: {path}", hint=missing_file_hint(p)) from None
    except IsADirectoryError:
        hint = ("a compiled model runs with 'rasp eval DIR --input ...'"
                if (p / "config.json").is_file() else "give a .rasp file")
        raise UserError(f"{path} is a directory, not a RASP program", hint=hint) from None
    except (PermissionError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read {path}: {err}") from None
    session = Session()
    session.exec_source(text, str(path), directory=p.resolve().parent)
    return session.program(output, str(path))


def missing_file_hint(p: Path) -> str | None:
    """Where the file meant may be: ``rasp run reverse`` names a file as the REPL's ``load
    "reverse";`` does (``.rasp`` added; a bare name also in programs/), or ``-`` for stdin."""
    if str(p) == "-":
        return "a program is read from a file; for one on standard input give /dev/stdin"
    if p.suffix == ".rasp":
        return None
    candidates = [p.with_name(p.name + ".rasp")]
    if len(p.parts) == 1:
        candidates.append(PROGRAMS_DIR / (p.name + ".rasp"))
    for found in candidates:
        if found.is_file():
            shown = os.path.relpath(found) if found.is_absolute() else str(found)
            shown = str(found) if shown.startswith("..") else shown
            return f"did you mean {shown}? (load adds .rasp to a name; a command takes the file's name)"
    return None


def _not_an_example(example: Any) -> str | None:
    """What ``draw(sop, example)`` was given where it is not an example (``3``, ``""``, ``a list
    holding a selector``), as the REPL's ``set example`` shows it; None where it is one."""
    if not isinstance(example, (str, list)):
        return str(example) if is_atom(example) else a_kind(example)
    if not example:
        return '""' if isinstance(example, str) else "[]"
    bad = [v for v in example if not is_atom(v)] if isinstance(example, list) else []
    return f"a list holding {a_kind(bad[0])}" if bad else None
