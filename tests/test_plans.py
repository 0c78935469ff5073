"""The plan search (``compiler/plans.py``): the one comparison, and the record of what was built."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from rasp_compiler.compiler import compile_weights, plans
from rasp_compiler.compiler.analysis import limits
from rasp_compiler.lang import load_program, program_from_source

PAPER = "tests/data/paper_examples.rasp"


def _fake(search: plans.PlanSearch, name: str, layers: int, params: int) -> None:
    """A candidate assembled with ``layers`` layers and ``params`` parameters."""
    strategy = plans.Strategy(name, None, defer_from=len(search.candidates))  # type: ignore[arg-type]
    cand = plans.Candidate(strategy, plans.Tried(name), schedule=SimpleNamespace(n_layers=layers),
                           tensors={"w": np.zeros(params)}, order=len(search.candidates))
    search.candidates[(name, len(search.candidates))] = cand


def test_the_best_plan_has_the_fewest_layers_then_parameters_and_the_first_wins_a_tie() -> None:
    search = plans.PlanSearch([], 4, dtype="float32", causal=False, fixed_length=None, stage=print)
    assert search.best() is None
    _fake(search, "a", 4, 100)
    _fake(search, "b", 3, 900)  # fewer layers beats fewer parameters
    _fake(search, "c", 3, 500)
    _fake(search, "d", 3, 500)  # a tie: the one assembled first stays
    assert search.best().strategy.name == "c"


def test_every_compile_records_its_plans_and_keeps_the_smallest_assembled() -> None:
    # the paper's Dyck-2 at 16: deferring past 4,096 leaves 5 layers where its heads need 4, so
    # the plan deferring only the larger maps is built, and kept at 4 layers
    program = program_from_source(open(PAPER, encoding="utf-8").read(), PAPER, output="dyck2_ptf")
    built = compile_weights(program, list("(){}"), 16)
    tried = built.plans_tried
    assert [t["strategy"].split(" (")[0] for t in tried] == ["deferred", "fewer deferred"]
    first, kept = tried
    assert first["layers"] > first["head_depth"] and first["params"] is None
    assert first["outcome"].startswith("not assembled")
    assert kept["outcome"] == "kept" and kept["layers"] == built.n_layers == 4
    assert kept["params"] == built.params
    assert all(t["seconds"] >= 0 for t in tried)


def test_the_kept_plan_is_the_smallest_of_those_built_where_several_are(monkeypatch) -> None:
    # random program 12200085 with the threshold lowered to 50 (tests/test_compiled_programs.py):
    # the deferred plan is assembled, found larger than its tables could make it, and weighed
    # against the plain plan, which is smaller at the same depth
    src = """v1 = aggregate(select(length, length, >), length, 0);
v2 = indicator(length == 4);
v3 = indicator(length == 8);
v5 = tokens in ["a", "b"];
v6 = "a" if tokens == "c" else tokens;
v8 = "c" if v5 else "b";
v9 = v1 == 2;
v10 = aggregate(select(indices, v2, ==), v9, False);
v11 = selector_width((select(v2, v2, !=) and select(v3, v2, ==)));
v12 = selector_width((select(v6, v8, <=) and select(v8, v8, ==)));
v13 = v2 == v12;
v14 = aggregate((select(indices, v11, ==) and select(v10, v13, ==)), v10, False);
v14;
"""
    monkeypatch.setattr(limits, "DEFER_FROM", 50)
    built = compile_weights(program_from_source(src), list("abc"), 8)
    assembled = [t for t in built.plans_tried if t["params"] is not None]
    kept = [t for t in built.plans_tried if t["outcome"] == "kept"]
    assert [t["strategy"] for t in assembled] == ["deferred (past 50)", "plain"]
    assert kept == [assembled[1]] and assembled[0]["layers"] == assembled[1]["layers"]
    assert (kept[0]["layers"], kept[0]["params"]) == (built.n_layers, built.params)
    assert assembled[0]["params"] > kept[0]["params"]
    monkeypatch.setattr(limits, "DEFER_FROM", None)  # the plain plan alone, built independently
    alone = compile_weights(program_from_source(src), list("abc"), 8)
    assert [t["strategy"] for t in alone.plans_tried] == ["plain"]
    assert alone.config["weights_sha256"] == built.config["weights_sha256"]


def test_a_numeric_output_is_recorded_beside_the_refused_one_hot() -> None:
    src = """m = numerical(aggregate(select(indices, indices, <=), indicator(tokens == "a")));
n = numerical(aggregate(select(indices, indices, <=), indicator(tokens == "b")));
m - n * 2;
"""
    built = compile_weights(program_from_source(src), list("abc"), 64)
    refused = [t for t in built.plans_tried if t["outcome"].startswith("refused")]
    kept = [t for t in built.plans_tried if t["outcome"] == "kept"]
    assert refused and all("output as a number" not in t["strategy"] for t in refused)
    assert len(kept) == 1 and kept[0]["strategy"].endswith("output as a number")
    assert built.config["output"]["encoding"] == "numerical"


def test_progress_names_each_other_plan() -> None:
    program = program_from_source(open(PAPER, encoding="utf-8").read(), PAPER, output="dyck2_ptf")
    stages: list[str] = []
    compile_weights(program, list("(){}"), 16, progress=stages.append)
    assert stages[0] == "value sets" and "heads and MLPs" in stages
    assert any(s.startswith("heads and MLPs (another plan: fewer deferred") for s in stages)


@pytest.mark.parametrize("name", ["sort", "dyck1"])
def test_a_loaded_model_has_no_record_and_a_compiled_one_does(tmp_path, name) -> None:
    from rasp_compiler.compiler import load

    built = compile_weights(load_program(f"programs/{name}.rasp"), list("abc"), 5)
    assert sum(t["outcome"] == "kept" for t in built.plans_tried) == 1
    built.save(str(tmp_path / "m"))
    assert load(str(tmp_path / "m")).plans_tried is None


def test_the_analysis_tabulates_over_opaque_numbers_only_as_far_as_the_lowering_fuses() -> None:
    from rasp_compiler.compiler.lowering import limits as lowering_limits

    assert limits.OPAQUE_NUMBERS_CAP == max(lowering_limits.MULTI_NUMERIC_CAP,
                                            lowering_limits.OPAQUE_FRONTIER_CAP)


def test_maps_over_two_balances_past_the_cap_stay_opaque_and_lose_nothing(monkeypatch) -> None:
    # tracr's shuffle-Dyck-2 at 40: `balance < 0 or other < 0` and two maps like it have 91,880
    # joint assignments over the two balances.  Tabulated (the cap lifted), they made the compiler
    # build a second, plain plan that was no shallower; past the cap one plan is built, the same
    from rasp_compiler.pyapi import compiling, lib

    def compiled() -> tuple:
        program = lib.make_shuffle_dyck(["()", "{}"])
        model = compiling.compile_rasp_to_model(program, set("(){}x"), max_seq_len=40, compiler_bos="BOS")
        return model.model.config["weights_sha256"], model.model.n_layers, model.model.plans_tried

    digest, layers, tried = compiled()
    monkeypatch.setattr(limits, "OPAQUE_NUMBERS_CAP", 10**9)
    lifted_digest, lifted_layers, lifted_tried = compiled()
    assert len(tried) == 1 < len(lifted_tried)
    assert not any(t["layers"] is not None and t["layers"] < layers for t in lifted_tried)
    assert (digest, layers) == (lifted_digest, lifted_layers)
