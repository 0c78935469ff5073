"""Bad numbers, unwritable outputs and non-finite results on the simulate / universal / experiment /
export / show commands: one ``error: ...`` line and a non-zero exit, never a traceback and never a
silent "ok"."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from rasp_compiler.cli import main as cli
from rasp_compiler.commands.options import SEED_MAX

ROOT = Path(__file__).resolve().parents[1]
REVERSE = str(ROOT / "programs/reverse.rasp")
HISTOGRAM = str(ROOT / "programs/histogram.rasp")
PROC_SYS = "/proc/sys"  # a directory in which nothing can be created, even by root
needs_proc = pytest.mark.skipif(not os.path.isdir(PROC_SYS), reason="needs Linux /proc/sys")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_error(rc: int, err: str, *fragments: str) -> None:
    assert rc != 0
    assert "Traceback" not in err
    assert err.count("error:") == 1, err
    assert err.startswith("error:") or ": error:" in err.splitlines()[0], err
    for frag in fragments:
        assert frag in err, (frag, err)


@pytest.fixture(scope="module")
def compiled_reverse(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("rev")
    assert cli(["compile", REVERSE, "--vocab", "abc", "--max-len", "4", "-o", str(out)]) == 0
    return str(out)


# ----- seeds: the same range everywhere -----------------------------------------------------------
SEED_COMMANDS = {
    "simulate": ["simulate", "--n", "2", "--d", "2", "--check"],
    "universal": ["universal", "--construction", "sparse", "--layers", "1", "--dim", "2", "--check"],
    "universal-program": ["universal", "--program", HISTOGRAM, "--vocab", "abc", "--attention-layer", "0"],
    "dyck1": ["experiment", "dyck1", "--backbone", "random", "--settings", "base", "--steps", "1"],
    "khop": ["experiment", "khop", "--k", "1", "--settings", "base", "--steps", "1"],
    "probe": ["experiment", "probe", "no-such-run"],
    "export": ["export", "no-such-model", "-o", "x.pt"],
    "check": ["check", str(ROOT / "programs/softmax.rasp"), "--input-range", "-1", "1", "--samples", "3"],
}


@pytest.mark.parametrize("seed", ["-1", str(SEED_MAX + 1)])
@pytest.mark.parametrize("command", sorted(SEED_COMMANDS))
def test_seed_out_of_range_is_refused_before_any_work(capsys, command: str, seed: str) -> None:
    rc, out, err = run(capsys, *SEED_COMMANDS[command], "--seed", seed)
    assert_one_error(rc, err, f"--seed must be between 0 and {SEED_MAX}, got {seed}")
    assert out == ""


def test_largest_seed_works(capsys) -> None:
    rc, _, err = run(capsys, "universal", "--construction", "random", "--layers", "1", "--dim", "2",
                     "--check", "--trials", "1", "--seed", str(SEED_MAX))
    assert rc == 0, err


# ----- other numbers ------------------------------------------------------------------------------
UT = ["universal", "--construction", "sparse", "--layers", "1", "--dim", "2"]
DYCK = ["experiment", "dyck1", "--settings", "base", "--steps", "1"]


@pytest.mark.parametrize("argv, message", [
    (UT + ["--check", "--tolerance", "nan"], "--tolerance must be a non-negative finite number, got nan"),
    (UT + ["--check", "--tolerance", "-1"], "--tolerance must be a non-negative finite number, got -1"),
    (UT + ["--check", "--tolerance", "inf"], "--tolerance must be a non-negative finite number, got inf"),
    (UT + ["--check", "--trials", "0"], "--trials must be at least 1, got 0"),
    (["universal", "--construction", "random", "--layers", "1", "--dim", "2", "--width", "0"],
     "--width must be at least 1, got 0"),
    (["universal", "--program", HISTOGRAM, "--vocab", "abc", "--attention-layer", "0", "--max-inputs", "0"],
     "--max-inputs must be at least 1, got 0"),
    (["universal", "--program", HISTOGRAM, "--vocab", "abc", "--attention-layer", "0", "--max-inputs", "-1"],
     "--max-inputs must be at least 1, got -1"),
    (DYCK + ["--threads", "0"], "--threads must be at least 1, got 0"),
    (DYCK + ["--threads", "-1"], "--threads must be at least 1, got -1"),
    (DYCK + ["--lr", "inf"], "--lr must be a positive finite number, got inf"),
    (DYCK + ["--lr", "nan"], "--lr must be a positive finite number, got nan"),
    (DYCK + ["--lr", "0"], "--lr must be a positive finite number, got 0"),
    (DYCK + ["--batch", "0"], "--batch must be at least 1, got 0"),
    (["experiment", "khop", "--k", "2", "--settings", "base", "--curriculum", "-1"],
     "--curriculum must be at least 0, got -1"),
    (["experiment", "probe", "no-such-run", "--samples", "0"], "--samples must be at least 1, got 0"),
    (["experiment", "table", "--quick", "--dry-run", "--time-budget", "nan"],
     "--time-budget must be a positive finite number, got nan"),
    (["experiment", "table", "--quick", "--dry-run", "--time-budget", "-5"],
     "--time-budget must be a positive finite number, got -5"),
    (["experiment", "table", "--quick", "--dry-run", "--jobs", "0"], "--jobs must be at least 1, got 0"),
    (["experiment", "table", "--quick", "--dry-run", "--seeds", "0,-1"], "--seeds: seeds are at least 0"),
    (["simulate", "--n", "2", "--d", "2", "--check", "--trials", "0"], "--trials must be at least 1, got 0"),
    (["simulate", "--n", "2", "--d", "0", "--check"], "--d must be at least 1, got 0"),
    (["export", "no-such-model", "-o", "x.pt", "--inputs", "0"], "--inputs must be at least 1, got 0"),
])
def test_nonsense_numbers_are_refused(capsys, argv: list[str], message: str) -> None:
    rc, out, err = run(capsys, *argv)
    assert_one_error(rc, err, message)
    assert out == ""


# ----- non-finite results fail the checks -----------------------------------------------------------
def test_simulate_check_fails_on_nan_output(capsys, monkeypatch) -> None:
    from rasp_compiler.simulator.build import Simulator

    monkeypatch.setattr(Simulator, "run_sequences",
                        lambda self, seqs: np.full(np.atleast_2d(seqs).shape, np.nan))
    rc, out, err = run(capsys, "simulate", "--n", "2", "--d", "2", "--check", "--trials", "3")
    assert_one_error(rc, err, "not finite (NaN or inf) on 3 of 3 random layers")
    assert "max abs error inf" in out and "max abs error 0," not in out
    rc, out, err = run(capsys, "simulate", "--n", "2", "--d", "2", "--check", "--trials", "2", "--json")
    assert_one_error(rc, err, "not finite")
    report = json.loads(out)  # valid JSON: no NaN / Infinity tokens
    assert report["max_abs_error"] is None and report["non_finite_trials"] == 2


def test_check_simulator_counts_non_finite_trials(monkeypatch) -> None:
    from rasp_compiler.simulator import build_simulator, check_simulator
    from rasp_compiler.simulator.build import Simulator

    sim = build_simulator(2, 2, 1)
    good = check_simulator(sim, trials=2)
    assert good["non_finite_trials"] == 0 and good["max_abs_error"] < 1e-9
    real = Simulator.run_sequences

    def one_nan(self, seqs):
        out = real(self, seqs)
        out[0, 0] = np.nan
        return out

    monkeypatch.setattr(Simulator, "run_sequences", one_nan)
    bad = check_simulator(sim, trials=2, batch=1)
    assert bad["non_finite_trials"] == 2 and math.isinf(bad["max_abs_error"])


def test_simulate_refuses_a_range_that_overflows_the_dtype(capsys) -> None:
    big = "1" + "0" * 30 + ".0"  # 1e30: argparse reads "-1e30" as an option, "-1000...0.0" as a number
    rc, out, err = run(capsys, "simulate", "--n", "2", "--d", "2", "--dtype", "float32",
                       "--input-range", "-" + big, big, "--check", "--trials", "3")
    assert_one_error(rc, err, "float32")
    assert "max abs error" not in out


def test_simulate_refuses_overflowing_weights(capsys, monkeypatch) -> None:
    import rasp_compiler.simulator as simulator

    real = simulator.build_simulator

    def overflowing(*a, **kw):
        sim = real(*a, **kw)
        t = next(iter(sim.model.tensors.values()))
        with torch.no_grad():
            t[(0,) * t.dim()] = float("inf")
        return sim

    monkeypatch.setattr(simulator, "build_simulator", overflowing)
    rc, out, err = run(capsys, "simulate", "--n", "2", "--d", "2", "--check", "--trials", "2")
    assert_one_error(rc, err, "too wide for float64", "overflow")
    assert "max abs error" not in out


def test_universal_check_fails_on_nan_output(capsys, monkeypatch) -> None:
    from rasp_compiler.universal.model import UniversalTransformer

    real = UniversalTransformer.steps   # the check runs the UT head by head (steps)

    def nan_steps(self, *a, **kw):
        y = yield from real(self, *a, **kw)
        return y * float("nan")

    monkeypatch.setattr(UniversalTransformer, "steps", nan_steps)
    rc, out, err = run(capsys, *UT, "--check", "--trials", "2")
    assert_one_error(rc, err, "not finite (NaN or inf) on 2 of 2 random targets")
    line = next(ln for ln in out.splitlines() if "max |UT(X,E) - T(X)|" in ln)
    assert "not finite" in line and "FAILED" in line
    rc, out, err = run(capsys, *UT, "--check", "--trials", "2", "--json")
    assert_one_error(rc, err, "not finite")
    assert json.loads(out)["max_abs_error"] is None


def test_universal_load_refuses_nan_weights(capsys, tmp_path) -> None:
    from rasp_compiler.universal import build_universal

    ut = build_universal("sparse", 1, 1, 2)
    with torch.no_grad():
        ut.r_q[(0,) * ut.r_q.dim()] = float("nan")
    ut.save(tmp_path / "ut")
    rc, out, err = run(capsys, "universal", "--load", str(tmp_path / "ut"), "--check", "--trials", "1")
    assert_one_error(rc, err, "NaN or inf")
    assert out == ""


def test_compare_takes_nan_as_infinite_error() -> None:
    from rasp_compiler.universal import Target, build_universal
    from rasp_compiler.universal.check import compare

    ut = build_universal("sparse", 1, 1, 2)
    target = Target.random(1, 1, 2, seed=0)
    err, att, _ = compare(ut, target, lengths=(2, 3))
    assert err < 1e-10 and att < 1e-10
    with torch.no_grad():
        ut.r_q.fill_(float("nan"))
    err, att, _ = compare(ut, target, lengths=(2, 3))
    assert math.isinf(err)


# ----- outputs that cannot be written -------------------------------------------------------------
@pytest.fixture
def not_a_dir(tmp_path) -> Path:
    f = tmp_path / "plain-file"
    f.write_text("x")
    return f


def test_simulate_unwritable_out(capsys, not_a_dir) -> None:
    target = str(not_a_dir / "U")
    rc, out, err = run(capsys, "simulate", "--n", "2", "--d", "2", "-o", target)
    assert_one_error(rc, err, f"error: {target}: cannot write")
    rc, out, err = run(capsys, "simulate", "--n", "2", "--d", "2", "--emit-rasp", str(not_a_dir / "u.rasp"))
    assert_one_error(rc, err, f"error: {not_a_dir / 'u.rasp'}: cannot write")


@needs_proc
def test_simulate_out_in_proc_sys(capsys) -> None:
    rc, out, err = run(capsys, "simulate", "--n", "2", "--d", "2", "-o", PROC_SYS)
    assert_one_error(rc, err, f"error: {PROC_SYS}: cannot write")


@needs_proc
def test_universal_save_unwritable(capsys, not_a_dir) -> None:
    for target in (PROC_SYS, str(not_a_dir / "ut")):
        rc, out, err = run(capsys, *UT, "--save", target)
        assert_one_error(rc, err, f"error: {target}: cannot write")


@needs_proc
def test_export_unwritable(capsys, compiled_reverse, not_a_dir) -> None:
    pytest.importorskip("transformer_lens")
    for target in ("/proc/x.pt", str(not_a_dir / "x.pt")):
        rc, out, err = run(capsys, "export", compiled_reverse, "-o", target)
        assert_one_error(rc, err, f"error: {target}: cannot write")


# ----- show: the file is in the format its name says --------------------------------------------------
@pytest.mark.parametrize("name, extra, message", [
    ("plan.gif", [], "draws PNG or SVG, not GIF"),
    ("plan.PDF", [], "draws PNG or SVG, not PDF"),
    ("plan.jpg", ["--format", "png"], "draws PNG or SVG, not JPG"),
    ("plan.png", ["--format", "svg"], "names a .png file but --format is svg"),
])
def test_show_refuses_a_suffix_it_does_not_write(capsys, tmp_path, name, extra, message) -> None:
    out_file = tmp_path / name
    rc, out, err = run(capsys, "show", REVERSE, "--vocab", "abc", "--max-len", "3", "-o", str(out_file),
                       *extra)
    assert_one_error(rc, err, message)
    assert not out_file.exists()


def test_show_svg_suffix_and_matching_format(capsys, tmp_path) -> None:
    out_file = tmp_path / "plan.SVG"
    rc, out, err = run(capsys, "show", REVERSE, "--vocab", "abc", "--max-len", "3", "-o", str(out_file),
                       "--format", "svg")
    assert rc == 0, err
    assert b"<svg" in out_file.read_bytes()[:2000]


def test_help_states_the_limits(capsys) -> None:
    for argv in (["simulate"], ["universal"], ["export"], ["experiment", "dyck1"], ["experiment", "probe"]):
        with pytest.raises(SystemExit):
            cli([*argv, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert f"0 to {SEED_MAX}" in text, argv
    with pytest.raises(SystemExit):
        cli(["universal", "--help"])
    assert "finite and >= 0" in " ".join(capsys.readouterr().out.split())


def test_torch_seed_range_covers_derived_seeds() -> None:
    # universal derives seed * 1_000_003 + trial and seed * 7919 + trial: both must stay valid seeds
    torch.Generator().manual_seed(SEED_MAX * 1_000_003 + 100)


def test_a_nan_output_never_agrees_in_check() -> None:
    """max() drops NaN: a numerical output of NaN must count as a disagreement with error inf."""
    from rasp_compiler.compiler.checking import agree

    assert agree([float("nan"), 1.0], [0.5, 1.0], True, 1e-5) == (False, math.inf)
    assert agree([0.5, 1.0], [0.5, 1.0], True, 1e-5) == (True, 0.0)


# ----- a directory where a program goes; a nameless .pt ---------------------------------------------
@pytest.mark.parametrize("command", ["run", "check", "compile"])
def test_a_model_directory_given_as_a_program_points_at_rasp_eval(capsys, compiled_reverse, command,
                                                                   tmp_path) -> None:
    extra = {"run": ["--input", "abc"], "check": ["--vocab", "abc", "--max-len", "3"],
             "compile": ["--vocab", "abc", "--max-len", "3", "-o", str(tmp_path / "m")]}[command]
    rc, _, err = run(capsys, command, compiled_reverse, *extra)
    assert_one_error(rc, err, "is a directory, not a RASP program", "rasp eval")


def test_export_refuses_a_file_named_only_pt(capsys, compiled_reverse, tmp_path) -> None:
    rc, _, err = run(capsys, "export", compiled_reverse, "-o", str(tmp_path / ".pt"))
    assert_one_error(rc, err, "give the file a name before .pt")
    assert not (tmp_path / ".json").exists()


# ----- options that did nothing: refused instead of silently ignored -------------------------------
SIM = ["simulate", "--n", "2", "--d", "2"]
TABLE = ["experiment", "table", "--quick", "--dry-run"]


@pytest.mark.parametrize("argv, message", [
    # they act only with --verify / --check: without it the command ran and ignored them
    (["export", "no-such-model", "-o", "x.pt", "--inputs", "5"], "--inputs applies only with --verify"),
    (["export", "no-such-model", "-o", "x.pt", "--seed", "3", "--tolerance", "1"],
     "--seed, --tolerance apply only with --verify"),
    (["export", "no-such-model", "-o", "x.pt", "--verify", "--tolerance", "inf"],
     "--tolerance must be a non-negative finite number, got inf"),
    (SIM + ["-o", "U", "--trials", "3"], "--trials applies only with --check"),
    (SIM + ["-o", "U", "--trace", "--seed", "1"], "--trace, --seed apply only with --check"),
    (["simulate", "--model", "no-such-U", "--input-json", "[1]", "--seed", "1"],
     "--seed does not apply to --model"),
    (UT + ["--trials", "3"], "--trials cannot be used without --check or --target"),
    (UT + ["--lengths", "3", "--dtype", "float32"], "--lengths, --dtype cannot be used without --check"),
    (UT + ["--check", "--vocab", "abc"], "--vocab cannot be used without --program"),
    (UT + ["--check", "--max-len", "3", "--attention-layer", "0"],
     "--max-len, --attention-layer cannot be used without --program"),
    (["check", REVERSE, "--vocab", "ab", "--max-len", "3", "--exhaustive", "--seed", "5"],
     "--seed draws random inputs, and --exhaustive checks every input"),
    (["check", str(ROOT / "programs/maxmin.rasp"), "--input-range", "-1", "1", "--exhaustive"],
     "--exhaustive needs a vocabulary"),
    # it said "fixed_length must be between 1 and max_len (3)", the Python keywords
    (["compile", REVERSE, "--vocab", "ab", "--max-len", "3", "--fixed-length", "0", "-o", "m"],
     "error: --fixed-length 0 is not between 1 and --max-len (3)"),
    (["check", REVERSE, "--vocab", "ab", "--max-len", "3", "--fixed-length", "4"],
     "error: --fixed-length 4 is not between 1 and --max-len (3)"),
    (TABLE + ["--only", "no-such-run"], "--only no-such-run selects no run of the quick grid"),
    (TABLE + ["--seeds", "99"], "--seeds 99 selects no run of the quick grid"),
    (["experiment", "table", "--quick", "--report-only", "--jobs", "2"],
     "--report-only runs nothing, so --jobs would do nothing"),
    # an empty value (an unset shell variable) fell back to the default without a word
    (["run", REVERSE, "--input", "ab", "--output", ""], "--output is empty"),
    (["compile", REVERSE, "--vocab", "ab", "--max-len", "3", "-o", ""], "--out is empty"),
    (["compile", REVERSE, "--vocab", "ab", "--max-len", "3", "-o", "m", "--output", ""], "--output is empty"),
    (["check", REVERSE, "--vocab", "ab", "--max-len", "3", "--output", ""], "--output is empty"),
    (["show", REVERSE, "--vocab", "ab", "--max-len", "3", "-o", "p.png", "--output", ""],
     "--output is empty"),
    (SIM + ["-o", ""], "--out is empty"),
    (SIM + ["--emit-rasp", ""], "--emit-rasp is empty"),
    (UT + ["--save", ""], "--save is empty"),
    (["universal", "--program", HISTOGRAM, "--vocab", "abc", "--output", ""], "--output is empty"),
    (DYCK + ["--out", ""], "--out is empty"),
    (["experiment", "probe", "no-such-run", "--save", ""], "--save is empty"),
    (TABLE + ["--seeds", ""], "--seeds is empty"),
    (["repl", "--example", ""], "--example is empty"),
    # too many inputs: drawing them all at once ran out of memory
    (["check", REVERSE, "--vocab", "ab", "--max-len", "3", "--samples", "100000000"],
     "--samples 100,000,000 is more than the 1,000,000 a check takes"),
    (["check", REVERSE, "--vocab", "ab", "--max-len", "512", "--samples", "1000000"],
     "--samples 1,000,000 at --max-len 512 draws up to 512,000,000 tokens, more than the 20,000,000"),
    # --vocab: repeats were dropped (and `check` counted each input twice); '[]' is two characters
    (["check", REVERSE, "--vocab", "aab", "--max-len", "2"], '--vocab repeats the token "a"'),
    (["check", REVERSE, "--vocab", '["a", "b", "a"]', "--max-len", "2"], '--vocab repeats the token "a"'),
    (["check", REVERSE, "--vocab", "[]", "--max-len", "2"], """--vocab '["[", "]"]'"""),
    # tokens separated by commas, or JSON that is no list: "repeats the token ','" sent the user to
    # remove a comma; the hint now says how to give those tokens
    (["check", REVERSE, "--vocab", "ab,cd,ef", "--max-len", "2"],
     """for tokens separated by commas or blanks, give a JSON list: --vocab '["ab", "cd", "ef"]'"""),
    (["check", REVERSE, "--vocab", '"abc"', "--max-len", "2"], "the quotes are characters too: --vocab abc"),
    (["check", REVERSE, "--vocab", '{"a": 1, "b": 2}', "--max-len", "2"],
     """a JSON --vocab is a list of tokens: --vocab '["a", "b"]'"""),
    (["check", REVERSE, "--vocab", "[](){}", "--max-len", "2"],
     """--vocab '["[", "]", "(", ")", "{", "}"]'"""),
    # valid JSON that json.loads cannot read: a traceback before
    (["simulate", "--model", "no-such-U", "--input-json", "[" + "1" * 5000 + "]"],
     "--input-json cannot be read: a number in it has more than 4,300 digits"),
    (["simulate", "--model", "no-such-U", "--input-json", "[" * 100_000],
     "--input-json cannot be read: it nests too deeply"),
])
def test_ignored_or_empty_options_are_refused(capsys, tmp_path, monkeypatch, argv: list[str],
                                              message: str) -> None:
    monkeypatch.chdir(tmp_path)  # nothing may be written, and nothing into the repository
    rc, out, err = run(capsys, *argv)
    assert_one_error(rc, err, message)
    assert out == "" and not any(tmp_path.iterdir())


def test_a_real_valued_check_runs_the_model_on_its_device(capsys, monkeypatch) -> None:
    """--device was ignored with --input-range (the model ran on the CPU whatever it said)."""
    from rasp_compiler.runtime import RaspModel

    asked: list[str] = []
    real_to = RaspModel.to

    def to(self, device):  # record where it was sent; run on the CPU (no GPU needed here)
        asked.append(str(device))
        return real_to(self, "cpu")
    monkeypatch.setattr(RaspModel, "to", to)
    maxmin = str(ROOT / "programs/maxmin.rasp")
    rc, out, err = run(capsys, "check", maxmin, "--input-range", "-1", "1", "--samples", "5",
                       "--device", "cuda:0", "--json")
    assert rc == 0, err
    assert asked == ["cuda:0"] and json.loads(out)["device"] == "cpu"
    monkeypatch.undo()
    rc, out, err = run(capsys, "check", maxmin, "--input-range", "-1", "1", "--device", "tpu")
    assert_one_error(rc, err, "error: unknown device 'tpu'")


def test_check_of_a_fixed_length_model_checks_that_length(capsys) -> None:
    """It checked every length up to --max-len, and the model refused the first shorter input."""
    rc, out, err = run(capsys, "check", REVERSE, "--vocab", "abc", "--max-len", "4", "--fixed-length", "3")
    assert rc == 0, err
    assert "exhaustive: 27/27 inputs agree" in out
    rc, out, err = run(capsys, "check", REVERSE, "--vocab", "abc", "--max-len", "4", "--fixed-length", "3",
                       "--samples", "10", "--json")
    assert rc == 0, err
    report = json.loads(out)
    assert report["mode"] == "random" and 0 < report["inputs_checked"] == report["inputs_agreeing"] <= 27


def test_a_saved_u_refuses_an_integer_past_the_float_range(capsys, tmp_path) -> None:
    """np.array(..., float64) raised OverflowError on a 400-digit integer: a traceback."""
    assert cli(["simulate", "--n", "1", "--d", "1", "-o", str(tmp_path / "U")]) == 0
    capsys.readouterr()
    size = 3  # A (1), V (1), X (1)
    rc, out, err = run(capsys, "simulate", "--model", str(tmp_path / "U"), "--input-json",
                       "[" + ", ".join(["1" * 400] + ["0.5"] * (size - 1)) + "]")
    assert_one_error(rc, err, "non-finite value at position 0")
    assert out == ""


def test_an_infeasible_exhaustive_check_is_refused_before_compiling(capsys, monkeypatch) -> None:
    """A scale audit: 300 tokens at --max-len 512 printed a 1,400-digit count, after a compile."""
    import rasp_compiler.commands.compile as compile_command

    def no_compile(args):  # noqa: ANN001, ANN202
        raise AssertionError("compiled before refusing")

    monkeypatch.setattr(compile_command, "compile_from_args", no_compile)
    vocab = json.dumps([str(i) for i in range(300)])
    assert cli(["check", "programs/reverse.rasp", "--vocab", vocab, "--max-len", "512", "--exhaustive"]) == 1
    err = capsys.readouterr().err
    assert "--exhaustive would check about 10^1268 inputs, more than the 1,000,000" in err
    assert len(err) < 200


def test_compile_takes_the_files_fixed_length_line(capsys, tmp_path) -> None:
    """matmul.rasp states its shape with '# fixed-length: 10'; ``rasp run`` refused other lengths
    but ``rasp compile`` without --fixed-length built a model that took them (a 2x2 times 2x3
    product computed from 3 entries).  The line is the default, and a contradicting
    --fixed-length is one clear error."""
    matmul = str(ROOT / "programs/matmul.rasp")
    out_dir = str(tmp_path / "m")
    rc, out, err = run(capsys, "compile", matmul, "--input-range", "-1", "1", "--max-len", "12",
                       "-o", out_dir)
    assert rc == 0, err
    assert json.loads((tmp_path / "m" / "config.json").read_text())["fixed_length"] == 10
    rc, out, err = run(capsys, "eval", out_dir, "--input-json", "[1, 2, 3]")
    assert_one_error(rc, err, "error: input 0 has 3 values; this model takes exactly 10")
    rc, out, err = run(capsys, "compile", matmul, "--input-range", "-1", "1", "--max-len", "12",
                       "--fixed-length", "8", "-o", str(tmp_path / "m8"))
    assert_one_error(rc, err, "error: --fixed-length 8 contradicts")
    assert not (tmp_path / "m8").exists()
    rc, out, err = run(capsys, "compile", matmul, "--input-range", "-1", "1", "--max-len", "6",
                       "-o", str(tmp_path / "m6"))
    assert_one_error(rc, err, "'# fixed-length' line) is not between 1 and --max-len (6)")


@pytest.mark.parametrize("lines, message", [
    # `rasp run` said "takes inputs of exactly 0 tokens", which no input can meet
    ("# fixed-length: 0\n", "'# fixed-length: 0' line states no input length"),
    # the first line won without a word
    ("# fixed-length: 3\n# fixed-length: 2\n",
     "states 2 input lengths: '# fixed-length: 2' and '# fixed-length: 3'"),
    # int() of over 4,300 digits: a ValueError traceback
    ("# fixed-length: " + "9" * 5000 + "\n", "line states a number of 5,000 digits, past any input length"),
])
def test_a_fixed_length_line_that_states_no_one_length_is_one_error(capsys, tmp_path, lines: str,
                                                                    message: str) -> None:
    prog = tmp_path / "p.rasp"
    prog.write_text(lines + "x = length - indices;\n")
    rc, out, err = run(capsys, "run", str(prog), "--input", "abc")
    assert_one_error(rc, err, message)
    rc, out, err = run(capsys, "compile", str(prog), "--vocab", "abc", "--max-len", "4",
                       "-o", str(tmp_path / "m"))
    assert_one_error(rc, err, message)
    assert not (tmp_path / "m").exists()
    prog.write_text("# fixed-length: 3\n# fixed-length: 3\nx = length - indices;\n")  # said twice: fine
    rc, out, err = run(capsys, "run", str(prog), "--input", "abc")
    assert rc == 0 and out == "[3, 2, 1] (ints)\n"


def test_a_byte_order_mark_does_not_hide_the_files_first_comment_line(capsys, tmp_path) -> None:
    """`# fixed-length: 2` (or `# example-json:`) on the first line of a file saved with a BOM was
    not seen: `rasp run` took any length, `rasp compile --input-range` asked for --max-len."""
    prog = tmp_path / "p.rasp"
    prog.write_text("\ufeff# fixed-length: 2\nx = length - indices;\n", encoding="utf-8")
    rc, out, err = run(capsys, "run", str(prog), "--input", "abc")
    assert_one_error(rc, err, "takes inputs of exactly 2 tokens")
    prog.write_text("\ufeff# example-json: [1, 2, 3] -> [2, 4, 6]\ntokens = tokens_float;\nx = tokens * 2;\n",
                    encoding="utf-8")
    rc, out, err = run(capsys, "compile", str(prog), "--input-range", "-1", "1", "-o", str(tmp_path / "m"))
    assert rc == 0, err
    assert json.loads((tmp_path / "m" / "config.json").read_text())["fixed_length"] == 3
