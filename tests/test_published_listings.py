"""The simulator paper's listings, written here in their style (tests/data/published_style/), compile
as published: integer programs numerically where smaller (a named plan candidate), division by a
real with a stated bound, comparisons of reals on a stated grid, and denominators near 0 excluded
and flagged, never answered.  References are NumPy (bench/published_listings.py's, written from
the operations' definitions) and the interpreter; never the compiler's own output.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from rasp_compiler.cli import main as cli
from rasp_compiler.compiler import compile_program, compile_weights
from rasp_compiler.compiler.real_check import rounding_allowance
from rasp_compiler.errors import CompileError, UserError
from rasp_compiler.lang import program_from_source
from rasp_compiler.runtime import ExcludedInputError, ModelInputError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import published_listings as bench  # noqa: E402

LISTINGS = ROOT / "tests" / "data" / "published_style"


def listing(name: str) -> tuple[bench.Listing, str]:
    spec = bench.BY_NAME[name]
    text = (LISTINGS / f"{name}.rasp").read_text()
    return spec, bench.listing_source(text, name, spec.tokens)


def compiled(name: str, dtype: str, **options):
    spec, source = listing(name)
    program = program_from_source(source, f"{name}.rasp")
    model = compile_program(program, None, spec.length, dtype=dtype, fixed_length=spec.length,
                            input_range=spec.input_range, **{**spec.options, **options})
    return spec, program, model


def within(model, got: list[float], ref: np.ndarray, length: int) -> bool:
    """|got - ref| <= A + R |ref| (the stated bound) plus the float rounding ``rasp check`` allows."""
    bound = model.config.get("numeric", {}).get("error_bound") or {"absolute": 0.0, "relative": 0.0}
    allowance = rounding_allowance(model.config["dtype"], length) * max(1.0, float(np.max(np.abs(ref))))
    diff = np.abs(np.array(got, dtype=float) - ref)
    return bool(np.all(diff <= bound["absolute"] + bound["relative"] * np.abs(ref) + allowance))


# ---- every listing, both dtypes, against NumPy ----------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", [s.name for s in bench.LISTINGS])
def test_listing_compiles_and_agrees_with_numpy_within_its_bound(name: str, dtype: str) -> None:
    spec, _, model = compiled(name, dtype)
    text = (LISTINGS / f"{name}.rasp").read_text()
    args = dict(spec.reference_args)
    if spec.base_from_listing:
        args["base"] = bench.listing_base(text)
    inputs = bench.draw_inputs(spec, 150, seed=7)
    outs = model.run(inputs, strict=not model.config.get("guards"))
    answered = 0
    for x, got in zip(inputs, outs, strict=True):
        ref = spec.reference(np.array(x, dtype=float), **args)
        if got is None:  # flagged: only where the operation has no answer (a singular matrix)
            assert np.isnan(ref).all(), (x, "flagged an input the listing answers")
            continue
        assert not np.isnan(ref).any(), (x, "answered where there is no answer")
        assert within(model, got, ref, spec.length), (x, got, ref.tolist())
        answered += 1
    assert answered >= 100


@pytest.mark.parametrize("name", ["matmul_4x4", "matmul_3xk_kx4"])
def test_matmul_listings_are_at_most_twice_programs_matmul(name: str) -> None:
    spec, source = listing(name)
    kw = dict(fixed_length=spec.length, input_range=spec.input_range)
    ours = compile_weights(program_from_source(source, name), None, spec.length, **kw)
    hand = compile_weights(program_from_source(bench.program_source(spec), "matmul.rasp"), None,
                           spec.length, **kw)
    assert ours.params <= 2 * hand.params, (ours.params, hand.params)
    assert ours.config["output"]["integer"] and ours.config["numeric"]["approx_error_bound"] == 0
    rng = np.random.default_rng(3)
    xs = rng.integers(-9, 10, (100, spec.length))
    outs = ours.model().run(xs.tolist())
    for x, got in zip(xs, outs, strict=True):  # exact: integers, equal to NumPy's product
        assert got == [int(v) for v in spec.reference(x.astype(float), **spec.reference_args)]


# ---- (1) integer programs: the numeric plan is one named candidate --------------------------------

def test_the_numeric_plan_over_the_integers_is_a_named_candidate_kept_where_smaller() -> None:
    spec, source = listing("matmul_4x4")
    w = compile_weights(program_from_source(source, "m.rasp"), None, 32, fixed_length=32, input_range=(-9, 9))
    kept = [t for t in w.plans_tried if t["outcome"] == "kept"]
    assert [t["strategy"] for t in kept] == ["numeric over the integers"]
    # a categorical table of every product of 8 integers in -9..9 is not even built
    assert any(t["outcome"].startswith("not built:") and "joint values" in t["outcome"]
               for t in w.plans_tried)
    assert w.config["numeric"] and w.config["output"]["integer"]


def test_a_smaller_categorical_plan_wins_over_the_numeric_one() -> None:
    src = "x = tokens_int;\nbig = numerical(aggregate(select(x, x, >), 1, 0));\nbig;"
    prog = program_from_source(src)
    w = compile_weights(prog, None, 4, fixed_length=4, input_range=(-9, 9))
    tried = {t["strategy"]: t for t in w.plans_tried}
    assert tried["numeric over the integers"]["outcome"] == "assembled"
    kept = next(t for t in w.plans_tried if t["outcome"] == "kept")
    assert kept["strategy"] != "numeric over the integers"
    assert kept["params"] < tried["numeric over the integers"]["params"]
    assert "numeric" not in w.config  # categorical


def test_a_refused_numeric_plan_leaves_the_categorical_one() -> None:
    spec, source = listing("match2")  # x % p jumps as a number: no numeric plan
    w = compile_weights(program_from_source(source, "m.rasp"), None, 8, fixed_length=8, input_range=(-9, 9))
    tried = {t["strategy"]: t for t in w.plans_tried}
    assert tried["numeric over the integers"]["outcome"].startswith("refused:")
    assert any("numerically:" in n for n in w.config["notes"])


def test_integer_comparisons_need_no_grid() -> None:
    src = "x = tokens_int;\ny = 3 * x - 2;\nbigger = numerical(aggregate(select(y, y, >), 1, 0));\nbigger;"
    prog = program_from_source(src)
    m = compile_program(prog, None, 5, fixed_length=5, input_range=(-9, 9))
    rng = np.random.default_rng(4)
    for x in rng.integers(-9, 10, (100, 5)).tolist():
        ref = [float(np.mean([1.0 for k in x if 3 * k - 2 > 3 * q - 2])) if any(k > q for k in x) else 0.0
               for q in x]
        assert np.allclose(m.run([x])[0], ref, atol=1e-6)


# ---- (2) division by a real whose interval excludes 0 ---------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_division_by_a_positive_real_has_a_stated_bound(dtype: str) -> None:
    src = "x = tokens_float;\ny = (x + 1) / (x * x + 0.5);\ny;"
    prog = program_from_source(src)
    m = compile_program(prog, None, 1, dtype=dtype, fixed_length=1, input_range=(-3, 3))
    bound = m.config["numeric"]["error_bound"]
    assert 0 < m.config["numeric"]["approx_error_bound"] < 1e-4
    assert any("reciprocal" in note for note in m.config["notes"])
    xs = np.linspace(-3, 3, 20001).astype(np.float32).astype(np.float64)
    outs = np.array([o[0] for o in m.run([[v] for v in xs.tolist()])])
    ref = (xs + 1) / (xs * xs + 0.5)
    allowance = rounding_allowance(dtype, 1) * np.maximum(1.0, np.abs(ref))
    assert np.all(np.abs(outs - ref) <= bound["absolute"] + bound["relative"] * np.abs(ref) + allowance)


def test_division_by_a_range_holding_zero_asks_for_min_denominator() -> None:
    with pytest.raises(CompileError, match="holds 0") as err:
        compile_program(program_from_source("x = tokens_float;\ny = 1 / x;\ny;"), None, 1,
                        fixed_length=1, input_range=(-1, 1))
    assert "--min-denominator" in err.value.render()


# ---- (3) comparisons of reals on a stated grid ----------------------------------------------------

ROW_MAX = "x = tokens_float;\nbigger = numerical(aggregate(select(x, x, >), 1, 0));\nbigger;"


def test_comparing_reals_without_a_grid_is_refused_with_the_line() -> None:
    with pytest.raises(CompileError, match="compares real numbers") as err:
        compile_program(program_from_source(ROW_MAX, "rowmax.rasp"), None, 4, fixed_length=4,
                        input_range=(-5, 5))
    text = err.value.render()
    assert "rowmax.rasp:2:" in text and "--input-grid" in text


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_comparisons_on_the_grid_are_exact(dtype: str) -> None:
    prog = program_from_source(ROW_MAX)
    m = compile_program(prog, None, 6, dtype=dtype, fixed_length=6, input_range=(-5, 5), input_grid="0.001")
    rng = np.random.default_rng(5)
    # neighbours one grid step apart are the hard case: ties and near-ties
    xs = (rng.integers(-5000, 5001, (200, 6)) // 7 * 7 + rng.integers(0, 2, (200, 6))) * 0.001
    xs = np.clip(xs, -5, 5)
    for x, got in zip(xs.tolist(), m.run(xs.tolist()), strict=True):
        k = np.round(np.array(x) / 0.001).astype(int)  # the grid points, compared as integers
        ref = [1.0 if (k > q).any() else 0.0 for q in k]
        assert np.allclose(got, ref, atol=1e-6), (x, got, ref)


def test_a_value_that_leaves_the_grid_is_refused_with_the_reason() -> None:
    src = ("x = tokens_float;\ne = 2.718281828459045 ^ x;\n"
           "bigger = numerical(aggregate(select(e, e, >), 1, 0));\nbigger;")
    with pytest.raises(CompileError) as err:
        compile_program(program_from_source(src, "leave.rasp"), None, 4, fixed_length=4,
                        input_range=(-5, 5), input_grid="0.001")
    text = err.value.render()
    assert "leave.rasp:3:" in text and "'e' is approximated by a piecewise-linear unit" in text
    assert "give --input-grid" not in text  # one was given: the hint must not ask for it


def test_inputs_off_the_grid_are_refused_not_answered(tmp_path: Path, capsys) -> None:
    _, _, model = compiled("maxmin", "float64")
    assert model.run([[0.25, -1.5, 2.0, 0.001, -0.002, 3.0, 1.0, 0.0]])  # on the grid: answered
    with pytest.raises(ModelInputError, match="not a multiple of 0.001"):
        model.run([[0.25, -1.5, 2.0, 0.0015, -0.002, 3.0, 1.0, 0.0]])
    model.save(str(tmp_path / "m"))
    rc = cli(["eval", str(tmp_path / "m"), "--input-json", "[0.25, -1.5, 2.0, 0.0015, 0, 3, 1, 0]"])
    assert rc != 0 and "not a multiple of 0.001" in capsys.readouterr().err


def test_integer_models_refuse_a_fraction() -> None:
    _, _, model = compiled("det3", "float64")
    with pytest.raises(ModelInputError, match="not an integer"):
        model.run([[1, 2, 3, 4, 5, 6, 7, 8, 8.5]])


# ---- (4) --min-denominator: excluded inputs flagged, never answered -------------------------------

def test_no_unflagged_inverse_is_wrong_and_every_singular_matrix_is_flagged() -> None:
    """Entries in -2..2 make singular matrices common (one in seven): every one must be flagged,
    and every matrix that is answered must be within the bound of the exact inverse."""
    spec, _, model = compiled("inverse3", "float64")
    rng = np.random.default_rng(6)
    xs = rng.integers(-2, 3, (3000, 9)).tolist()
    flags = model.flags(xs)
    outs = model.run(xs, strict=False)
    singular = 0
    for x, flag, got in zip(xs, flags, outs, strict=True):
        ref = bench.inverse3_ref(np.array(x, dtype=float))
        if np.isnan(ref).any():
            singular += 1
            assert flag is not None and got is None, x
        else:
            assert flag is None and got is not None, x
            assert within(model, got, ref, 9), (x, got, ref.tolist())
    assert singular > 300


def test_a_flagged_input_is_refused_by_run_and_rasp_eval(tmp_path: Path, capsys) -> None:
    _, _, model = compiled("inverse3", "float32")
    singular = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    with pytest.raises(ExcludedInputError, match="inverse3.det.*excluded"):
        model.run([singular])
    assert model.run([singular, [2, 0, 0, 0, 4, 0, 0, 0, 1]], strict=False)[0] is None
    model.save(str(tmp_path / "inv"))
    rc = cli(["eval", str(tmp_path / "inv"), "--input-json", json.dumps(singular)])
    err = capsys.readouterr().err
    assert rc != 0 and "excluded" in err and "1 / det" in err
    rc = cli(["eval", str(tmp_path / "inv"), "--input-json", "[2, 0, 0, 0, 4, 0, 0, 0, 1]", "--json"])
    got = json.loads(capsys.readouterr().out)["output"]
    assert rc == 0 and np.allclose(got, [0.5, 0, 0, 0, 0.25, 0, 0, 0, 1.0], atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_real_denominator_near_zero_is_flagged_and_the_rest_within_bound(dtype: str) -> None:
    eps = 0.1
    prog = program_from_source("x = tokens_float;\ny = 1 / x;\ny;")
    m = compile_program(prog, None, 1, dtype=dtype, fixed_length=1, input_range=(-1, 1), min_denominator=eps)
    xs = np.concatenate([np.linspace(-1, 1, 4001), eps * np.array([1 - 1e-6, 1, 1 + 1e-6, -1, -1 - 1e-6])])
    xs = xs.astype(np.float32).astype(np.float64)
    bound = m.config["numeric"]["error_bound"]
    for x, got in zip(xs.tolist(), m.run([[v] for v in xs.tolist()], strict=False), strict=True):
        if got is None:
            assert abs(x) < eps * 1.01, x  # flagged only near 0
            continue
        assert abs(x) > eps * 0.74, x  # the guarantee: nothing nearer 0 than 3 EPS / 4 answered
        ref = 1.0 / x
        assert abs(got[0] - ref) <= bound["absolute"] + bound["relative"] * abs(ref) \
            + rounding_allowance(dtype, 1) * max(1.0, abs(ref)), (x, got, ref)
    assert m.run([[0.0]], strict=False) == [None]


def test_min_denominator_and_input_grid_need_an_input_range() -> None:
    with pytest.raises(UserError, match="needs input_range"):
        compile_program(program_from_source(ROW_MAX), list("ab"), 4, input_grid="0.001")


# ---- the bench reads a directory of listings ------------------------------------------------------

def test_the_bench_finds_listings_by_function_name_anywhere_under_a_directory(tmp_path: Path) -> None:
    (tmp_path / "ops" / "linear").mkdir(parents=True)
    (tmp_path / "ops" / "linear" / "t.rasp").write_text((LISTINGS / "transpose.rasp").read_text())
    (tmp_path / "notes.txt").write_text("nothing here\n")
    found = bench.find_listings(tmp_path)
    assert list(found) == ["transpose"] and found["transpose"][2] == "transpose"
    row = bench.run_listing(bench.BY_NAME["transpose"], found["transpose"], 20, 0, ("float64",))
    assert row["float64"]["compiled"] and row["float64"]["numpy_error"] == 0.0
    assert row["program_float64"]["params"] > 0


def test_listing_base_reads_the_published_approximation_of_e() -> None:
    assert bench.listing_base("e = 2.73 ^ x;") == 2.73
    assert math.isclose(bench.listing_base("e = exp(x);"), math.e)
    # through a variable, and not from a comment (it read e there, so NumPy used another base)
    assert bench.listing_base("# 1.5 ^ 2 in a comment\nb = 2.73;\ne = b ^ x;") == 2.73


def test_the_bench_compiles_a_top_level_listing_named_by_its_file_at_the_shape_it_hard_codes(
        tmp_path: Path) -> None:
    """A file of top-level statements in the REPL's syntax (no def; `set example`; its result named
    `transposed`; several statements on a line) is found by its name, compiled as it stands, and
    checked at the shape its interpreter output matches (4 x 3, not the default 3 x 4); the table
    names the file, the program and the output."""
    (tmp_path / "Transpose.rasp").write_text(
        "set example [1,2,3,4,5,6,7,8,9,10,11,12]\nrows = 4;  cols = length / rows;  # derived\n\n"
        "transposed = aggregate(select(indices, (indices % rows) * cols + (indices - indices % rows) / rows,"
        " ==), tokens_int, 0);\n")
    found = bench.find_listings(tmp_path)
    assert list(found) == ["transpose"] and found["transpose"][2] is None
    row = bench.run_listing(bench.BY_NAME["transpose"], found["transpose"], 20, 0, ("float64",))
    assert (row["output"], row["length"], row["reference_args"], row["shape_mismatch"]) == \
        ("transposed", 12, {"rows": 4}, None)
    assert row["float64"]["compiled"] and row["float64"]["numpy_error"] == 0.0
    assert row["program"] == "programs/transpose.rasp (r=4, c=3)"
    [line] = bench.sources_table([row], tmp_path)[2:]
    assert line == ("| transpose | Transpose.rasp | the file as it stands | transposed | 4 x 3 (length 12) | "
                    "transpose_ref(rows=4) |")


def test_the_bench_calls_the_last_def_of_a_file_named_after_a_listing(tmp_path: Path) -> None:
    """`softmax.rasp` whose function is `softmax_rows` (a helper def beside it, 4 x 4, base 2.73
    through a variable, no numerical(...)): the last def is called, the width and base identified
    (its fourth row is absent at the default length 12, where it agrees with NumPy)."""
    (tmp_path / "softmax.rasp").write_text(
        "def rowsum(v, i, n) { return n * aggregate(select((indices - indices % n) / n, i, ==), v, 0); }\n"
        "def softmax_rows(x) {\n    n = 4; b = 2.73;\n    e = b ^ x;\n"
        "    row = (indices - indices % n) / n;\n"
        "    d = rowsum(e, 0, n) if row == 0 else (rowsum(e, 1, n) if row == 1 else "
        "(rowsum(e, 2, n) if row == 2 else rowsum(e, 3, n)));\n    return e / d;\n}\n")
    found = bench.find_listings(tmp_path)
    assert list(found) == ["softmax_3xc"] and found["softmax_3xc"][2] == "softmax_rows"
    row = bench.run_listing(bench.BY_NAME["softmax_3xc"], found["softmax_3xc"], 20, 0, ("float64",))
    assert row["call"] == "softmax_rows(tokens_float)" and row["shape"] == "3 rows of 4 (length 12)"
    assert row["reference_args"] == {"width": 4, "base": 2.73}
    m = row["float64"]
    assert m["compiled"] and m["within_bound"] == m["answered"] == 20 and m["numpy_error"] < 1e-5
    # programs/softmax.rasp computes e, not 2.73: it is compared with NumPy in base e (it was 1.4e-3 off)
    assert row["program_float64"]["numpy_error"] < 1e-12


def test_the_bench_says_when_no_shape_agrees_and_when_its_appended_call_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "transpose.rasp").write_text(  # 6 x 2: not a candidate shape
        "def transpose(x) {\n    return aggregate(select(indices, (indices % 6) * 2 + "
        "(indices - indices % 6) / 6, ==), x, 0);\n}\n")
    row = bench.run_listing(bench.BY_NAME["transpose"], bench.find_listings(tmp_path / "a")["transpose"],
                            10, 0, ("float64",))
    assert row["shape_mismatch"].startswith("length 12 {'rows': 3}: interpreter [")
    assert "NOT identified" in bench.sources_table([row], tmp_path)[2]
    assert row["float64"]["interp_error"] == 0.0 and row["float64"]["numpy_error"] > 1
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "softmax.rasp").write_text("def softmax(x, n) { return x; }\n")
    row = bench.run_listing(bench.BY_NAME["softmax_3xc"], bench.find_listings(tmp_path / "b")["softmax_3xc"],
                            10, 0, ("float64",))
    assert not row["float64"]["compiled"]
    assert row["float64"]["refused"].startswith("the call the bench appends, `softmax(tokens_float)`: ")
    assert "softmax() takes 2 arguments (x, n)" in row["float64"]["refused"]


def test_rasp_check_draws_inputs_on_the_grid_and_counts_flagged_ones(tmp_path: Path, capsys) -> None:
    for name in ("maxmin", "inverse3"):
        spec, source = listing(name)
        (tmp_path / f"{name}.rasp").write_text(source)
    rc = cli(["check", str(tmp_path / "maxmin.rasp"), "--input-range", "-5", "5", "--input-grid", "0.001",
              "--max-len", "8", "--fixed-length", "8", "--samples", "200", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["inputs_checked"] == 203 and report["max_abs_error"] < 1e-5
    # entries in -1..1: a third of the matrices are singular; each is flagged, not answered
    rc = cli(["check", str(tmp_path / "inverse3.rasp"), "--input-range", "-1", "1", "--min-denominator",
              "0.5", "--max-len", "9", "--fixed-length", "9", "--samples", "300", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["inputs_checked"] + report["inputs_undefined"] == 300
    assert report["inputs_undefined"] > 50 and not report["failures"]


# ---- narrow score columns (real/assembly.py: _narrow_layers, _single_column) ----------------------

@pytest.mark.parametrize("k", [2, 3, 4])
def test_matmul_3xk_listing_is_exact_against_the_interpreter(k: int) -> None:
    """At every inner size the narrow heads (one-hot gathers, one-column summing heads) compute
    what the interpreter computes, bit for bit, on random integer inputs."""
    from rasp_compiler.interpreter import run

    spec, source = listing("matmul_3xk_kx4")
    n = 7 * k
    program = program_from_source(source, "matmul_3xk_kx4.rasp")
    model = compile_weights(program, None, n, fixed_length=n, input_range=(-9, 9)).model()
    xs = np.random.default_rng(k).integers(-9, 10, (60, n))
    for x, got in zip(xs, model.run(xs.tolist()), strict=True):
        assert got == [int(v) for v in run(program, x.tolist())], x


def _layer_d_heads(w) -> list[int]:
    return [layer["d_head"] for layer in w.config["layers"] if layer["n_heads"]]


def test_a_head_selecting_at_one_query_class_takes_one_score_column() -> None:
    """select(indices, 3 if indices == 1 else 0, <): only query 1 selects (keys 0..2); its head
    is one column (d_head 1), and the output equals the interpreter's."""
    from rasp_compiler.interpreter import run

    src = ("x = tokens_float;\n"
           "y = numerical(aggregate(select(indices, 3 if indices == 1 else 0, <), x, 0));\ny;")
    program = program_from_source(src)
    w = compile_weights(program, None, 6, fixed_length=6, input_range=(-4, 4))
    assert _layer_d_heads(w) == [1]
    xs = np.random.default_rng(0).integers(-4, 5, (40, 6)).astype(float)
    for x, got in zip(xs, w.model().run(xs.tolist()), strict=True):
        assert got == pytest.approx(run(program, x.tolist()), abs=1e-6), x


def test_a_gather_over_many_keys_with_few_query_classes_takes_one_hot_columns() -> None:
    """select(indices, 4 + indices % 3, ==) over 14 keys: 3 query classes, so one-hot blocks (3
    columns and BOS's one: d_head 4) where digit blocks would take 6 (d_head 16)."""
    from rasp_compiler.interpreter import run

    src = "x = tokens_float;\ny = numerical(aggregate(select(indices, 4 + indices % 3, ==), x, 0));\ny;"
    program = program_from_source(src)
    w = compile_weights(program, None, 14, fixed_length=14, input_range=(-4, 4))
    assert _layer_d_heads(w) == [4]
    assert not any(r["feature"].startswith("pos:select") and "key_hi" in r["feature"]
                   for r in w.config["residual"])  # the digit columns were dropped
    xs = np.random.default_rng(1).integers(-4, 5, (40, 14)).astype(float)
    for x, got in zip(xs, w.model().run(xs.tolist()), strict=True):
        assert got == run(program, x.tolist()), x


def test_compile_and_check_take_the_length_from_the_files_set_example(tmp_path: Path, capsys) -> None:
    """A listing in the original REPL's syntax states its matrix with `set example [...]` and no
    '# example-json' line: `rasp compile/check FILE --input-range LO HI` take the length (fixed)
    from it instead of asking for --max-len."""
    path = tmp_path / "t.rasp"
    path.write_text("set example [1, 2, 3, 4, 5, 6,\n  7, 8, 9, 10, 11, 12]\n"
                    + (LISTINGS / "transpose.rasp").read_text() + "\ntr = transpose(tokens_int);\n")
    assert cli(["compile", str(path), "--input-range", "-9", "9", "-o", str(tmp_path / "m"), "--json"]) == 0
    captured = capsys.readouterr()
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["max_len"] == 12 and "(length 12: the file's example" in captured.err
    assert cli(["eval", str(tmp_path / "m"), "--input-json", json.dumps(list(range(-6, 6))), "--json"]) == 0
    got = [float(v) for v in json.loads(capsys.readouterr().out)["output"]]
    assert got == bench.transpose_ref(np.arange(-6.0, 6.0)).tolist()
    assert cli(["check", str(path), "--input-range", "-9", "9", "--samples", "20"]) == 0
    capsys.readouterr()
    path.write_text((LISTINGS / "transpose.rasp").read_text() + "\ntr = transpose(tokens_int);\n")
    assert cli(["compile", str(path), "--input-range", "-9", "9", "-o", str(tmp_path / "n")]) == 1
    assert "no '# example-json' line, '# fixed-length' line or 'set example [...]'" in capsys.readouterr().err
    path.write_text("set example [[1, 2], [3, 4]]\nx = tokens_int + 1;\n")  # a matrix: its length is not 2
    assert cli(["compile", str(path), "--input-range", "-9", "9", "-o", str(tmp_path / "n")]) == 1
    assert "is a nested list: an input is one flat sequence" in capsys.readouterr().err


def test_a_row_sum_that_is_0_only_at_shorter_lengths_asks_for_fixed_length(tmp_path: Path, capsys) -> None:
    """A softmax listing compiled with --max-len and no --fixed-length: at shorter lengths a row is
    empty and its sum 0, so the division is refused; the hint names --fixed-length, which compiles
    it, and `rasp check` then states the bound as compile does (R x |value|, not its value at the
    widest range)."""
    _, source = listing("softmax_3x3")
    program = program_from_source(source, "softmax_3x3.rasp")
    with pytest.raises(CompileError, match="holds 0: near 0 the quotient has no bound") as info:
        compile_program(program, None, 9, input_range=(-5, 5))
    assert info.value.hint.startswith("if the program takes inputs of one length (a matrix listing), "
                                      "give --fixed-length N")
    path = tmp_path / "s.rasp"
    path.write_text(source)
    assert cli(["check", str(path), "--input-range", "-5", "5", "--max-len", "9", "--fixed-length", "9",
                "--samples", "30", "--dtype", "float64"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.search(r"\(stated bound \d(\.\d+)?e-0[5-7] x \|value\| \+ rounding", last), last


def test_the_call_the_bench_appends_is_read_after_the_repl_commands_and_an_exit(tmp_path: Path) -> None:
    """A file saved from the original REPL (`examples off`, `set example`, a demo s-op, `exit`): the
    REPL reads nothing after `exit`, so the appended call was dropped and the demo (`doubled`)
    compiled in its place while the table said the call was."""
    (tmp_path / "maxmin.rasp").write_text(
        "examples off\nset example [1.5, -2, 3, 0.25]\n" + (LISTINGS / "maxmin.rasp").read_text()
        + "\ndoubled = 2 * maxmin(tokens_float);\ndoubled;\nexit\n")
    found = bench.find_listings(tmp_path)["maxmin"]
    row = bench.run_listing(bench.BY_NAME["maxmin"], found, 10, 0, ("float64",))
    assert (row["call"], row["output"], row["shape_mismatch"]) == ("maxmin(tokens_float)", "out", None)
    assert row["float64"]["numpy_error"] < 1e-12


def test_the_bench_finds_listings_whose_function_names_are_spelled_otherwise(tmp_path: Path) -> None:
    """`def Transpose(`, `def Mat_Mul_4x4(` in one file of several programs: each found, and called
    by its own spelling."""
    text = (LISTINGS / "transpose.rasp").read_text().replace("def transpose(", "def Transpose(")
    text += (LISTINGS / "matmul_4x4.rasp").read_text().replace("def matmul_4x4(", "def Mat_Mul_4x4(")
    (tmp_path / "ops.rasp").write_text(text)
    found = bench.find_listings(tmp_path)
    assert {k: v[2] for k, v in found.items()} == {"transpose": "Transpose", "matmul_4x4": "Mat_Mul_4x4"}
    row = bench.run_listing(bench.BY_NAME["transpose"], found["transpose"], 10, 0, ("float64",))
    assert row["call"] == "Transpose(tokens_int)" and row["float64"]["numpy_error"] == 0.0


def test_an_exponential_too_large_for_the_dtype_is_refused_at_its_line() -> None:
    """The softmax listing has no max-subtraction: over -50..50 its e reaches 5e21, past what
    float32 products hold; the refusal named the file only, now the listing's line too."""
    _, source = listing("softmax_3x3")
    program = program_from_source(source, "softmax_3x3.rasp")
    with pytest.raises(CompileError, match=r"'softmax_3x3\.e' \(base \^ x\) can reach 5\.18e\+21") as info:
        compile_program(program, None, 9, fixed_length=9, input_range=(-50, 50))
    assert (info.value.file, info.value.line) == ("softmax_3x3.rasp", 7)
    assert "--dtype float64" in info.value.hint
