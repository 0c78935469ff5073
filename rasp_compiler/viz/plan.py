"""The picture of a compiled program: its graph, laid out by the schedule.

Columns are the model's sublayers in order (embedding, layer 0 attention, layer 0 MLP, …); each
node sits in the column of the sublayer that computes it and is coloured by that unit (a head or
an MLP).  A selector is drawn with the head that uses it; a map the compiler fused into a later
MLP is drawn with that MLP (its label says "fused").  Labels are the node's id and its source
text.  ``draw_plan`` returns what it drew (labels, units) so tests can check the picture.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from rasp_compiler.errors import UserError
from rasp_compiler.graph.nodes import Program
from rasp_compiler.viz.common import (
    check_picture_path,
    image_size,
    notes_missing_glyphs,
    shorten,
    write_figure,
)

EMBED = "embedding"


@dataclass
class Placement:
    column: int  # 0 = embedding, 1 + 2*layer = attention, 2 + 2*layer = MLP
    unit: str  # legend entry: "embedding", "L0 head 1", "L1 MLP"
    fused: bool = False


@dataclass
class PlanPicture:
    path: str
    labels: dict[str, str]  # node id -> label drawn
    units: list[str]  # legend entries in column order
    placement: dict[str, Placement] = field(default_factory=dict)
    size_px: tuple[int, int] = (0, 0)
    captions: dict[int, list[str]] = field(default_factory=dict)  # column -> work without a box


def embedded_nodes(plan: list[dict], residual: list[dict] | None) -> set[str]:
    """Nodes the residual stream holds (config ``residual``) that no head or MLP of ``plan``
    writes: the embedding computes them (a map of tokens and indices folded into it)."""
    if not residual:
        return set()
    touched = set()
    for lp in plan:
        for h in lp["heads"]:
            touched |= set(h.get("nodes", [h["node"]]))
        touched |= {op["node"] for op in (lp.get("mlp") or {}).get("ops", [])}
    return {f["node"] for f in residual if f.get("node")} - touched


def _graph_id(nid: str, program: Program) -> str:
    """The program node a plan entry computes: the lowering names its parts after the node
    (``place.part1.mass`` for ``place``), so the longest dotted prefix that is a node."""
    parts = nid.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in program.graph:
            return ".".join(parts[:end])
    return nid


def place_nodes(program: Program, plan: list[dict],
                residual: list[dict] | None = None) -> dict[str, Placement]:
    """Where each node of ``program`` is computed, from a compiled model's plan (and, when given,
    its config's ``residual`` layout, which says which maps the embedding holds)."""
    place: dict[str, Placement] = {}
    helped: dict[str, Placement] = {}  # node -> the first MLP writing another form of it
    for lp in plan:
        layer = lp["layer"]
        for h in lp["heads"]:
            for nid in h.get("nodes", [h["node"]]):   # a shared head computes several nodes
                nid = _graph_id(nid, program)
                if nid in program.graph and nid not in place:
                    place[nid] = Placement(1 + 2 * layer, f"L{layer} head {h['head']}")
        for op in (lp.get("mlp") or {}).get("ops", []):
            # helper ops (a product encoding, a numerical-to-one-hot conversion) name a node
            # they read; only the op that writes the node itself computes it
            if op.get("writes") != op["node"]:
                helped.setdefault(op["node"], Placement(2 + 2 * layer, f"L{layer} MLP"))
                continue
            if op["node"] in program.graph and op["node"] not in place:
                place[op["node"]] = Placement(2 + 2 * layer, f"L{layer} MLP")
    graph = program.graph
    # before the reverse pass: a map the embedding holds is not "fused" into a later MLP reader
    for nid in embedded_nodes(plan, residual) & set(graph.nodes):
        place.setdefault(nid, Placement(0, EMBED))
    order = list(nx.lexicographical_topological_sort(graph))
    # Unplaced nodes: selectors go with the head reading them; maps with the MLP they were fused
    # into (their nearest placed reader); everything depending only on embeddings is embedded.
    for nid in reversed(order):
        if nid in place:
            continue
        node = graph.nodes[nid]["node"]
        readers = [place[s] for s in graph.successors(nid) if s in place]
        if nid in helped and node.kind in ("map", "sequence_map"):
            place[nid] = helped[nid]  # held in another encoding (e.g. `map_1:num`, a query)
        elif any(p.column == 0 for p in readers) and not node.is_selector:
            place[nid] = Placement(0, EMBED)  # folded into an embedded reader: computed there
        elif node.is_selector and readers:
            first = min(readers, key=lambda p: p.column)
            place[nid] = Placement(first.column, first.unit)
        elif readers and any(p.column > 0 and p.unit.endswith("MLP") for p in readers) and \
                node.kind in ("map", "sequence_map") and \
                min(p.column for p in readers if p.unit.endswith("MLP")) <= min(p.column for p in readers):
            # fused into an MLP only when no earlier head reads it (a head reads the residual, so
            # the value was there before that MLP); otherwise the forward pass below places it
            first = min((p for p in readers if p.unit.endswith("MLP")), key=lambda p: p.column)
            place[nid] = Placement(first.column, first.unit, fused=True)
        elif readers and node.kind in ("map", "sequence_map") and \
                min(readers, key=lambda p: p.column).column % 2 == 1:
            first = min(readers, key=lambda p: p.column)
            if any(a in place and place[a].column > 0 for a in nx.ancestors(graph, nid)):
                # it reads a sublayer's output, so no embedding holds it: the head that reads it
                # scores it straight from that output (tracr's sort_freq keys, -hist + index/N)
                place[nid] = Placement(first.column, first.unit, fused=True)
            else:
                # a head reads it from the residual and no MLP op writes it: only the embedding can
                place[nid] = Placement(0, EMBED)
    for nid in order:
        if nid in place:
            continue
        preds = [place[i] for i in graph.predecessors(nid) if i in place]
        latest = max(preds, key=lambda p: p.column, default=None)
        place[nid] = (Placement(0, EMBED) if latest is None or latest.column == 0
                      else Placement(latest.column, latest.unit, fused=True))
    return place


def node_label(program: Program, nid: str, fused: bool = False, width: int = 34) -> str:
    node = program.node(nid)
    text = node.pos.text if node.pos is not None and node.pos.text else ""
    text = shorten(text, width)
    label = nid if not text or text == nid else f"{nid}\n{text}"
    if getattr(node, "encoding", None):
        label += f"\n[{node.encoding}]"
    return label + ("\n(fused)" if fused else "")


def column_titles(n_layers: int) -> list[str]:
    titles = ["embedding"]
    for layer in range(n_layers):
        titles += [f"layer {layer}\nattention", f"layer {layer}\nMLP"]
    return titles


def unit_captions(plan: list[dict], place: dict[str, Placement]) -> dict[int, list[str]]:
    """Per column, the heads and MLP ops that have no box of their own: a second head of a split
    selector width, the MLP that decodes a width into its node, product encodings, conversions.
    Without these a column can look empty although the plan puts work there."""
    captions: dict[int, list[str]] = {}
    for lp in plan:
        layer = lp["layer"]
        for h in lp["heads"]:
            unit = f"L{layer} head {h['head']}"
            if all(nid in place and place[nid].unit != unit for nid in h.get("nodes", [h["node"]])):
                captions.setdefault(1 + 2 * layer, []).append(f"head {h['head']}: {h['kind']} → {h['node']}")
        for op in (lp.get("mlp") or {}).get("ops", []):
            own_box = op.get("writes") == op["node"] and op["node"] in place and \
                place[op["node"]].column == 2 + 2 * layer
            if not own_box:
                captions.setdefault(2 + 2 * layer, []).append(f"{op['kind']} → {op['writes']}")
    return captions


def _program_and_plan(program: Any, plan: Any, max_len: int | None) -> Program:
    """The program to draw: ``program`` (a Python-API s-op: its program) as the compiler compiled
    it for ``max_len`` (``rewrites.rewritten``; without ``max_len``, with alike nodes merged, or
    as given where it is a model's ``compiled_program``), checked to be the one ``plan`` is of:
    the plan of another program drew only an embedding column, with no error."""
    if hasattr(program, "program") and not isinstance(program, Program):
        program = program.program()  # a Python-API s-op, as pyapi.compile_program takes it
    if not isinstance(program, Program):
        # None is the usual one: a loaded model's compiled_program, which is not saved
        hint = ("model.compiled_program is None for a model loaded from disk (the program is not "
                "saved): pass the program or s-op you compiled, with the compile's max_len=, or draw "
                "the .rasp file with rasp show" if program is None
                else "draw_plan(program, model.plan, path)")
        raise UserError(f"draw_plan takes a Program (or a Python-API s-op), got {type(program).__name__}",
                        hint=hint)
    if not isinstance(plan, (list, tuple)) or not all(isinstance(lp, dict) and "heads" in lp for lp in plan):
        raise UserError("draw_plan's plan is a compiled model's plan (model.plan), got "
                        f"{type(plan).__name__}",
                        hint="draw_plan(program, model.plan, path, residual=model.config['residual'])")
    from rasp_compiler.compiler.rewrites import rewritten, shared_subexpressions

    if max_len is not None and (isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1):
        raise UserError(f"draw_plan's max_len is the compile's, a positive integer, got {max_len!r}")
    # the graph as compiled: a node merged into an alike one is computed where that one is, and a
    # hand-made count a selector width computes (rewrites) is drawn as that width
    drawn = shared_subexpressions(program) if max_len is None else rewritten(program, max_len)
    computed = sorted({nid for lp in plan for h in lp["heads"] for nid in h.get("nodes", [h["node"]])}
                      | {op["node"] for lp in plan for op in (lp.get("mlp") or {}).get("ops", [])})
    missing = [nid for nid in computed if _graph_id(nid, drawn) not in drawn.graph]
    if missing:
        shown = ", ".join(missing[:5]) + (", …" if len(missing) > 5 else "")
        if max_len is None:
            raise UserError("the plan is of another program, or of this one after the compiler's "
                            f"rewrites: it computes {shown}, which this program does not have",
                            hint="draw the program the model compiled: draw_plan(model.compiled_program, "
                                 "model.plan, path), or pass the compile's max_len=")
        raise UserError(f"the plan is of another program: it computes {shown}, which this program "
                        f"does not have (as compiled for max_len {max_len})",
                        hint="draw the program the model compiled: draw_plan(model.compiled_program, "
                             "model.plan, path)")
    return drawn


@notes_missing_glyphs
def draw_plan(program: Program, plan: list[dict], path: str, title: str | None = None,
              fmt: str | None = None, residual: list[dict] | None = None,
              max_len: int | None = None) -> PlanPicture:
    """Draw ``program`` laid out by ``plan`` (a compiled model's ``config["plan"]``) to ``path``.
    Pass ``residual`` (``config["residual"]``) so maps the embedding holds are drawn there.
    The compiler compiles a program after its rewrites (a count through a hand-made BOS becomes
    a selector width, ``compiler.rewrites``): pass the model's ``compiled_program``, or the
    program and the compile's ``max_len``, to draw what was compiled. Nodes that survive the
    rewrites keep their ids; a node a rewrite adds is named after the one it serves."""
    program = _program_and_plan(program, plan, max_len)
    check_picture_path(path, fmt)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    place = place_nodes(program, plan, residual)
    n_layers = len(plan)
    n_cols = 1 + 2 * n_layers
    # only what the output depends on: a file may define several programs (paper_examples.rasp)
    graph = program.graph.subgraph(nx.ancestors(program.graph, program.output) | {program.output})
    columns: dict[int, list[str]] = {}
    for nid in nx.lexicographical_topological_sort(graph):
        columns.setdefault(place[nid].column, []).append(nid)
    tallest = max(len(v) for v in columns.values())
    pos = {}
    for col, nids in columns.items():
        for k, nid in enumerate(nids):
            pos[nid] = (float(col), -(k - (len(nids) - 1) / 2) * 1.0)
    shown = {nid: place[nid] for nid in graph}
    units = sorted({p.unit for p in shown.values()},
                   key=lambda u: (min(p.column for p in shown.values() if p.unit == u), u))
    cmap = plt.get_cmap("tab20")
    colour = {u: ((0.85, 0.85, 0.85, 1.0) if u == EMBED else cmap(i % 20)) for i, u in enumerate(units)}
    labels = {nid: node_label(program, nid, place[nid].fused) for nid in graph}

    fig_w = max(8.0, 2.5 * n_cols + 2.6)
    fig_h = max(4.5, 0.95 * tallest + 2.0)
    fig, ax = plt.subplots(figsize=(fig_w, fig_h))
    ax.set_xlim(-0.6, n_cols - 0.4)
    ys = [y for _, y in pos.values()]
    top = max(ys) + 1.0
    ax.set_ylim(min(ys) - 0.8, top + 0.9)
    ax.axis("off")
    for col in range(n_cols):
        if col % 2 == 1:
            ax.axvspan(col - 0.5, col + 0.5, color=(0.95, 0.95, 1.0), zorder=0)
    for col, t in enumerate(column_titles(n_layers)):
        ax.text(col, top, t, ha="center", va="bottom", fontsize=10, fontweight="bold")
    boxes = {}
    for nid, (x, y) in pos.items():
        shape = "square,pad=0.35" if program.node(nid).is_selector else "round,pad=0.35"
        boxes[nid] = ax.text(x, y, labels[nid], ha="center", va="center", fontsize=8.5, zorder=3,
                             bbox={"boxstyle": shape, "fc": colour[place[nid].unit], "ec": "0.25",
                                   "lw": 1.6 if program.node(nid).is_selector else 1.0})
    fig.canvas.draw()  # box sizes are known only after a draw; arrows attach to the boxes
    for src, dst in graph.edges():
        a, b = boxes[src], boxes[dst]
        ax.annotate("", xy=(0.5, 0.5), xycoords=b, xytext=(0.5, 0.5), textcoords=a, zorder=2,
                    arrowprops={"arrowstyle": "-|>", "color": "0.4", "lw": 1.0, "shrinkA": 2, "shrinkB": 2,
                                "patchA": a.get_bbox_patch(), "patchB": b.get_bbox_patch(),
                                "connectionstyle": "arc3,rad=0.12"})
    captions = unit_captions(plan, place)
    for column, lines in captions.items():
        ax.text(column, min(ys) - 0.6, "\n".join(lines[:6]), ha="center", va="bottom",
                fontsize=8, color="0.35", style="italic")
    handles = [Patch(facecolor=colour[u], edgecolor="0.25", label=u) for u in units]
    handles.append(Patch(facecolor="white", edgecolor="white", label="rounded: s-op, square: selector"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=9, title="computed by")
    ax.set_title(title or f"{program.source_file or 'program'}: output {program.output}", fontsize=11)
    fig.tight_layout()
    write_figure(fig, path, fmt)
    size = image_size(path)
    return PlanPicture(path, labels, units, place, size, captions)  # type: ignore[arg-type]
