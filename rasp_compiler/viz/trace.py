"""The picture of a compiled model running on one input: attention patterns and residual streams.

Top row: every head's attention pattern (queries down, keys across, BOS first), titled with the
layer, head and the select it implements.  Below: the residual stream after the embedding and
after each layer as a heatmap — one row per residual dimension, labelled ``s-op:value`` (one-hot
dimensions) or ``s-op`` (numerical ones), one column per position — as tracr's plots are.
Each row is coloured relative to its own largest |value| (over all positions and stages): one
numerical dimension holding, say, ``length - indices - 1`` (up to 63 at 64 tokens) would otherwise
set the scale and wash every one-hot row out to white.  A row whose scale is not 1 says so in its
tick label (``map_1:num (±63)``).  A colour bar beside the heads and one beside the residual give
the two scales (attention weight 0 to 1; value ÷ row scale, −1 to +1).  The layout is computed in
inches from the texts it holds (titles, position and row labels), so no band of the figure is left
empty however many rows of heads there are.  ``draw_trace`` returns the titles and row labels it
drew and the scales.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rasp_compiler.errors import InputError, UserError
from rasp_compiler.viz.common import (
    check_picture_path,
    image_size,
    notes_missing_glyphs,
    shorten,
    write_figure,
)

if TYPE_CHECKING:  # torch, loaded only where a model is drawn (`rasp show PROGRAM` draws none)
    from rasp_compiler.runtime import RaspModel


@dataclass
class TracePicture:
    path: str
    head_titles: list[str]
    residual_labels: list[str]
    stages: list[str]
    size_px: tuple[int, int]
    row_scales: list[float] = field(default_factory=list)  # the |value| drawn at full colour, per row


def head_descriptions(model: RaspModel) -> list[list[str]]:
    """Per layer, per head: the select the head implements, as the source text the plan recorded
    at compile time (a model saved before plans held it: read from the program file if found).
    Heads whose select reads the same but which were made by different calls of a function (or
    passes of a loop) gain a third line: the call and loop values that made each (the plan's
    ``context``: ``↳ entry_at(t * k + m), m = 0``)."""
    program = None
    path = model.config.get("program")
    recorded = all("selector" in h for lp in model.config.get("plan", []) for h in lp["heads"]
                   if h["kind"] != "length")
    if path and not recorded:
        try:
            from rasp_compiler.lang import load_program

            program = load_program(path)
        except Exception:  # the program file moved or changed since compiling: use the plan
            program = None
    texts, contexts = [], []
    for lp in model.config.get("plan", []):
        for h in lp["heads"]:
            text = h.get("selector") or h.get("text") or h["node"]
            context = h.get("context") or ""
            if "selector" not in h and program is not None and h["node"] in program.graph:
                node = program.node(h["node"])
                context = context or (node.pos.context if node.pos is not None else "")
                if node.inputs and program.node(node.inputs[0]).is_selector:
                    sel = program.node(node.inputs[0])
                    text = sel.pos.text if sel.pos is not None and sel.pos.text else sel.id
                    context = context or (sel.pos.context if sel.pos is not None else "")
            texts.append(text)
            contexts.append(context)
    # a select text shared by heads made in different calls or loop passes: the context tells
    # them apart (the two heads of one split width share theirs, and gain nothing)
    told = {t for t in texts if len({c for t2, c in zip(texts, contexts, strict=True) if t2 == t}) > 1}
    out = []
    k = 0
    for lp in model.config.get("plan", []):
        row = []
        for h in lp["heads"]:
            text, context = texts[k], contexts[k]
            k += 1
            kind = {"width": "selector_width"}.get(h["kind"], h["kind"])
            part = re.search(r"\.part(\d+)\.", h.get("writes", ""))
            if part:  # one head of a width split by the disjuncts of its selector
                kind += f" (disjunct {part.group(1)})"
            nodes = h.get("nodes", [h["node"]])
            named = ", ".join(nodes) if len(nodes) <= 2 else f"{nodes[0]} and {len(nodes) - 1} more"
            title = f"{shorten(f'{kind} → {named}', 52)}\n{shorten(text, 44)}"
            if text in told and context:
                title += f"\n↳ {shorten(context, 46)}"
            row.append(title)
        out.append(row)
    return out


def row_scales(residuals: list[Any]) -> list[float]:
    """Per residual dimension, its largest |value| over every stage and the input's positions
    (not BOS, whose numbers mean nothing to the program: 1 where a row is 0 on every position, so
    an unused row stays blank rather than dividing by zero)."""
    import torch

    stacked = torch.stack([r[0, 1:].double().abs().amax(dim=0) for r in residuals])  # [stage, dim]
    peak = stacked.amax(dim=0)
    return [float(v) if float(v) > 1e-12 else 1.0 for v in peak]


def _row_label(label: str, scale: float) -> str:
    return label if abs(scale - 1.0) < 1e-6 else f"{label} (±{scale:.3g})"


# ids the elaborator and the Python API make up for unnamed s-ops: their rows alone say nothing
_MADE_UP = re.compile(r"(map|sequence_map|aggregate|selector_width|constant|full)_\d+")


def source_texts(model: RaspModel) -> dict[str, str]:
    """Node id -> its source text, from the plan (heads and MLP ops), for made-up ids only.  Ids
    made by one line run several times (a function's body, a loop) share their text: theirs gains
    the context the plan recorded (`↳ m = 0`), as the heads' titles do."""
    found: dict[str, tuple[str, str]] = {}
    for lp in model.config.get("plan", []):
        entries = list(lp["heads"]) + list((lp.get("mlp") or {}).get("ops", []))
        for e in entries:
            if e.get("text") and _MADE_UP.fullmatch(e["node"]) and e["text"] != e["node"]:
                found.setdefault(e["node"], (e["text"], e.get("context") or ""))
    contexts: dict[str, set[str]] = {}
    for text, context in found.values():
        contexts.setdefault(text, set()).add(context)
    return {node: f"{text} ↳ {context}" if context and len(contexts[text]) > 1 else text
            for node, (text, context) in found.items()}


def _with_source(labels: list[str], texts: dict[str, str]) -> list[str]:
    """Each made-up id's first row gains its source text: `map_7:0 = depth < 0`."""
    seen: set[str] = set()
    out = []
    for lab in labels:
        feature = lab.split(":", 1)[0]
        if feature in texts and feature not in seen:
            seen.add(feature)
            lab = f"{lab} = {shorten(texts[feature], 28)}"
        out.append(lab)
    return out


def _check_one_input(model: RaspModel, tokens: Any) -> None:
    """Refuse a batch, which the model reads as one input of unknown tokens: ``["abc"]`` is one
    input only where the model reads "abc" as a token."""
    if not isinstance(tokens, (list, tuple)):
        return
    nested = any(isinstance(t, (list, tuple)) for t in tokens)
    one_text = len(tokens) == 1 and isinstance(tokens[0], str) and len(tokens[0]) > 1
    if not (nested or one_text):
        return
    try:
        model.encode_inputs([tokens])
    except InputError:
        first = tokens[0] if one_text or isinstance(tokens[0], (list, tuple)) else tokens
        raise InputError(f"draw_trace takes one input (a string or a list of tokens), not a batch: "
                         f"got {shorten(repr(list(tokens)), 60)}",
                         hint=f"draw_trace(model, {shorten(repr(first), 40)}, path)") from None


@notes_missing_glyphs
def draw_trace(model: RaspModel, tokens: list[Any] | str, path: str, fmt: str | None = None) -> TracePicture:
    """Draw ``model`` running on one input (a string or a list of tokens) to ``path``: every
    head's attention pattern and the residual stream after each layer.  ``fmt`` overrides the
    format the suffix names."""
    from rasp_compiler.runtime import RaspModel

    if not isinstance(model, RaspModel):
        # tracr's compile_rasp_to_model returns the compiled model wrapped: say where it is, and
        # that the input here has no BOS (apply's layout would draw BOS as a token, or be refused)
        hint = ("pass its .model: draw_trace(assembled.model, tokens, path), the tokens without BOS"
                if isinstance(getattr(model, "model", None), RaspModel)
                else "compile it first: rasp_compiler.pyapi.compile_program(sop, vocab, max_len)")
        raise UserError(f"draw_trace takes a compiled model (compile_program(...)), got "
                        f"{type(model).__name__}", hint=hint)
    _check_one_input(model, tokens)
    check_picture_path(path, fmt)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    trace = model.trace([tokens])
    residuals = trace["residuals"]
    attention = trace["attention"]
    labels = list(trace["labels"])
    real = (model.config.get("input") or {}).get("kind") == "numerical"
    # a real-valued input's values repeat and say nothing of where they are: name the position too
    axis_tokens = ["BOS"] + [f"{i}: {t:g}" if real and isinstance(t, (int, float)) else str(t)
                             for i, t in enumerate(tokens)]
    descriptions = head_descriptions(model)
    heads = [(li, h) for li, layer in enumerate(attention) for h in range(layer.shape[1])]
    n_layers = len(model.config["layers"])
    # the residual after the embedding and after each whole layer (attention + MLP)
    stages = [("embedding", residuals[0])]
    stages += [(f"after layer {li}", residuals[2 + 2 * li]) for li in range(n_layers)]

    n_pos = len(axis_tokens)
    d = len(labels)
    titles = []
    for li, h in heads:
        desc = descriptions[li][h] if li < len(descriptions) and h < len(descriptions[li]) else ""
        titles.append(f"layer {li} head {h}: {desc}")
    scales = row_scales([r for _, r in stages])
    row_labels = [_row_label(lab, sc) for lab, sc in
                  zip(_with_source(labels, source_texts(model)), scales, strict=True)]
    shown = "".join(tokens) if all(isinstance(t, str) and len(t) == 1 for t in tokens) else str(tokens)
    try:
        output = model.run([tokens])[0]
        answer = ("".join(output) if all(isinstance(t, str) and len(t) == 1 for t in output) else
                  "[" + ", ".join(f"{v:.4g}" if isinstance(v, float) else repr(v) for v in output) + "]")
        answer = shorten(answer, 90)
    except Exception as err:  # noqa: BLE001 - an input without an answer is still worth drawing
        answer = f"no answer ({type(err).__name__})"
    settings = [label for label, on in (("causal", model.config.get("causal")),
                                        (f"fixed length {model.config.get('fixed_length')}",
                                         model.config.get("fixed_length")),
                                        ("float64", model.config.get("dtype") == "float64")) if on]
    heading = (f"{model.config.get('program') or 'model'} on {shown} → {answer}"
               + (f"  [{', '.join(settings)}]" if settings else "")
               + "\neach residual row is scaled to its largest |value| on the input (the ±x in its "
                 "label; 1 where none)")

    # The layout, in inches from the top left, sized by the texts it must hold: a band of heads (up
    # to 4 a row, each a square of one cell per position) above the residual panels, with nothing
    # left over between them (a grid of fixed fractions left an empty band above the heads).
    fig = plt.figure(figsize=(8.0, 8.0), dpi=100)
    renderer = fig.canvas.get_renderer()

    def extent(text: str, size: float) -> tuple[float, float]:
        """(width, height) in inches of ``text`` drawn at ``size`` points."""
        t = fig.text(0, 0, text, fontsize=size)
        box = t.get_window_extent(renderer)
        t.remove()
        return box.width / fig.dpi, box.height / fig.dpi

    cell = 0.32
    tick = max(extent(t, 7)[0] for t in axis_tokens)  # the longest position label
    head_cols = max(1, min(len(heads), 4))
    head_rows = math.ceil(len(heads) / head_cols) if heads else 0
    side = max(2.0, cell * n_pos)  # a head's square
    label_w = tick + 0.32  # a head's query labels and the word "query", left of its square
    below = tick + 0.36  # a square's key labels and the word "key"
    title_w = max((extent(t, 7.5)[0] for t in titles), default=0.0)
    pitch = max(label_w + side + 0.3, title_w + 0.25)  # from one head's square to the next
    rows_w = max((extent(t, 6.5)[0] for t in row_labels), default=0.0) + 0.12
    left = max(label_w, rows_w) + 0.1
    heads_w = (head_cols - 1) * pitch + side
    stage_gap = 0.08
    stage_w = max(2.0, cell * n_pos + 0.3)
    resid_w = max(len(stages) * stage_w + (len(stages) - 1) * stage_gap, heads_w)
    stage_w = (resid_w - (len(stages) - 1) * stage_gap) / len(stages)
    resid_h = max(2.0, 0.15 * d)
    bar_w, bar_gap = 0.12, 0.15  # a colour bar, and its distance from what it explains
    fig_w = left + max(heads_w, resid_w) + bar_gap + bar_w + 0.8

    boxes: list[tuple[str, float, float, float, float]] = []  # (what, x, y from top, width, height)
    y = 0.1 + extent(heading, 9)[1] + 0.2
    for r in range(head_rows):
        in_row = titles[r * head_cols:(r + 1) * head_cols]
        y += max(extent(t, 7.5)[1] for t in in_row) + 0.12
        for c in range(len(in_row)):
            boxes.append(("head", left + c * pitch, y, side, side))
        if r == 0:  # one bar for every head: the same scale
            boxes.append(("attention bar", left + (len(in_row) - 1) * pitch + side + bar_gap, y,
                          bar_w, min(side, 3.0)))
        y += side + below + 0.3
    y += extent("residual", 8)[1] + 0.12
    for k in range(len(stages)):
        boxes.append(("stage", left + k * (stage_w + stage_gap), y, stage_w, resid_h))
    boxes.append(("residual bar", left + resid_w + bar_gap, y, bar_w, min(resid_h, 3.0)))
    fig_h = y + resid_h + tick + 0.2
    fig.set_size_inches(fig_w, fig_h)

    def axes(x: float, top: float, w: float, h: float, label: str):
        return fig.add_axes((x / fig_w, 1 - (top + h) / fig_h, w / fig_w, h / fig_h), label=label)

    head_boxes = [b for b in boxes if b[0] == "head"]
    stage_boxes = [b for b in boxes if b[0] == "stage"]
    pattern_image = None
    for k, (li, h) in enumerate(heads):
        ax = axes(*head_boxes[k][1:], label=f"head {li}.{h}")
        pattern = attention[li][0, h].double().numpy()
        pattern_image = ax.imshow(pattern, cmap="Blues", vmin=0.0, vmax=1.0)
        ax.set_xticks(range(n_pos), axis_tokens, fontsize=7, rotation=90)
        ax.set_yticks(range(n_pos), axis_tokens, fontsize=7)
        ax.set_xlabel("key", fontsize=7)
        ax.set_ylabel("query", fontsize=7)
        ax.set_title(titles[k], fontsize=7.5)
    if pattern_image is not None:
        (_, x, top, w, h), = [b for b in boxes if b[0] == "attention bar"]
        bar = fig.colorbar(pattern_image, cax=axes(x, top, w, h, label="attention colour bar"),
                           ticks=[0, 0.5, 1])
        bar.ax.set_yticklabels(["0", "0.5", "1"])
        bar.ax.tick_params(labelsize=6.5)
        bar.set_label("attention weight", fontsize=7)
    per_row = np.array(scales)[:, None]
    for k, (name, resid) in enumerate(stages):
        ax = axes(*stage_boxes[k][1:], label=f"residual {name}")
        values = resid[0].double().numpy().T / per_row  # rows: residual dims, columns: positions
        resid_image = ax.imshow(values, cmap="RdBu_r", vmin=-1.0, vmax=1.0, aspect="auto",
                                interpolation="nearest")
        ax.set_xticks(range(n_pos), axis_tokens, fontsize=7, rotation=90)
        ax.set_yticks(range(d), row_labels if k == 0 else [""] * d, fontsize=6.5)
        ax.set_title(f"residual {name}", fontsize=8)
    (_, x, top, w, h), = [b for b in boxes if b[0] == "residual bar"]
    bar = fig.colorbar(resid_image, cax=axes(x, top, w, h, label="residual colour bar"), ticks=[-1, 0, 1])
    bar.ax.set_yticklabels(["−1", "0", "+1"])
    bar.ax.tick_params(labelsize=6.5)
    bar.set_label("value ÷ row scale", fontsize=7)
    fig.suptitle(heading, fontsize=9, x=(left + max(heads_w, resid_w) / 2) / fig_w, y=1 - 0.1 / fig_h,
                 va="top")
    write_figure(fig, path, fmt, bbox_inches="tight")
    size = image_size(path)
    return TracePicture(path, titles, labels, [s for s, _ in stages], size,  # type: ignore[arg-type]
                        scales)
