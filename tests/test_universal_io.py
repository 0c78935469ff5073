"""Class mismatches are clear errors; files round-trip; backbones never depend on the target."""

from __future__ import annotations

import json
import re

import pytest
import torch
from universal_helpers import single_thread  # noqa: F401  (autouse fixture)

from rasp_compiler.cli import main
from rasp_compiler.errors import ArtifactError, UserError
from rasp_compiler.universal import Target, UniversalTransformer, build_universal, encode, fixed_backbone


@pytest.mark.parametrize("target_kwargs, words", [
    (dict(layers=3, heads=1, dim=2), "too deep"),
    (dict(layers=2, heads=1, dim=3), "too wide"),
    (dict(layers=2, heads=2, dim=2), "too many heads"),
    (dict(layers=2, heads=1, dim=2, residual=True), "residual mismatch"),
    (dict(layers=2, heads=1, dim=2, causal=True), "causal mask mismatch"),
    (dict(layers=1, heads=1, dim=2), "too shallow"),
])
def test_sparse_rejects_targets_outside_its_class(target_kwargs, words):
    ut = build_universal("sparse", 2, 1, 2)
    with pytest.raises(UserError, match=words):
        encode(ut, Target.random(seed=0, **target_kwargs))


def test_too_shallow_names_what_the_ut_lacks():
    """"without residual and values a layer cannot be the identity" was said of a UT with a
    residual (multihead), as if it lacked both."""
    ut = build_universal("multihead", 3, 1, 2, residual=True)
    with pytest.raises(UserError, match=r"\(the UT has no value matrices, so a padding layer") as err:
        encode(ut, Target.random(2, 1, 2, residual=True, values=False))
    assert "residual" not in str(err.value).split("too shallow")[1].split(")")[0]
    with pytest.raises(UserError, match=r"\(the UT has no residual stream, so a padding layer"):
        encode(build_universal("sparse", 2, 1, 2), Target.random(1, 1, 2, seed=0))


def test_multihead_rejects_values():
    ut = build_universal("multihead", 2, 2, 2, residual=True)
    with pytest.raises(UserError, match="has value matrices but the multihead construction has none"):
        encode(ut, Target.random(2, 2, 2, residual=True, values=True))
    # identity value matrices are "no values" and are accepted
    t = Target.random(2, 2, 2, residual=True, values=False)
    t.V = torch.eye(2, dtype=torch.float64).expand(2, 2, 2, 2).clone()
    encode(ut, t)


def test_all_mismatches_named_at_once():
    ut = build_universal("multihead", 2, 2, 2)
    with pytest.raises(UserError) as info:
        encode(ut, Target.random(3, 3, 4, values=True, residual=True))
    msg = info.value.message
    for words in ("too deep", "too many heads", "too wide", "value matrices", "residual"):
        assert words in msg


@pytest.mark.parametrize("args, words", [
    (("sparse", 2, 2, 2), "one head"),
    (("looped", 2, 1, 2, True), "only without a residual"),
    (("cubic", 2, 1, 2), "unknown construction"),
    (("paths", 0, 1, 2), "at least 1"),
    # refused before allocating: d = 100,000 asked for 240 GB
    (("sparse", 1, 1, 100_000), "width m=300,000, above the supported 20,000"),
    (("paths", 40, 8, 50), r"width m=about 10\^38"),
    (("random", 50, 50, 50), r"width m=about 10\^86 is above the supported 6,000"),
])
def test_build_errors(args, words):
    construction, L, H, d, *rest = args
    with pytest.raises(UserError, match=words):
        build_universal(construction, L, H, d, residual=bool(rest and rest[0]))



@pytest.mark.parametrize("kwargs, words", [
    ({"layers": "3"}, r"layers must be a whole number, got '3' \(str\)"),
    ({"layers": True}, r"layers must be a whole number, got True \(bool\)"),
    ({"dim": 2.0}, r"dim must be a whole number, got 2.0"),
    ({"dim": None}, r"dim must be a whole number, got None"),
    ({"causal": "yes"}, r"causal must be True or False, got 'yes'"),
    ({"residual": "no"}, r"residual must be True or False, got 'no'"),
    ({"construction": "random", "values": 0}, r"values must be True or False, got 0"),
    ({"construction": "random", "m": "8"}, r"m must be a whole number"),
    ({"construction": "random", "seed": -1}, r"seed must be at least 0, got -1"),
    ({"construction": "random", "seed": 2**70}, r"seed must be from 0 to"),
    ({"construction": ["sparse"]}, r"unknown construction \['sparse'\]"),
])
def test_build_universal_checks_its_python_arguments(kwargs, words):
    """From Python these ended in TypeErrors from torch, or worse were kept: causal="yes" was
    stored in the config (a saved UT was then refused at load), residual="no" counted as True."""
    args = {"construction": "sparse", "layers": 2, "heads": 1, "dim": 2, **kwargs}
    with pytest.raises(UserError, match=words):
        build_universal(**args)


def test_fixed_backbone_checks_its_python_arguments_on_the_training_path_too():
    """The sparse/looped backbone with a residual is built without build_universal's checks."""
    with pytest.raises(UserError, match="causal must be True or False, got 'x'"):
        fixed_backbone("sparse", 2, 1, 2, residual=True, causal="x")
    with pytest.raises(UserError, match="residual must be True or False, got 1"):
        fixed_backbone("sparse", 2, 1, 2, residual=1)
    assert fixed_backbone("sparse", 2, 1, 2, residual=True).config.residual is True


def test_target_random_checks_its_arguments_and_numpy_integers_are_whole_numbers(tmp_path):
    import numpy as np

    with pytest.raises(UserError, match="heads must be a whole number"):
        Target.random(2, "1", 2)
    with pytest.raises(UserError, match="causal must be True or False"):
        Target.random(2, 1, 2, causal="no")
    with pytest.raises(UserError, match="w_scale must be a finite number"):
        Target.random(2, 1, 2, w_scale=float("nan"))
    ut = build_universal("sparse", np.int64(2), np.int64(1), np.int64(2), causal=np.bool_(True))
    assert type(ut.config.layers) is int and ut.config.causal is True
    ut.save(tmp_path / "ut")  # a NumPy integer in the config was not JSON
    assert UniversalTransformer.load(tmp_path / "ut").config.causal is True
    target = Target.random(np.int64(2), 1, 2, causal=True)
    X = torch.randn(3, 2, dtype=torch.float64)
    y, _ = ut(X, *encode(ut, target))
    assert torch.allclose(y, target(X)[0], atol=1e-12)

def test_smaller_targets_are_padded_exactly_not_truncated():
    X = torch.randn(2, 6, 2, dtype=torch.float64)
    # narrower: d = 2 target in a d = 4 UT; fewer heads and layers in a residual paths UT
    for ut, target in ((build_universal("sparse", 2, 1, 4), Target.random(2, 1, 2, seed=1)),
                       (build_universal("paths", 3, 2, 3, residual=True),
                        Target.random(2, 1, 2, seed=2, residual=True))):
        E, U = encode(ut, target)
        assert E.shape[0] == 2
        assert float((ut(X, E, U)[0] - target(X)[0]).abs().max()) <= 1e-10


def test_backbone_never_depends_on_the_target():
    for construction, kw in (("paths", dict(residual=True)), ("random", {}), ("looped", {})):
        H = 1 if construction == "looped" else 2
        ut = build_universal(construction, 2, H, 3, **kw)
        before = {k: v.numpy().tobytes() for k, v in ut.backbone_tensors().items()}
        for seed in (1, 2):
            encode(ut, Target.random(2, H, 3, seed=seed, **kw))
        after = {k: v.numpy().tobytes() for k, v in ut.backbone_tensors().items()}
        assert before == after
        fresh = build_universal(construction, 2, H, 3, **kw)
        assert before == {k: v.numpy().tobytes() for k, v in fresh.backbone_tensors().items()}


def test_ut_save_load_round_trip(tmp_path):
    ut = build_universal("paths", 2, 2, 2, residual=True, causal=True)
    ut.save(tmp_path / "ut")
    assert json.loads((tmp_path / "ut" / "ut.json").read_text())["m"] == ut.config.m
    loaded = UniversalTransformer.load(tmp_path / "ut")
    assert loaded.config == ut.config
    target = Target.random(2, 2, 2, residual=True, causal=True, seed=3)
    E, U = encode(loaded, target)
    X = torch.randn(5, 2, dtype=torch.float64)
    assert torch.equal(loaded(X, E, U)[0], ut(X, E, U)[0])
    (tmp_path / "ut" / "ut.safetensors").write_bytes(b"garbage")
    with pytest.raises(ArtifactError):
        UniversalTransformer.load(tmp_path / "ut")
    with pytest.raises(ArtifactError, match="no universal transformer"):
        UniversalTransformer.load(tmp_path / "nothing")


def test_target_save_load_round_trip(tmp_path):
    target = Target.random(3, 2, 4, seed=7, residual=True, causal=True, d_out=5)
    target.save(tmp_path / "t.safetensors")
    back = Target.load(tmp_path / "t.safetensors")
    assert torch.equal(back.W, target.W) and torch.equal(back.V, target.V) and torch.equal(back.U, target.U)
    assert (back.residual, back.causal) == (True, True)
    ut = build_universal("paths", 3, 2, 4, residual=True, causal=True)
    ut.save(tmp_path / "ut")
    # the CLI runs a saved target through a saved UT
    assert main(["universal", "--load", str(tmp_path / "ut"), "--target", str(tmp_path / "t.safetensors"),
                 "--json"]) == 0


def test_ut_and_target_files_are_byte_identical_across_saves(tmp_path):
    """safetensors' save_file orders a metadata of two keys (format, config) differently from one
    save to the next: `rasp universal --save` of the same UT twice gave files that differed."""
    ut = build_universal("multihead", 2, 2, 2, residual=True)
    target = Target.random(2, 2, 2, seed=1, residual=True)
    uts, targets = set(), set()
    for i in range(8):
        ut.save(tmp_path / f"ut{i}")
        target.save(tmp_path / f"t{i}.safetensors")
        uts.add((tmp_path / f"ut{i}" / "ut.safetensors").read_bytes())
        targets.add((tmp_path / f"t{i}.safetensors").read_bytes())
    assert len(uts) == 1 and len(targets) == 1
    assert UniversalTransformer.load(tmp_path / "ut0").config == ut.config
    assert torch.equal(Target.load(tmp_path / "t0.safetensors").W, target.W)


def test_training_backbone_refuses_encoding():
    ut = fixed_backbone("sparse", 2, 1, 3, residual=True)
    assert ut.config.residual and ut.config.m == 15
    with pytest.raises(UserError, match="training backbone"):
        encode(ut, Target.random(2, 1, 3, residual=True))


def test_cli_json_fields(capsys):
    assert main(["universal", "--construction", "looped", "--layers", "2", "--dim", "3", "--check",
                 "--trials", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["construction", "layers", "heads", "dim", "m", "m_formula", "max_abs_error",
                         "attention_max_diff"]
    assert out["m"] == out["m_formula"] == 15 and out["max_abs_error"] <= 1e-10


def test_cli_lower_bound(capsys):
    assert main(["universal", "lower-bound", "--heads", "3", "--layers", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"heads": 3, "layers": 3, "rank": 27}
    assert main(["universal", "lower-bound", "--heads", "2", "--layers", "2", "--residual", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rank"] == 9
    assert main(["universal", "lower-bound"]) == 0
    assert "243" in capsys.readouterr().out


def test_cli_user_errors_have_no_traceback(capsys):
    assert main(["universal", "--layers", "2", "--dim", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: missing --construction") and "Traceback" not in err
    assert main(["universal", "--construction", "multihead", "--layers", "2", "--heads", "2", "--dim", "2",
                 "--target", "/nonexistent.safetensors"]) == 1
    assert "target file not found" in capsys.readouterr().err


def test_a_target_that_is_a_directory_is_named_as_one(tmp_path, capsys):
    """A directory given as --target was reported "target file not found" although it exists."""
    ut = build_universal("sparse", 1, 1, 2)
    ut.save(tmp_path / "ut")
    model = tmp_path / "model"  # what `rasp compile -o` writes
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"")
    for target, what, then in ((model, "a compiled model directory", "--program"),
                               (tmp_path / "ut", "a saved universal transformer directory", "--load"),
                               (tmp_path, "a directory", "Target.save")):
        assert main(["universal", "--load", str(tmp_path / "ut"), "--target", str(target)]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: {target} is {what}, not a target file"), err
        assert then in err and "not found" not in err and err.count("error:") == 1


@pytest.mark.parametrize("edit, words", [
    ({"residual": "false"}, "residual = 'false'"),     # bool("false") is True: a silent class change
    ({"dim": "4"}, "dim = '4'"),                        # was "header says d=4 but W has shape (.., 4, 4)"
    ({"causal": 0}, "causal = 0"),
])
def test_an_edited_target_header_is_named(tmp_path, capsys, edit, words):
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    Target.random(2, 1, 4, seed=0).save(tmp_path / "t.safetensors")
    with safe_open(str(tmp_path / "t.safetensors"), "pt") as f:
        meta = f.metadata()
    save_file(load_file(str(tmp_path / "t.safetensors")), str(tmp_path / "e.safetensors"),
              metadata={**meta, "config": json.dumps({**json.loads(meta["config"]), **edit})})
    with pytest.raises(ArtifactError, match=re.escape(f"damaged target header ({words}")):
        Target.load(tmp_path / "e.safetensors")
    assert Target.load(tmp_path / "t.safetensors").residual is False


@pytest.mark.parametrize("edit", [{"causal": True}, {"residual": True}])
def test_an_edited_target_header_of_the_right_types_is_refused(tmp_path, capsys, edit):
    # a well-typed edit ("causal": true for false) loaded and ran as another target without a word
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    Target.random(2, 1, 4, seed=0).save(tmp_path / "t.safetensors")
    with safe_open(str(tmp_path / "t.safetensors"), "pt") as f:
        meta = f.metadata()
    tensors = load_file(str(tmp_path / "t.safetensors"))
    config = {**json.loads(meta["config"]), **edit}
    save_file(tensors, str(tmp_path / "e.safetensors"), metadata={**meta, "config": json.dumps(config)})
    with pytest.raises(ArtifactError, match="does not match the digest saved with the weights"):
        Target.load(tmp_path / "e.safetensors")
    ut = tmp_path / "ut"
    build_universal("sparse", 2, 1, 4).save(ut)
    assert main(["universal", "--load", str(ut), "--target", str(tmp_path / "e.safetensors")]) == 1
    assert capsys.readouterr().err.count("error:") == 1
    del meta["sha256"]   # a target saved before the digest: taken as saved
    save_file(tensors, str(tmp_path / "old.safetensors"), metadata=meta)
    assert Target.load(tmp_path / "old.safetensors").causal is False



def test_a_target_file_with_an_unknown_tensor_is_refused(tmp_path):
    """A file written by hand with 'v' for 'V' loaded as a target without value matrices (V = I),
    and a check of it passed: the misspelt tensor was dropped without a word."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    Target.random(2, 1, 3, seed=0).save(tmp_path / "t.safetensors")
    with safe_open(str(tmp_path / "t.safetensors"), "pt") as f:
        meta = f.metadata()
    tensors = load_file(str(tmp_path / "t.safetensors"))
    tensors["v"] = tensors.pop("V")
    save_file(tensors, str(tmp_path / "e.safetensors"), metadata=meta)
    with pytest.raises(ArtifactError, match=r"unknown tensor\(s\) 'v' in a target file"):
        Target.load(tmp_path / "e.safetensors")
    assert Target.load(tmp_path / "t.safetensors").has_values

def test_a_missing_target_says_how_one_is_made(capsys):
    assert main(["universal", "--construction", "sparse", "--layers", "1", "--dim", "2",
                 "--target", "/nonexistent.safetensors"]) == 1
    assert "Target.random(L, H, d).save(FILE)" in capsys.readouterr().err


def _resave(src, dst, config=None, tensors=None):
    """Copy a saved UT with its header config and/or tensors changed (a hand-edited artifact)."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    with safe_open(str(src / "ut.safetensors"), "pt") as f:
        meta = f.metadata()
    weights = load_file(str(src / "ut.safetensors"))
    cfg = json.loads(meta["config"])
    if config:
        cfg.update(config)
    if tensors:
        tensors(weights)
    dst.mkdir()
    save_file(weights, str(dst / "ut.safetensors"), metadata={**meta, "config": json.dumps(cfg)})
    return dst


@pytest.mark.parametrize("config, tensors, words", [
    ({"causal": "no"}, None, "damaged config header (causal = 'no')"),
    ({"layers": "2"}, None, "damaged config header (layers = '2')"),
    ({"heads": -2}, None, "damaged config header (heads = -2"),
    (None, lambda t: t.update(R_K=t["R_K"].long()), "R_K has dtype torch.int64"),
    (None, lambda t: t["R_Q"].__setitem__((0, 0, 0, 0), 1 - t["R_Q"][0, 0, 0, 0]),
     "not those of the paths construction"),
    ({"residual": False}, None, "not those of the paths construction"),
    ({"values": False}, None, "not those of the paths construction"),
])
def test_edited_ut_artifacts_are_refused_on_load(tmp_path, capsys, config, tensors, words):
    build_universal("paths", 2, 2, 2, residual=True).save(tmp_path / "ut")
    bad = _resave(tmp_path / "ut", tmp_path / "bad", config, tensors)
    with pytest.raises(ArtifactError, match=re.escape(words)):
        UniversalTransformer.load(bad)
    assert main(["universal", "--load", str(bad), "--check", "--trials", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err


@pytest.mark.parametrize("config", [{"causal": True}, {"seed": 5}, {"residual": True}, {"dim": 3},
                                    {"extra": {"note": 1}}])
def test_an_edited_random_ut_header_is_refused_on_load(tmp_path, capsys, config):
    # a random UT's tensors are not rebuilt at load, so "causal": true (or another seed or dim) in an
    # edited header loaded without complaint and ran, and was shown, as another class
    from rasp_compiler.universal.random_ut import build_random

    build_random(1, 1, 2, seed=0).save(tmp_path / "ut")
    assert UniversalTransformer.load(_resave(tmp_path / "ut", tmp_path / "same")).config.seed == 0
    bad = _resave(tmp_path / "ut", tmp_path / "bad", config)
    with pytest.raises(ArtifactError, match="does not match the digest saved with the weights"):
        UniversalTransformer.load(bad)
    assert main(["universal", "--load", str(bad), "--check", "--trials", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("error:") == 1 and "Traceback" not in err


def test_a_random_ut_without_its_digest_is_refused_and_a_fixed_one_still_loads(tmp_path):
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from rasp_compiler.universal.random_ut import build_random

    build_random(1, 1, 2, seed=0).save(tmp_path / "r")
    build_universal("sparse", 2, 1, 2).save(tmp_path / "f")
    for name in ("r", "f"):
        path = tmp_path / name / "ut.safetensors"
        with safe_open(str(path), "pt") as f:
            meta = f.metadata()
        assert meta.pop("sha256")
        save_file(load_file(str(path)), str(path), metadata=meta)   # as saved before the digest
    with pytest.raises(ArtifactError, match="saved without the digest") as info:
        UniversalTransformer.load(tmp_path / "r")
    assert "--seed" in info.value.hint
    assert UniversalTransformer.load(tmp_path / "f").config.layers == 2   # rebuilt from its config


def test_load_refuses_class_options_that_disagree_with_the_file(tmp_path, capsys):
    build_universal("paths", 2, 2, 2, residual=True).save(tmp_path / "ut")
    assert main(["universal", "--load", str(tmp_path / "ut"), "--construction", "sparse", "--layers",
                 "3", "--check"]) == 1
    err = capsys.readouterr().err
    assert "--construction sparse (saved: paths)" in err and "--layers 3 (saved: 2)" in err
    # options that agree with the file are fine
    assert main(["universal", "--load", str(tmp_path / "ut"), "--construction", "paths", "--layers", "2",
                 "--residual", "--check", "--trials", "1", "--lengths", "3"]) == 0


@pytest.mark.parametrize("argv, words", [
    (["--construction", "sparse", "--layers", "2", "--dim", "2", "--check", "--lengths", "1,,2"],
     "--lengths must be comma-separated integers"),
    (["--construction", "sparse", "--layers", "2", "--dim", "2", "--check", "--lengths", "100000"],
     "--lengths: 100000 is longer than"),
    (["lower-bound", "--dim", "3"], "not --dim"),
    (["--program", "programs/frac_prevs.rasp", "--vocab", "helo", "--check", "--trials", "3"],
     "--check, --trials cannot be used with --program"),
    (["--program", "programs/frac_prevs.rasp", "--vocab", "helo", "--construction", "sparse"],
     "cannot simulate a compiled model: it has a residual stream"),
])
def test_ignored_or_impossible_options_are_errors(capsys, argv, words):
    assert main(["universal", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err


def test_failed_check_ends_with_one_error_line(capsys):
    """Below the width formula the random UT is a gradient fit: the check fails with exit 1 and an
    ``error:`` line that gives the error and the tolerance."""
    assert main(["universal", "--construction", "random", "--layers", "1", "--dim", "2", "--width", "2",
                 "--head-dim", "1", "--check", "--trials", "1", "--lengths", "4"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: max |UT(X,E) - T(X)| = ")
    assert err[0].endswith("is above the tolerance 1e-08")



def test_failed_check_with_json_says_why_on_stderr(capsys):
    """With --json it exited 1 with no word: the JSON has no tolerance and stderr was empty."""
    assert main(["universal", "--construction", "sparse", "--layers", "1", "--dim", "2", "--check",
                 "--trials", "1", "--lengths", "2", "--tolerance", "0", "--json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["max_abs_error"] > 0
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("is above the tolerance 0")


def test_the_helps_saved_target_example_runs_as_written(tmp_path, monkeypatch, capsys):
    """`rasp universal --help` showed `--load ut/mh --target my_target.safetensors --check` with no
    word on where a target comes from (no command writes one); the Target.random(...) it names
    now makes a target of ut/mh's class, and the two lines run as written."""
    from rasp_compiler.commands.universal import EXAMPLES

    lines = EXAMPLES.splitlines()
    save = next(line for line in lines if "--save ut/mh" in line).split("#")[0].split()
    load = next(line for line in lines if "--target my_target" in line).split()
    made = next(line for line in lines if ".save(\"my_target.safetensors\")" in line).split("#", 1)[1]
    monkeypatch.chdir(tmp_path)
    assert main(save[1:]) == 0
    eval(made.strip(), {"Target": Target})
    assert main(load[1:]) == 0
    assert "ok (tolerance" in capsys.readouterr().out


def test_a_lower_bound_too_slow_to_compute_is_refused_with_the_layers_that_fit(capsys):
    """--heads 8 --layers 4 (4,096 paths) was accepted under the old 5,000 cap and ran past 10
    minutes without a word (the elimination is cubic: 1,024 paths take about 20 s); the error named
    no option, though the table's default layers 1..5 may be what is too many."""
    assert main(["universal", "lower-bound", "--heads", "8", "--layers", "4"]) == 1
    err = capsys.readouterr().err
    assert "4,096 paths is too many" in err and "give --layers 3 or fewer" in err
    from rasp_compiler.universal.lower_bound import MAX_PATHS

    assert MAX_PATHS == 4 ** 5   # `rasp universal lower-bound --residual` (docs/universal.md) still fits


def test_a_readable_copy_that_says_another_class_is_refused(tmp_path):
    """ut.json is a copy of the header, never read: a ut.json of another UT beside the weights
    (or an edited one) told a reader one class while another ran."""
    from rasp_compiler.universal.lookup.backbone import LookupBackbone, build_backbone
    from rasp_compiler.universal.lookup.size_class import parse_class

    a = build_universal("sparse", 2, 1, 2).save(tmp_path / "a")
    b = build_universal("sparse", 3, 1, 2).save(tmp_path / "b")
    (a / "ut.json").write_text((b / "ut.json").read_text())
    with pytest.raises(ArtifactError, match="ut.json does not describe what ut.safetensors holds"):
        UniversalTransformer.load(a)
    (a / "ut.json").unlink()  # absent: not needed
    assert UniversalTransformer.load(a).config.layers == 2
    bb = build_backbone(parse_class("small")).save(tmp_path / "bb")
    doc = json.loads((bb / "backbone.json").read_text())
    doc["class"]["causal"] = True
    (bb / "backbone.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="backbone.json does not describe"):
        LookupBackbone.load(bb)
