"""The s-ops that read a selector: ``SelectorWidth`` and ``Aggregate``, with tracr's
``selector_width`` and RASP's ``aggregate`` (default 0) functions.
"""

from __future__ import annotations

from typing import Any

from rasp_compiler.graph.nodes import Aggregate as AggregateNode
from rasp_compiler.graph.nodes import SelectorWidth as WidthNode
from rasp_compiler.pyapi.base import Selector, SOp, _atom, _selector
from rasp_compiler.pyapi.sops import _sop


class SelectorWidth(SOp):
    """How many keys each query selects."""

    def __init__(self, selector: Selector) -> None:
        super().__init__(WidthNode, (_selector(selector, "SelectorWidth's input"),))

    @property
    def selector(self) -> Selector:
        return self.inputs[0]  # type: ignore[return-value]


class Aggregate(SOp):
    """Per query: the selected value (one key), their mean (several; numbers), ``default`` (none).
    tracr's ``None`` default becomes RASP's 0, or ``False`` when ``sop`` is built as a boolean
    (a comparison, ``~``, ``&``/``|`` of booleans): then the result holds one type, as tracr's
    ``shift_by`` of a comparison does, and the compiler need not refuse an output that could be
    either ``0`` or ``False`` (Python holds them equal).  ``.default`` is the default used."""

    def __init__(self, selector: Selector, sop: Any, default: Any = None) -> None:
        sop = _sop(sop, "aggregate's s-op")
        if default is None:
            default = False if sop.boolean else 0
        default = _atom(default, "aggregate's default")
        selector = _selector(selector, "Aggregate's selector (its first argument)")
        super().__init__(AggregateNode, (selector, sop), default=default)
        self.boolean = sop.boolean and isinstance(default, bool)

    selector = property(lambda self: self.inputs[0])
    sop = property(lambda self: self.inputs[1])
    default = property(lambda self: self.fields["default"])


def aggregate(selector: Selector, sop: Any, default: Any = 0) -> SOp:
    """``Aggregate`` with RASP's default 0 (``None`` gives tracr's default, see ``Aggregate``)."""
    return Aggregate(selector, sop, default)


def selector_width(selector: Selector) -> SOp:
    """How many keys each query selects."""
    return SelectorWidth(selector)
