"""Differential testing: random well-typed RASP programs, compiled model vs interpreter.

``rasp_compiler/compiler/random_source.py`` writes each program as RASP source (maps, sequence
maps, selects with every comparison, and/or/not selector combinations, categorical aggregates with
defaults, numerical means followed by maps, selector widths; attention depth up to 6).  The default
run checks 500 programs x 20 random inputs (plus all-equal edge inputs) at max length 5;
``bench/differential.py`` runs more, longer.  A failure prints the program source: minimise it and
add it to tests/test_regressions.py.
"""

from __future__ import annotations

import collections

import torch

from rasp_compiler.compiler.random_source import check_generated, generate

torch.set_num_threads(1)
PROGRAMS = 500
INPUTS = 20
MAX_LEN = 5


def _report(outcomes: list) -> str:
    lines = []
    for o in outcomes[:5]:
        head = f"--- seed {o.generated.seed}: {o.status} {o.detail} {o.failures[:2]}"
        lines.append(f"{head}\n{o.generated.source}")
    return "\n".join(lines)


def test_generator_is_deterministic_and_parses() -> None:
    a, b = generate(12345), generate(12345)
    assert a.source == b.source
    assert generate(1).source != generate(2).source


def test_generator_reaches_every_depth_and_feature() -> None:
    gens = [generate(seed) for seed in range(PROGRAMS)]
    depths = collections.Counter(g.depth for g in gens)
    assert set(depths) == {1, 2, 3, 4, 5, 6}, depths
    text = "\n".join(g.source for g in gens)
    for feature in ("selector_width(", "aggregate(", "numerical(aggregate(", " and select(", " or select(",
                    "not select(", ", ==)", ", !=)", ", <)", ", >)", ", <=)", ", >=)", " if ", "round("):
        assert feature in text, feature


def test_compiled_random_programs_agree_with_the_interpreter() -> None:
    outcomes = [check_generated(generate(seed, max_len=MAX_LEN), max_len=MAX_LEN, inputs=INPUTS)
                for seed in range(PROGRAMS)]
    counts = collections.Counter(o.status for o in outcomes)
    bad = [o for o in outcomes if o.status in ("disagree", "crash")]
    assert not bad, f"{counts}\n{_report(bad)}"
    # a refusal is a clear CompileError, allowed, but the generator must mostly produce compilable programs
    assert counts["agree"] >= 0.95 * PROGRAMS, counts
    assert sum(o.inputs_checked for o in outcomes) >= PROGRAMS * INPUTS


CAUSAL_PROGRAMS = 150


def test_causal_random_programs_look_only_backwards_and_agree() -> None:
    """The same generator with every selector restricted to earlier keys and no ``length``:
    compiled with ``causal=True``, the model must agree with the interpreter.  The causal mask
    then changes nothing, so any disagreement is the causal lowering's fault."""
    gens = [generate(seed, max_len=MAX_LEN, causal=True) for seed in range(CAUSAL_PROGRAMS)]
    assert all("length" not in g.source for g in gens)
    assert {g.depth for g in gens} == {1, 2, 3, 4, 5, 6}
    outcomes = [check_generated(g, max_len=MAX_LEN, inputs=INPUTS) for g in gens]
    counts = collections.Counter(o.status for o in outcomes)
    bad = [o for o in outcomes if o.status in ("disagree", "crash")]
    assert not bad, f"{counts}\n{_report(bad)}"
    assert counts["agree"] >= 0.95 * CAUSAL_PROGRAMS, counts


REPEATED_PROGRAMS = 120


def test_random_programs_with_repeated_statements_merge_and_agree() -> None:
    """Statements written twice under two names: the compiler merges the alike nodes
    (``rewrites.shared_subexpressions``), so the model must still agree with the interpreter,
    which reads every copy."""
    from rasp_compiler.compiler.rewrites import shared_subexpressions
    from rasp_compiler.lang import program_from_source

    seeds = range(50_000, 50_000 + REPEATED_PROGRAMS)
    gens = [generate(seed, max_len=MAX_LEN, repeats=0.3) for seed in seeds]
    merged = sum(shared_subexpressions(p).graph.number_of_nodes() < p.graph.number_of_nodes()
                 for p in (program_from_source(g.source) for g in gens))
    assert merged >= 0.8 * REPEATED_PROGRAMS, merged
    outcomes = [check_generated(g, max_len=MAX_LEN, inputs=INPUTS) for g in gens]
    counts = collections.Counter(o.status for o in outcomes)
    bad = [o for o in outcomes if o.status in ("disagree", "crash")]
    assert not bad, f"{counts}\n{_report(bad)}"
    assert counts["agree"] >= 0.95 * REPEATED_PROGRAMS, counts
