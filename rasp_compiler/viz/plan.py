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

from rasp_compiler.viz.common import image_size

from rasp_compiler.graph.nodes import Program

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


def place_nodes(program: Program, plan: list[dict]) -> dict[str, Placement]:
    """Where each node of ``program`` is computed, from a compiled model's plan."""
    place: dict[str, Placement] = {}
    for lp in plan:
        layer = lp["layer"]
        for h in lp["heads"]:
            if h["node"] in program.graph and h["node"] not in place:
                place[h["node"]] = Placement(1 + 2 * layer, f"L{layer} head {h['head']}")
        for op in (lp.get("mlp") or {}).get("ops", []):
            if op["node"] in program.graph and op["node"] not in place:
                place[op["node"]] = Placement(2 + 2 * layer, f"L{layer} MLP")
    graph = program.graph
    order = list(nx.lexicographical_topological_sort(graph))
    # Unplaced nodes: selectors go with the head reading them; maps with the MLP they were fused
    # into (their nearest placed reader); everything depending only on embeddings is embedded.
    for nid in reversed(order):
        if nid in place:
            continue
        node = graph.nodes[nid]["node"]
        readers = [place[s] for s in graph.successors(nid) if s in place]
        if node.is_selector and readers:
            first = min(readers, key=lambda p: p.column)
            place[nid] = Placement(first.column, first.unit)
        elif readers and any(p.column > 0 and p.unit.endswith("MLP") for p in readers) and \
                node.kind in ("map", "sequence_map"):
            first = min((p for p in readers if p.unit.endswith("MLP")), key=lambda p: p.column)
            place[nid] = Placement(first.column, first.unit, fused=True)
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
    text = " ".join(text.split())
    if len(text) > width:
        text = text[: width - 1] + "…"
    label = nid if not text or text == nid else f"{nid}\n{text}"
    if getattr(node, "encoding", None):
        label += f"\n[{node.encoding}]"
    return label + ("\n(fused)" if fused else "")


def column_titles(n_layers: int) -> list[str]:
    titles = ["embedding"]
    for layer in range(n_layers):
        titles += [f"layer {layer}\nattention", f"layer {layer}\nMLP"]
    return titles


def draw_plan(program: Program, plan: list[dict], path: str, title: str | None = None,
              fmt: str | None = None) -> PlanPicture:
    """Draw ``program`` laid out by ``plan`` (a compiled model's ``config["plan"]``) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    place = place_nodes(program, plan)
    n_layers = len(plan)
    n_cols = 1 + 2 * n_layers
    columns: dict[int, list[str]] = {}
    for nid in nx.lexicographical_topological_sort(program.graph):
        columns.setdefault(place[nid].column, []).append(nid)
    tallest = max(len(v) for v in columns.values())
    pos = {}
    for col, nids in columns.items():
        for k, nid in enumerate(nids):
            pos[nid] = (col * 3.0, -(k - (len(nids) - 1) / 2) * 1.6)
    units = sorted({p.unit for p in place.values()},
                   key=lambda u: (min(p.column for p in place.values() if p.unit == u), u))
    cmap = plt.get_cmap("tab20")
    colour = {u: ((0.85, 0.85, 0.85, 1.0) if u == EMBED else cmap(i % 20)) for i, u in enumerate(units)}
    labels = {nid: node_label(program, nid, place[nid].fused) for nid in program.graph}

    fig_w = max(8.0, 2.6 * n_cols + 3.0)
    fig_h = max(5.0, 1.25 * tallest + 2.5)
    fig, ax = plt.subplots(figsize=(fig_w, fig_h))
    for col in range(n_cols):
        if col % 2 == 1:
            ax.axvspan(col * 3.0 - 1.5, col * 3.0 + 1.5, color=(0.96, 0.96, 1.0), zorder=0)
    selectors = [n for n in program.graph if program.node(n).is_selector]
    sops = [n for n in program.graph if n not in selectors]
    nx.draw_networkx_edges(program.graph, pos, ax=ax, arrows=True, arrowsize=12, edge_color="0.45",
                           node_size=2600, connectionstyle="arc3,rad=0.08")
    for group, shape in ((sops, "o"), (selectors, "s")):
        if group:
            nx.draw_networkx_nodes(program.graph, pos, nodelist=group, node_shape=shape, ax=ax,
                                   node_color=[colour[place[n].unit] for n in group], node_size=2600,
                                   edgecolors="0.25", linewidths=1.2 if shape == "o" else 1.8)
    nx.draw_networkx_labels(program.graph, pos, labels=labels, ax=ax, font_size=7.5)
    top = max(y for _, y in pos.values()) + 1.3
    for col, t in enumerate(column_titles(n_layers)):
        ax.text(col * 3.0, top, t, ha="center", va="bottom", fontsize=9, fontweight="bold")
    handles = [Patch(facecolor=colour[u], edgecolor="0.25", label=u) for u in units]
    handles.append(Patch(facecolor="white", edgecolor="0.25", label="circle: s-op   square: selector"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, title="computed by")
    ax.set_title(title or f"{program.source_file or 'program'}: output {program.output}", fontsize=11)
    ax.set_xlim(-1.8, (n_cols - 1) * 3.0 + 1.8)
    ax.set_ylim(min(y for _, y in pos.values()) - 1.2, top + 1.0)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, format=fmt, dpi=100)
    plt.close(fig)
    size = image_size(path)
    return PlanPicture(path, labels, units, place, size)  # type: ignore[arg-type]
