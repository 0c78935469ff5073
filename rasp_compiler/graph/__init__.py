"""The program graph shared by the interpreter and the compiler."""

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
    evaluate,
)
from rasp_compiler.graph.nodes import (
    COMPARISONS,
    NODE_KINDS,
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
    SOpNode,
    SourcePos,
    Tokens,
    add_node,
)

__all__ = [
    "Binary", "Const", "Contains", "Expr", "Lookup", "PyFn", "Ternary", "Unary", "Var", "evaluate",
    "COMPARISONS", "NODE_KINDS", "Aggregate", "Constant", "Indices", "Length", "Map", "Node",
    "Program", "Select", "SelectorAnd", "SelectorNot", "SelectorOr", "SelectorWidth", "SequenceMap",
    "SoftmaxAggregate", "SOpNode", "SourcePos", "Tokens", "add_node",
]
