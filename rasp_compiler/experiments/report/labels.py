"""How the report writes an accuracy, names a task and words what a run adds to a plain one,
shared by the markdown and the plots so that a table row and the bar drawn for it read the same,
and two sentences about the same cell name its settings alike."""

from __future__ import annotations

from collections.abc import Sequence

from rasp_compiler.experiments.train import RunConfig


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


def task_label(task: str, k: int | None) -> str:
    return "Dyck-1" if task == "dyck1" else f"{k}-hop"


def and_join(words: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    if len(words) < 3:
        return " and ".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def comma_and(clauses: Sequence[str]) -> str:
    """Clauses that each have their own verb: 'a', 'a, and b', 'a, b, and c'."""
    return clauses[0] if len(clauses) == 1 else ", ".join(clauses[:-1]) + ", and " + clauses[-1]


def hops(ks: Sequence[int]) -> str:
    """k values that share one 'hop': '4-hop', '2-, 3- and 4-hop'."""
    return and_join([f"{k}-" for k in ks[:-1]] + [f"{ks[-1]}-hop"])


def training_aids(c: RunConfig) -> list[str]:
    """The k-hop training aids a run uses, as the report words them."""
    return (["auxiliary hop heads"] if c.aux else []) + \
        ([f"a {c.curriculum:,}-step hop curriculum"] if c.curriculum else [])


def depth_words(c: RunConfig) -> str:
    """A k-hop run's depth against its k: 'depth 6 = k + 2'."""
    return f"depth {c.layers} = k + {c.layers - c.k}"


def precision_words(c: RunConfig) -> list[str]:
    return ["bf16 training matmuls"] if c.precision == "bf16" else []
