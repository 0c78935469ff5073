"""How the report writes an accuracy and names a task, shared by the markdown and the plots so
that a table row and the bar drawn for it read the same."""

from __future__ import annotations


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


def task_label(task: str, k: int | None) -> str:
    return "Dyck-1" if task == "dyck1" else f"{k}-hop"
