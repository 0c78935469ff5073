"""What the heads of trained k-hop runs attend to, from the probe files saved beside the results.

The checkpoints the probes measure stay out of the repository, so the report shows the saved
probe files rather than probing anything itself.
"""

from __future__ import annotations

from pathlib import Path

from rasp_compiler.experiments.probe import main_role
from rasp_compiler.experiments.report.labels import pct
from rasp_compiler.experiments.report.results import load, read_json


def probe_section(results: str | Path | None) -> list[str]:
    """What the heads of trained k-hop runs do (``rasp experiment probe --save``'d files)."""
    if results is None:
        return []
    probes = load(Path(results) / "probes", read_json)
    if not probes:
        return []
    L = ["## Inside the runs: what the frozen heads do", "",
         "`rasp experiment probe RUN` measures, on 256 fresh test-split inputs, where each head's "
         "strongest attention lands: `previous` is i − 1, `hop j` is σ_j(i) (the position whose "
         "token is hop_j(x)[i]) and `hop j - 1` the occurrence just before it. The textbook circuit "
         "for k hops in k + 1 layers is a previous-token head, then k induction steps: σ_{j+1} is "
         "σ_1 ∘ σ_j, so every induction head attends to σ_1(i) (`hop 1`) and reads the hop the "
         "layer below wrote there; a head on σ_2(i) instead takes two hops at once. Each line gives "
         "every layer's most frequent role and its share, then the accuracy for short (1–7) and "
         "long (8–63) pointers i − σ_k(i). Layers and heads are counted from 0, as `rasp compile` "
         "and `rasp show` count them (L0 is the first layer). The files are in `probes/` beside "
         "the results.", "",
         "| run | accuracy | heads (layer: main role, share) | pointers 1–7 | pointers 8–63 |",
         "|---|---|---|---|---|"]

    def bins(p: dict, lo: int, hi: int) -> str:
        rows = [r for r in p.get("by_distance", []) if r["from"] is not None
                and lo <= r["from"] and r["to"] <= hi and r["accuracy"] is not None]
        n = sum(r["positions"] for r in rows)
        return pct(sum(r["accuracy"] * r["positions"] for r in rows) / n) if n else "—"

    for name, p in sorted(probes.items(), key=lambda kv: (kv[1].get("k") or 0, kv[0])):
        if p.get("numbered_from", 1) == 1:    # saved before probes counted from 0, as rasp show does
            p = {**p, "heads": [{**h, "layer": h["layer"] - 1, "head": h["head"] - 1} for h in p["heads"]]}
        several = len(p["heads"]) > len({h["layer"] for h in p["heads"]})   # several heads a layer

        def label(h: dict, several: bool = several) -> str:
            role, share = main_role(h)
            return f"L{h['layer']}" + (f".{h['head']}" if several else "") + f": {role} {share:.0%}"

        heads = "; ".join(label(h) for h in p["heads"])
        L.append(f"| `{name}` | {pct(p['accuracy'])} | {heads} | {bins(p, 1, 8)} | {bins(p, 8, 64)} |")
    L += ["", "Re-measure one with `rasp experiment probe runs/experiments/NAME --save "
          f"{Path(results).as_posix()}/probes/NAME.json` (the checkpoints stay in `runs/`, which is "
          "not committed).", ""]
    return L
