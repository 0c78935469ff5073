"""The universal simulator U: layout, generated source, exactness against NumPy, bad input, CLI."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

from rasp_compiler.cli import main as cli
from rasp_compiler.errors import UserError
from rasp_compiler.interpreter import run
from rasp_compiler.lang.elaborator import program_from_source
from rasp_compiler.simulator import (
    SequenceLayout,
    attention_layer,
    build_simulator,
    check_simulator,
    generate_source,
    load_simulator,
)
from rasp_compiler.simulator.check import random_layers

BARS = {"float64": 1e-9, "float32": 5e-6}


def test_layout_places_every_entry() -> None:
    lay = SequenceLayout(3, 2, 2)
    A = np.arange(8.0).reshape(2, 2, 2)
    V = 10 + np.arange(8.0).reshape(2, 2, 2)
    X = 20 + np.arange(6.0).reshape(3, 2)
    seq = lay.build(A, V, X)
    assert lay.length == max(2 * 2 * 4 + 6, 3 * 4) == len(seq)
    assert seq[1 * 4 + 1 * 2 + 0] == A[1, 1, 0]
    assert seq[8 + 0 * 4 + 1 * 2 + 1] == V[0, 1, 1]
    assert seq[16 + 2 * 2 + 1] == X[2, 1]
    assert lay.read_output(np.arange(lay.length)).shape == (3, 4)
    with pytest.raises(UserError, match="shape"):
        lay.build(A, V, X[:2])
    with pytest.raises(UserError, match="non-finite"):
        lay.build(A, V, np.full((3, 2), np.nan))
    with pytest.raises(UserError, match="reads exactly 22"):
        lay.check_sequence(np.zeros(21))


def test_read_output_of_the_wrong_length_is_a_user_error() -> None:
    """It was numpy's "cannot reshape array of size 2 into shape (2,2)"."""
    lay = SequenceLayout(2, 2, 1)
    assert lay.read_output(np.zeros((3, lay.length))).shape == (3, 2, 2)
    for out in ([1.0, 2.0], np.zeros(lay.length + 1), 5.0):
        with pytest.raises(UserError, match=f"U for n=2, d=2, H=1 writes exactly {lay.length}"):
            lay.read_output(out)


def test_generated_source_means_the_attention_layer() -> None:
    """U's RASP program, run by the interpreter, is T(X) (independent of the compiler)."""
    lay = SequenceLayout(3, 2, 2)
    prog = program_from_source(generate_source(3, 2, 2, causal=True))
    A, V, X = (m[0] for m in random_layers(lay, 1, seed=5))
    out = np.array(run(prog, lay.build(A, V, X).tolist()))
    assert np.max(np.abs(lay.read_output(out) - attention_layer(A, V, X, causal=True)["output"])) < 1e-14


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("causal", [False, True])
def test_u_meets_the_bars_on_small_sizes(dtype: str, causal: bool) -> None:
    sim = build_simulator(3, 3, 1, dtype=dtype, causal=causal)
    rep = check_simulator(sim, trials=20, seed=1, trace=True)
    assert rep["max_abs_error"] <= BARS[dtype]
    assert rep["stages"]["XT"] == 0.0  # the transpose is bit-exact
    assert rep["layers"] == 3 and rep["heads_per_layer"] == [3, 7, 1]


def test_u_heads_do_not_grow_with_n_or_h() -> None:
    sizes = [build_simulator(n, 4, h).size() for n, h in ((4, 1), (12, 1), (6, 3))]
    assert all(s["heads_per_layer"] == [4, 9, 1] for s in sizes)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_softmax_logits_up_to_50_stay_finite_and_correct(dtype: str) -> None:
    sim = build_simulator(4, 4, 1, dtype=dtype, input_range=(-4.0, 4.0))
    X = np.array([[4.0, 0, 0, 0], [0, 4.0, 0, 0], [4.0, 4.0, 0, 0], [-4.0, 0, 0, 0]])
    A = np.diag([3.125, -3.125, 1.0, 1.0])[None]  # logits X A X^T reach +50 and -50
    V = np.eye(4)[None] * 3.0
    ref = attention_layer(A, V, X)
    assert np.abs(ref["XAXT"]).max() == 50.0
    got = sim(A, V, X)
    assert np.all(np.isfinite(got))
    # a logit of 50 carries 50 * eps of rounding into its weight: the dtype's limit, not U's
    eps = float(np.finfo(np.float32 if dtype == "float32" else np.float64).eps)
    assert np.max(np.abs(got - ref["output"])) <= 4 * 50 * eps * np.abs(ref["output"]).max()


def test_bad_input_is_refused(tmp_path, capsys) -> None:
    assert cli(["simulate", "--n", "2", "--d", "2", "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    assert cli(["simulate", "--model", str(tmp_path), "--input-json", "[1, 2, 3]"]) == 1
    assert "reads exactly 12" in capsys.readouterr().err
    seq = [0.5] * 12
    bad = json.dumps(seq).replace("0.5", "NaN", 1)
    assert cli(["simulate", "--model", str(tmp_path), "--input-json", bad]) == 1
    assert "non-finite" in capsys.readouterr().err
    assert cli(["simulate", "--model", str(tmp_path), "--input-json", json.dumps([3.0] * 12)]) == 1
    assert "outside the input range" in capsys.readouterr().err
    assert cli(["simulate", "--model", str(tmp_path), "--input-json", json.dumps(seq), "--json"]) == 0
    T = json.loads(capsys.readouterr().out)["output"]
    sim = load_simulator(str(tmp_path))
    A = np.full((1, 2, 2), 0.5)
    assert np.allclose(T, attention_layer(A, A, np.full((2, 2), 0.5))["output"], atol=1e-15)
    assert sim.layout.n == 2


def test_a_refused_entry_is_named_by_its_position_and_matrix_entry(tmp_path, capsys) -> None:
    """An entry out of range said only "sequence 0 holds values outside the input range", and the
    length error's hint was Python (SequenceLayout(...).build) for a command-line user."""
    assert cli(["simulate", "--n", "4", "--d", "1", "--heads", "3", "-o", str(tmp_path)]) == 0
    capsys.readouterr()                           # L = 12: A 0..2, V 3..5, X 6..9, padding 10..11

    def error(seq: list) -> str:
        assert cli(["simulate", "--model", str(tmp_path), "--input-json", json.dumps(seq)]) == 1
        err = capsys.readouterr().err
        assert err.count("error:") == 1
        return err
    seq = [0.0] * 12
    assert "holds 2 at position 4 (V_2[0][0]), outside the input range [-1, 1]" in error(
        seq[:4] + [2.0] + seq[5:])
    assert "holds -3 at position 8 (X[2][0])" in error(seq[:8] + [-3.0] + seq[9:])
    assert "position 11 holds 0.5" in error(seq[:11] + [0.5])
    assert "(rasp simulate --help)" in error(seq[:3])
    layout = load_simulator(str(tmp_path)).layout
    assert [layout.entry_at(p) for p in (0, 2, 3, 6, 9, 10)] == \
        ["A_1[0][0]", "A_3[0][0]", "V_1[0][0]", "X[0][0]", "X[3][0]", "padding"]


def test_an_entry_just_outside_the_range_is_shown_with_its_digits() -> None:
    """1.0000001 outside [-1, 1] was printed with %g: "holds 1 at position 11 ..., outside the
    input range [-1, 1]", an error that contradicts itself."""
    layout = SequenceLayout(2, 1, 1)
    sim = build_simulator(2, 1, 1)
    seq = np.zeros(layout.length)
    seq[layout.length - 1] = 1.0000001
    with pytest.raises(UserError, match=r"holds 1\.0000001 at position 3 \(X\[1\]\[0\]\)"):
        sim.run_sequences(seq[None])
    seq[-1] = -1.5                                     # a short number keeps its short form
    with pytest.raises(UserError, match=r"holds -1\.5 at position 3 .*range \[-1, 1\]"):
        sim.run_sequences(seq[None])


def test_cli_check_json_fields(tmp_path, capsys) -> None:
    rasp = tmp_path / "u.rasp"
    rc = cli(["simulate", "--n", "3", "--d", "2", "--heads", "2", "--check", "--trials", "10",
              "--json", "--trace", "--emit-rasp", str(rasp)])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 0
    for key in ("n", "d", "heads", "dtype", "trials", "max_abs_error", "max_rel_error", "layers",
                "heads_per_layer", "residual_width", "sequence_length", "params"):
        assert key in rep
    assert rep["max_abs_error"] <= 1e-9
    assert set(rep["stages"]) == {"XT", "XA", "XAXT", "softmax", "XV", "output"}
    assert "softmax_aggregate" in rasp.read_text()
    assert rep["tolerance"] == 1e-9 and rep["passed"] is True


def test_cli_check_exits_1_above_its_tolerance(capsys) -> None:
    """A finite error above the bar used to pass (exit 0): only NaN or inf failed."""
    args = ["simulate", "--n", "2", "--d", "2", "--dtype", "float32", "--check", "--trials", "5"]
    assert cli(args) == 0
    assert "within the tolerance 5e-06" in capsys.readouterr().out
    assert cli([*args, "--tolerance", "1e-12"]) == 1
    captured = capsys.readouterr()
    assert "ABOVE the tolerance 1e-12" in captured.out
    assert "is above the tolerance 1e-12" in captured.err
    assert cli([*args, "--tolerance", "-1"]) == 1  # a UserError: one line, exit 1


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n, d, h", [(3, 3, 1), (4, 4, 2), (8, 8, 2), (16, 8, 4)])
def test_bars_over_100_trials(n: int, d: int, h: int, dtype: str) -> None:
    sim = build_simulator(n, d, h, dtype=dtype)
    rep = check_simulator(sim, trials=100, seed=0, trace=True, batch=16)
    assert rep["max_abs_error"] <= BARS[dtype]
    assert rep["stages"]["XT"] == 0.0
    assert rep["stages"]["XA"] <= 8 * np.finfo(np.float32 if dtype == "float32" else np.float64).eps * d


@pytest.mark.slow
def test_generating_u_for_n_64_takes_under_a_minute() -> None:
    start = time.perf_counter()
    sim = build_simulator(64, 8, 2)
    assert time.perf_counter() - start < 60
    assert sim.size()["heads_per_layer"] == [8, 17, 1]


@pytest.mark.parametrize("n, d, heads, words", [
    # L = max(2Hd² + nd, nHd), as layout.py documents
    (1000, 1000, 4, "sequence length is 9,000,000 (at most 4,096); d = 1000 is above 32"),
    (2000, 4, 1, "sequence length is 8,032 (at most 4,096)"),
    (8, 33, 1, "d = 33 is above 32"),
])
def test_too_large_a_simulator_is_refused_before_it_is_built(n, d, heads, words, capsys):
    """Before the limit, `rasp simulate --n 1000 --d 1000` computed for minutes with no output."""
    start = time.perf_counter()
    assert cli(["simulate", "--n", str(n), "--d", str(d), "--heads", str(heads), "--check"]) == 1
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert time.perf_counter() - start < 5


def test_emit_rasp_for_too_large_a_u_writes_nothing(tmp_path, capsys) -> None:
    """--emit-rasp wrote the source before the size check: 110 MB at d = 1000, then the refusal."""
    out = tmp_path / "u.rasp"
    start = time.perf_counter()
    assert cli(["simulate", "--n", "8", "--d", "1000", "--emit-rasp", str(out)]) == 1
    assert "too large to build" in capsys.readouterr().err
    assert not out.exists() and time.perf_counter() - start < 5


def test_options_that_do_not_apply_are_refused(tmp_path, capsys) -> None:
    """`--model U/ --check` printed one output as if checked; --input-json without --model was dropped."""
    assert cli(["simulate", "--n", "2", "--d", "2", "-o", str(tmp_path)]) == 0
    capsys.readouterr()
    seq = json.dumps([0.5] * 12)
    for extra, flag in ((["--check"], "--check"), (["--n", "3"], "--n"), (["--heads", "1"], "--heads"),
                        (["-o", str(tmp_path / "x")], "--out"), (["--dtype", "float32"], "--dtype")):
        assert cli(["simulate", "--model", str(tmp_path), "--input-json", seq, *extra]) == 1
        err = capsys.readouterr().err
        assert f"error: {flag} does not apply to --model" in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()
    assert cli(["simulate", "--n", "2", "--d", "2", "--input-json", seq, "-o", str(tmp_path / "y")]) == 1
    assert "--input-json needs --model" in capsys.readouterr().err
    assert not (tmp_path / "y").exists()


def test_an_edited_input_range_is_refused(tmp_path) -> None:
    """Widening config.input.range (hashes recomputed) let entries of 5 through: relative error 0.41."""
    from rasp_compiler.errors import ArtifactError
    from rasp_compiler.runtime import RaspModel

    sim = build_simulator(2, 2, 1)
    sim.model.save(str(tmp_path / "u"))
    assert load_simulator(str(tmp_path / "u")).layout.n == 2
    model = RaspModel.load(str(tmp_path / "u"))
    model.config = {**model.config, "input": {**model.config["input"], "range": [-50.0, 50.0]}}
    model.config.pop("weights_sha256")
    model.save(str(tmp_path / "bad"))  # save recomputes both hashes
    with pytest.raises(ArtifactError, match="input range"):
        load_simulator(str(tmp_path / "bad"))


def test_a_missing_u_names_the_command_that_makes_one(tmp_path) -> None:
    from rasp_compiler.errors import ArtifactError

    with pytest.raises(ArtifactError) as err:
        load_simulator(str(tmp_path / "nowhere"))
    assert "does not exist" in str(err.value) and "rasp simulate" in err.value.hint


def test_unknown_plan_and_non_real_inputs_are_refused() -> None:
    with pytest.raises(UserError, match="plan must be one of windows, direct"):
        build_simulator(2, 2, 1, plan="windowz")  # was built silently as "windows"
    lay = SequenceLayout(2, 2, 1)
    A = np.zeros((2, 2))
    with pytest.raises(UserError, match="X must hold real numbers"):
        lay.build(A, A, np.zeros((2, 2)) + 1j)  # the imaginary part was dropped silently
    with pytest.raises(UserError, match="X must hold real numbers"):
        lay.build(A, A, [["a", "b"], ["c", "d"]])  # was NumPy's bare ValueError
    with pytest.raises(UserError, match="rectangular"):
        lay.build(A, A, [[1.0, 2.0], [3.0]])


def test_the_headers_compile_command_gives_u_s_weights(tmp_path, capsys) -> None:
    """The header said `rasp compile ... -o U/`, which compiles float32: not the float64 U."""
    sim = build_simulator(2, 2, 1, input_range=(-2.0, 3.0))
    src = tmp_path / "u.rasp"
    src.write_text(sim.source)
    cmd = next(line for line in sim.source.splitlines() if "rasp compile THIS.rasp" in line)
    argv = cmd.split("rasp ", 1)[1].replace("THIS.rasp", str(src)).replace("U/", str(tmp_path / "U"))
    assert cli(argv.split()) == 0
    capsys.readouterr()
    from rasp_compiler.runtime import RaspModel

    hand = RaspModel.load(str(tmp_path / "U"))
    assert set(hand.tensors) == set(sim.model.tensors)
    assert all(bool((hand.tensors[k] == t).all()) for k, t in sim.model.tensors.items())


def test_check_draws_from_the_input_range_and_reports_progress(capsys) -> None:
    sim = build_simulator(2, 2, 1, input_range=(0.0, 1.0))
    A, V, X = random_layers(sim.layout, 30, seed=0, bounds=(0.0, 1.0))
    assert min(A.min(), V.min(), X.min()) >= 0.0  # [-1, 1] entries would be refused by this U
    assert np.array_equal(random_layers(sim.layout, 3, 0, bounds=(-1.0, 1.0))[0],
                          random_layers(sim.layout, 3, 0)[0])  # default draws unchanged
    heard: list[str] = []
    rep = check_simulator(sim, trials=5, bounds=(0.0, 1.0), batch=2, progress=heard.append)
    assert rep["max_abs_error"] <= 1e-9 and rep["entries"] == [0.0, 1.0]
    assert heard == ["trial 1 of 5", "trial 3 of 5", "trial 5 of 5"]
    # the CLI refused --check unless the range held [-1, 1]
    assert cli(["simulate", "--n", "2", "--d", "2", "--input-range", "0", "1", "--check",
                "--trials", "3"]) == 0
    assert "entries uniform in [0, 1]" in capsys.readouterr().out


@pytest.mark.parametrize("dtype, r", [("float32", 1e-20), ("float64", 1e-160)])
def test_a_range_whose_products_are_subnormal_is_refused(dtype, r, tmp_path, capsys) -> None:
    """float32 over [-1e-20, 1e-20]: every product x·v is subnormal, a saved U answered with a
    relative error of 1.1e-4 (the bar is 5e-6) and only --check said so."""
    emitted = tmp_path / "u.rasp"
    assert cli(["simulate", "--n", "2", "--d", "2", "--dtype", dtype, "--input-range", str(-r), str(r),
                "--emit-rasp", str(emitted), "--check", "--trials", "2"]) == 1
    err = capsys.readouterr().err
    assert f"--input-range {-r:g} {r:g} is too narrow for {dtype}" in err and err.count("error:") == 1
    assert not emitted.exists()
    with pytest.raises(UserError, match="too narrow"):
        build_simulator(2, 2, 1, dtype=dtype, input_range=(0.0, r))
    build_simulator(1, 1, 1, input_range=(0.0, 0.0))    # all zeros: exact, and allowed as before


def test_the_relative_error_of_a_subnormal_output_is_not_floored() -> None:
    """max rel error divided by max(max|T|, 1e-300): a T of 1e-320 with one subnormal ulp of error
    (4.9e-324, a relative 5e-4) was reported as 4.9e-24 and passed the 1e-9 bar."""
    sim = build_simulator(2, 2, 1)
    report = check_simulator(sim, trials=3, bounds=(-1e-160, 1e-160))
    assert report["max_abs_error"] > 0 and report["max_rel_error"] > 1e-9
    assert check_simulator(sim, trials=3)["max_rel_error"] < 1e-15


def test_a_range_whose_products_overflow_is_one_error_and_no_warning(tmp_path, capsys) -> None:
    """+-1e300 printed "RuntimeWarning: invalid value encountered in multiply" (0 * inf in an
    interval bound) before its error, and that NaN bound hid the derived value from the check."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would now be an exception, not the one error
        assert cli(["simulate", "--n", "2", "--d", "2", "--input-range", "-1e300", "1e300",
                    "-o", str(tmp_path / "U")]) == 1
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "Warning" not in err
    assert "'tokens_float' can reach 1e+300, too large to compute exactly" in err  # the input, first
    assert not (tmp_path / "U").exists()


def test_too_many_trials_are_refused_before_building(capsys) -> None:
    """10^11 trials was 'error: out of memory' with a hint about --max-len and vocabularies."""
    assert cli(["simulate", "--n", "2", "--d", "2", "--check", "--trials", "100000000000"]) == 1
    err = capsys.readouterr().err
    assert "--trials 100,000,000,000 draws" in err and "fewer --trials" in err


def test_verify_accepts_a_saved_u_against_its_emitted_source(tmp_path, capsys) -> None:
    """`rasp verify U/ u.rasp` of the very source --emit-rasp wrote said "config.json's 'simulator'
    differs" and blamed an edit: the block is added after compiling.  It is now checked against the
    source rasp simulate generates for it, so a source that is not U's still fails."""
    u, rasp = tmp_path / "U", tmp_path / "u.rasp"
    assert cli(["simulate", "--n", "2", "--d", "1", "--emit-rasp", str(rasp), "-o", str(u)]) == 0
    capsys.readouterr()
    assert cli(["verify", str(u), str(rasp)]) == 0
    assert "matches" in capsys.readouterr().out
    edited = tmp_path / "edited.rasp"
    edited.write_text(rasp.read_text().replace("n = 2;", "n = 2;  # edited"))
    assert cli(["verify", str(u), str(edited)]) == 1
    err = capsys.readouterr().err
    assert "config.json's 'simulator' differs" in err and "rasp simulate's U (n=2, d=1, H=1)" in err


def test_emit_rasp_replaces_a_link_and_names_a_directory(tmp_path, capsys) -> None:
    """--emit-rasp wrote with open(): through a symbolic link (truncating the file it points at),
    and in place (a killed run left half a program); a directory gave "(Is a directory)"."""
    kept = tmp_path / "kept.txt"
    kept.write_text("the user's file\n")
    link = tmp_path / "u.rasp"
    link.symlink_to(kept)
    assert cli(["simulate", "--n", "1", "--d", "1", "--emit-rasp", str(link)]) == 0
    assert kept.read_text() == "the user's file\n" and not link.is_symlink()
    assert link.read_text().startswith("# U, the universal simulator")
    capsys.readouterr()
    assert cli(["simulate", "--n", "1", "--d", "1", "--emit-rasp", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path} is a directory, not a file" in err and os.path.join(str(tmp_path), "u.rasp") in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.txt", "u.rasp"]   # no temporary left


def test_emit_rasp_never_replaces_a_saved_model_without_force(tmp_path, capsys) -> None:
    """`--emit-rasp U/model.safetensors` wrote U's source over a saved U's weights, silently."""
    assert cli(["simulate", "--n", "1", "--d", "1", "-o", str(tmp_path / "U")]) == 0
    weights, config = tmp_path / "U" / "model.safetensors", tmp_path / "U" / "config.json"
    before = weights.read_bytes(), config.read_bytes()
    capsys.readouterr()
    for victim in (weights, config):
        assert cli(["simulate", "--n", "1", "--d", "1", "--emit-rasp", str(victim)]) == 1
        err = capsys.readouterr().err
        assert f"--emit-rasp {victim} exists and is not a text file of RASP source" in err
        assert "--force" in err and err.count("error:") == 1
    assert (weights.read_bytes(), config.read_bytes()) == before
    text = tmp_path / "u.rasp"                          # RASP text is replaced as before
    for _ in range(2):
        assert cli(["simulate", "--n", "1", "--d", "1", "--emit-rasp", str(text)]) == 0
    assert cli(["simulate", "--n", "1", "--d", "1", "--emit-rasp", str(weights), "--force"]) == 0
    assert weights.read_text().startswith("# U, the universal simulator")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_range_too_wide_for_the_scores_gets_a_hint_for_simulate(dtype, capsys) -> None:
    """The compiler's hint spoke to a program's author ("smaller query/key s-ops"), which a user of
    rasp simulate cannot change: it names the options that can."""
    assert cli(["simulate", "--n", "3", "--d", "3", "--input-range", "-1e6", "1e6", "--check",
                "--dtype", dtype]) == 1
    err = capsys.readouterr().err
    assert "attention scores reach" in err and "s-ops" not in err and "--input-range" in err
    assert ("--dtype float64" in err) == (dtype == "float32")


def test_python_arguments_of_the_simulator_are_checked() -> None:
    """causal="no" built a causal U (and stored "no" in its config); a NumPy integer size was
    refused as "n must be a positive integer, got 2"; check_simulator(trials="3") was a TypeError
    and trials=0 a check of nothing that passed."""
    from rasp_compiler.simulator import build_simulator, check_simulator, generate_source

    with pytest.raises(UserError, match="causal must be True or False, got 'no'"):
        build_simulator(2, 1, 1, causal="no")
    with pytest.raises(UserError, match="causal must be True or False"):
        generate_source(2, 1, 1, causal=1)
    sim = build_simulator(np.int64(2), np.int64(1), 1, causal=np.bool_(False))
    assert sim.layout.n == 2 and type(sim.layout.n) is int
    saved = sim.model.config["simulator"]
    assert saved["causal"] is False and type(saved["n"]) is int
    for trials in ("3", 0, True):
        with pytest.raises(UserError, match="check_simulator's trials must be a whole number"):
            check_simulator(sim, trials=trials)
    assert check_simulator(sim, trials=np.int64(2))["max_abs_error"] < 1e-9
