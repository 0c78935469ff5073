"""Attention outputs: the value sets and encodings of aggregates and selector widths.

An attention output is a base.  Under a positional selector it is a conditional base, with its
values per (index, length): exact means of a positional s-op, or every mean of w values for each
width w.  Otherwise a mean takes every mean of up to max_len values (``values.means``); one with
too many to list keeps only its range (``unbounded``), which a map or a select may not read.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any, Callable

import numpy as np

from rasp_compiler.compiler.analysis import limits
from rasp_compiler.compiler.analysis.sinfo import SInfo, _preview, is_numeric
from rasp_compiler.compiler.notes import SEVERAL_KEYS
from rasp_compiler.compiler.values import MAX_VALUES, means, sorted_means, sorted_values
from rasp_compiler.graph.nodes import Aggregate, SelectorWidth
from rasp_compiler.graph.semantics import exact_means


class AttentionOutputs:
    """Part of ``Analysis`` (``core``): the ``SInfo`` of aggregates and selector widths."""

    def _aggregate(self, node: Aggregate) -> SInfo:
        sel_id, src = node.inputs
        self.check_predicates(sel_id)
        sinfo = self.info[src]
        enc = node.encoding
        if "unbounded" in sinfo.notes and enc != "categorical":
            nums = [float(v) for v in sinfo.values] + [float(node.default)] \
                if isinstance(node.default, (int, float)) else None
            if nums is None:
                self.require_values(src, node.id)
            info = self._base(node, "free", [min(nums), max(nums)], "numerical")  # type: ignore[arg-type]
            info.notes.append("unbounded")
            return info
        unique = self.at_most_one(sel_id)
        # tracr's numerical mean of booleans (``numerical(tokens == "a")``) averages them as 0/1, and
        # so does the interpreter for an aggregate marked numerical
        booleans = bool(sinfo.values) and all(isinstance(v, bool) for v in sinfo.values)
        numeric = is_numeric(sinfo.values) or (node.encoding == "numerical" and booleans)
        if enc is None:
            if numeric and not unique:
                enc = "numerical"
            elif sinfo.encoding == "numerical" and not (unique and _one_hot_ok(sinfo.values, self.dtype)):
                enc = "numerical"
            else:
                # at most one key: moving a one-hot is exact, and the result can be compared,
                # looked up or decoded without any further conversion
                enc = "categorical"
        if enc == "numerical" and not isinstance(node.default, (int, float)):
            raise self.error(node.id, f"{self.describe(node.id)} is a numerical mean, so its default "
                             f"must be a number, not {node.default!r}",
                             hint="give a numeric default, or select at most one key")
        if enc == "numerical" and not numeric:
            raise self.error(node.id, f"{self.describe(node.id)} averages {self.describe(src)}, "
                             f"which holds non-numbers ({_preview(sinfo.values)})",
                             hint="a numerical aggregate needs numbers; use indicator(...) on booleans")
        agreeing = not unique and enc == "categorical" and self.selected_values_agree(sel_id, src)
        if enc == "categorical" and not unique and numeric and not agreeing:
            raise self.error(node.id, f"{self.describe(node.id)} is categorical, but its selector may "
                             "pick several keys, and the mean of several numbers has no categorical "
                             "encoding", hint="remove categorical(...) so it compiles as a numerical "
                             "mean, select at most one key (compare against indices with ==), or "
                             "aggregate a function of the key that the selector compares with ==")
        widths = self.widths(sel_id)
        default = node.default
        if enc == "categorical":
            values = list(sinfo.values) + [default]
            info = self._base(node, "free", values, enc)
            if widths is not None:  # the selector reads positions only: is it ever empty?
                empty, full = sorted_values([default]), sorted_values(sinfo.values)
                info.base_kind = "cond"
                info.cond = {ctx: (empty if w == 0 else full) for ctx, w in widths.items()}
                info.values = sorted_values(v for vs in info.cond.values() for v in vs)
                info.table = {(v,): v for v in info.values}
            if not unique and not (agreeing and numeric):
                info.notes.append(f"several keys may be selected: {SEVERAL_KEYS} (a mean of non-numbers)")
            return info
        if widths is not None and self.positional(src):
            exact = self._positional_means(sel_id, src, default)
            if exact is not None:
                allv = sorted_values(v for vs in exact.values() for v in vs)
                return self._base(node, "cond", allv, enc, cond=exact)
        per_width: dict[tuple[int, bool], list[Any] | None] = {}

        def mean_set(w: int, ordered: bool = False) -> list[Any]:
            """The means of width ``w``; ``ordered``: as ``sorted_values`` gives them."""
            if (w, ordered) not in per_width:
                if w == 0:
                    got = [default]
                elif unique:  # never more than one key: the values themselves
                    got = list(sinfo.values)
                elif ordered:
                    got = sorted_means(sinfo.values, w, self._sum_cache)
                else:
                    got = means(sinfo.values, w, self._sum_cache)
                if ordered and got is not None and (w == 0 or unique):
                    got = sorted_values(got)
                per_width[(w, ordered)] = got
            got = per_width[(w, ordered)]
            if got is None:
                raise _Unbounded()
            return got
        try:
            return self._mean_info(node, sinfo, widths, mean_set, enc, unique)
        except _Unbounded:
            # Too many possible means to list: fine as an output or as a mean's value; a map or a
            # select reading it is refused (see ``require_values``).
            nums = [float(v) for v in sinfo.values] + [float(default)]
            info = self._base(node, "free", [min(nums), max(nums)], enc)
            info.notes.append("unbounded")
            return info

    def _mean_info(self, node: Aggregate, sinfo: SInfo, widths: Any, mean_set: Callable[..., list],
                   enc: str, unique: bool) -> SInfo:
        default = node.default
        if widths is not None:
            # Every context's value set is listed (and later read) once per context: past
            # limits.MAX_CONDITIONAL_VALUES in all, the mean is taken as unbounded, as one with too
            # many values is, instead of minutes of listing (dyck2 at max_len 2,048: ~10^9)
            per_context = Counter(widths.values())
            by_width, listed = {}, 0
            for w in sorted(per_context):
                by_width[w] = mean_set(w, ordered=True)
                listed += per_context[w] * len(by_width[w])
                if listed > limits.MAX_CONDITIONAL_VALUES:
                    raise _Unbounded()
            cond = dict(zip(widths, map(by_width.__getitem__, widths.values()), strict=True))
            # every context's list, each width's once, in the order the contexts first hold it:
            # the same first value of each group of equal ones (1, 1.0) as reading every context
            allv = sorted_values(itertools.chain.from_iterable(
                map(by_width.__getitem__, dict.fromkeys(widths.values()))))
            # means are floats, which ``sorted_values`` orders without ties: sorting its list
            # again gives it back (not so for the default or the values themselves)
            floats = not unique and 0 not in per_context
            info = self._base(node, "cond", allv, enc, cond=cond, ordered=floats)
        else:
            allv = [default]
            for w in range(1, max(self.lengths) + 1):
                allv.extend(mean_set(w))
                if len(allv) > 4 * MAX_VALUES:
                    raise _Unbounded()
            info = self._base(node, "free", allv, enc)
        return info

    def _positional_means(self, sel_id: str, src: str, default: Any) -> dict | None:
        """A mean of a positional s-op under a positional selector (``1 / mean(indices == 0)`` over
        every position, a prefix mean of a function of the index): one value per (index, length),
        computed as the interpreter computes it (``exact_means``: the exact mean, rounded once).
        Without this its value set is every k/w of the value set's sums, e.g. all ~3N²/π²
        fractions k/n for ``length``.  None when some value is not known at some position."""
        f = self.formula(sel_id)
        cond: dict[tuple[int, int], list[Any]] = {}
        for n in self.lengths:
            vals = [self._positional_value(src, j, n) for j in range(n)]
            if any(v is None or not isinstance(v, (int, float)) for v in vals):
                return None
            sel = self._selection(f, n)
            counts = sel.sum(axis=1)
            mean_of = dict(zip(np.nonzero(counts > 1)[0].tolist(), exact_means(vals, sel[counts > 1]),
                               strict=True))   # as the interpreter computes them
            for i in range(n):
                c = int(counts[i])
                if c == 0:
                    cond[(i, n)] = [default]
                elif c == 1:
                    cond[(i, n)] = [vals[int(sel[i].argmax())]]
                else:
                    cond[(i, n)] = [mean_of[i]]
        return cond

    def require_values(self, sid: str, reader: str) -> None:
        """Refuse to tabulate a function of an s-op whose values could not be enumerated."""
        if "unbounded" in self.info[sid].notes:
            raise self.error(reader, f"{self.describe(reader)} reads {self.describe(sid)}, a mean with "
                             "too many possible values to enumerate",
                             hint="average fewer distinct values (e.g. 0/1 indicators), or compile "
                                  "with a smaller --max-len")

    def _selector_width(self, node: SelectorWidth) -> SInfo:
        self.check_predicates(node.inputs[0])
        enc = node.encoding or "categorical"
        widths = self.widths(node.inputs[0])
        if widths is not None:
            # one list per width, shared by its contexts (as ``shared_lists`` would make them,
            # without keying one list per context)
            lists = {w: [w] for w in widths.values()}
            cond = dict(zip(widths, map(lists.__getitem__, widths.values()), strict=True))
            return self._base(node, "cond", sorted(lists), enc, cond=cond)
        return self._base(node, "free", list(range(0, max(self.lengths) + 1)), enc)


class _Unbounded(Exception):
    pass


def _one_hot_ok(values: list[Any], dtype: str, limit: int = 512) -> bool:
    """Whether a numerical s-op with these values can be turned into a one-hot exactly."""
    from rasp_compiler.compiler.numeric import projection

    if len(values) > limit:
        return False
    return projection([((float(v),), v) for v in values], [max(abs(float(v)) for v in values)],
                      dtype) is not None
