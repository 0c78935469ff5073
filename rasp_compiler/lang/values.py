"""What a RASP name can be bound to while a program is elaborated.

Atoms (int, float, str, bool), lists and dicts are plain Python values, computed on the spot.
s-ops and selectors are references to nodes of the program graph being built; functions are
closures over the environment they were defined in.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Callable

from rasp_compiler.interpreter import ATOMS


@dataclass(frozen=True)
class SOp:
    node: str  # id of the node in the graph under construction


@dataclass(frozen=True)
class Selector:
    node: str


@dataclass
class Function:
    """A ``def``: parameters, body statements (syntax trees) and the defining environment."""

    name: str
    params: list[str]
    body: list[Any]
    env: "Env"
    file: str
    source: str

    def __str__(self) -> str:
        return f"function {self.name}({', '.join(self.params)})"


@dataclass
class Builtin:
    """A function implemented here (``range``, ``selector_width``, ``numerical`` …).

    ``impl(elaborator, args, call_tree)`` returns the value; ``arity`` is an int or a range."""

    name: str
    impl: Callable[..., Any]
    arity: Any
    usage: str

    def __str__(self) -> str:
        return f"built-in function {self.usage}"


@dataclass
class Env:
    """One scope: a file, a function call, or a comprehension."""

    vars: dict[str, Any] = field(default_factory=dict)
    parent: "Env | None" = None
    label: str = ""

    def lookup(self, name: str) -> Any:
        env: Env | None = self
        while env is not None:
            if name in env.vars:
                return env.vars[name]
            env = env.parent
        raise KeyError(name)

    def visible_names(self) -> set[str]:
        names: set[str] = set()
        env: Env | None = self
        while env is not None:
            names |= set(env.vars)
            env = env.parent
        return names

    def suggest(self, name: str) -> str | None:
        # the grammar's own calls are no names, but a typo of one (`aggregat(`) reads as an unknown name
        candidates = sorted(self.visible_names() | set(GRAMMAR_CALLS))
        close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
        return close[0] if close else None


# `draw(…);` is a statement, but its typo (`drwa(x);`) parses as a call of an unknown name too
GRAMMAR_CALLS = ("select", "aggregate", "round", "indicator", "draw")


class AppliedResult(list):
    """The list an s-op or selector gives when applied to a concrete input (``reverse("abc")``);
    a plain list to the language, marked so the REPL can print it like a sequence."""


def is_atom(value: Any) -> bool:
    return isinstance(value, ATOMS)


def a_kind(value: Any) -> str:
    """The kind with its article: "an int", "a selector"."""
    kind = kind_name(value)
    return ("an " if kind[0] in "aeiou" or kind == "s-op" else "a ") + kind


def kind_name(value: Any) -> str:
    """The kind of a value, in the words error messages use."""
    if isinstance(value, SOp):
        return "s-op"
    if isinstance(value, Selector):
        return "selector"
    if isinstance(value, (Function, Builtin)):
        return "function"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "dict"
    if isinstance(value, tuple):
        return "tuple"
    return type(value).__name__
