"""Artifacts and crashes (issue 49, defects 5-8, 11-13): hostile sizes in a model's files, links,
foreign directories, kills and full disks during a write, file modes, early cost refusals and
``rasp verify``.  The write protocol is ``rasp_compiler/atomic_dir.py``; docs/robustness.md,
"Artifacts and crashes", states it."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from safetensors import safe_open
from safetensors.torch import save_file

from rasp_compiler.cli import main
from rasp_compiler.errors import ArtifactError
from rasp_compiler.runtime import (
    MAX_CONFIG_BYTES,
    ModelArtifactError,
    RaspModel,
    config_digest,
    weights_digest,
)

ROOT = Path(__file__).resolve().parent.parent
REVERSE = str(ROOT / "programs" / "reverse.rasp")
RASP = [sys.executable, "-m", "rasp_compiler.cli"]


def compile_to(out: Path, vocab: str = "abc", max_len: int = 6, *extra: str) -> int:
    return main(["compile", REVERSE, "--vocab", vocab, "--max-len", str(max_len), "-o", str(out), *extra])


def digest_of(directory: Path) -> str:
    """The weights digest of the model in ``directory`` (it must load)."""
    return RaspModel.load(str(directory)).config["weights_sha256"]


def rewrite(directory: Path, edit) -> None:
    """Apply ``edit(config)`` to the model in ``directory`` with both digests recomputed, as an
    attacker would: only the checks beyond the digests can object."""
    config = json.loads((directory / "config.json").read_text())
    with safe_open(str(directory / "model.safetensors"), framework="pt") as fh:
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    edit(config)
    config["weights_sha256"] = weights_digest(tensors)
    save_file(tensors, str(directory / "model.safetensors"),
              metadata={"config_sha256": config_digest(config)})
    (directory / "config.json").write_text(json.dumps(config, indent=1, sort_keys=True))


def dead_pid() -> int:
    """The id of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# --------------------------------------------------------------- defect 5: sizes from one integer

def test_a_huge_d_model_is_refused_from_the_header_before_anything_is_allocated(tmp_path: Path) -> None:
    """d_model 10^8 with both digests recomputed: refused by comparing with the tensors' shapes in
    the safetensors header; the loader used to allocate a list d_model long (800 MB here, 3.3 GB
    at 4 * 10^8) before it refused."""
    out = tmp_path / "m"
    assert compile_to(out) == 0
    rewrite(out, lambda c: c.update(d_model=10 ** 8))
    tracemalloc.start()
    try:
        with pytest.raises(ModelArtifactError,
                           match=r"d_model is 100000000 but embed\.token .* has \d+ along dimension 1"):
            RaspModel.load(str(out))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, f"loading the model allocated {peak:,} bytes before refusing"


def test_an_oversized_config_is_refused_before_it_is_parsed(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "m"
    assert compile_to(out) == 0
    config = json.loads((out / "config.json").read_text())
    config["notes"] = ["x" * 1024] * (MAX_CONFIG_BYTES // 1024 + 1)
    (out / "config.json").write_text(json.dumps(config))

    def no_parse(*args, **kwargs):
        raise AssertionError("the oversized config was parsed")

    monkeypatch.setattr("rasp_compiler.runtime.json.load", no_parse)
    with pytest.raises(ModelArtifactError, match=r"config\.json is [\d,]+ bytes, more than a model's config "
                                                 r"may be \(16,777,216\)"):
        RaspModel.load(str(out))


def test_a_weights_header_claiming_a_huge_length_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "m"
    assert compile_to(out) == 0
    data = (out / "model.safetensors").read_bytes()
    (out / "model.safetensors").write_bytes((1 << 40).to_bytes(8, "little") + data[8:])
    with pytest.raises(ModelArtifactError, match=r"its header claims 1,099,511,627,776 bytes"):
        RaspModel.load(str(out))


# ------------------------------------------------------------------- defect 6: links

def test_a_symlinked_config_is_never_written_through(tmp_path: Path, capsys) -> None:
    out, outside = tmp_path / "m", tmp_path / "precious.json"
    assert compile_to(out) == 0
    outside.write_text((out / "config.json").read_text())
    before = outside.read_bytes()
    (out / "config.json").unlink()
    (out / "config.json").symlink_to(outside)
    capsys.readouterr()
    assert compile_to(out, "abcd") == 1  # a link inside: not a model directory we wrote
    assert "does not hold one" in capsys.readouterr().err
    assert outside.read_bytes() == before
    assert compile_to(out, "abcd", 6, "--force") == 0  # replaces the link itself, not its target
    assert outside.read_bytes() == before
    assert not (out / "config.json").is_symlink()
    assert RaspModel.load(str(out)).vocab == list("abcd")


def test_a_symlinked_model_directory_is_refused(tmp_path: Path, capsys) -> None:
    real, link = tmp_path / "real", tmp_path / "link"
    assert compile_to(real) == 0
    old = digest_of(real)
    link.symlink_to(real)
    capsys.readouterr()
    assert compile_to(link, "abcd") == 1
    assert "it is a symbolic link" in capsys.readouterr().err
    assert digest_of(real) == old and link.is_symlink()


# ------------------------------------------------------ defect 8: a directory that is not a model

def test_a_foreign_directory_is_refused_unless_forced(tmp_path: Path, capsys) -> None:
    out = tmp_path / "project"
    out.mkdir()
    (out / "config.json").write_text('{"tool": "someone else\'s"}')
    (out / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert compile_to(out) == 1
    err = capsys.readouterr().err
    assert "the directory is not empty and does not hold one" in err and "--force" in err
    assert (out / "config.json").read_text() == '{"tool": "someone else\'s"}'
    assert compile_to(out, "abc", 6, "--force") == 0
    assert (out / "notes.txt").read_text() == "mine"
    assert RaspModel.load(str(out)).vocab == list("abc")


def test_a_model_directory_keeps_its_other_files_across_a_recompile(tmp_path: Path) -> None:
    out = tmp_path / "m"
    assert compile_to(out) == 0
    (out / "plan.png").write_bytes(b"picture")
    assert compile_to(out, "abcd") == 0
    assert (out / "plan.png").read_bytes() == b"picture"
    assert RaspModel.load(str(out)).vocab == list("abcd")


def test_a_damaged_model_of_ours_is_replaced_without_force(tmp_path: Path) -> None:
    out = tmp_path / "m"
    assert compile_to(out) == 0
    (out / "config.json").write_text("{ truncated")
    assert compile_to(out, "abcd") == 0
    assert RaspModel.load(str(out)).vocab == list("abcd")


# ----------------------------------------------------------- defect 7: crashes and full disks

def test_a_full_disk_while_writing_the_weights_leaves_the_old_model(tmp_path: Path, monkeypatch,
                                                                    capsys) -> None:
    out = tmp_path / "m"
    assert compile_to(out) == 0
    old = digest_of(out)
    import safetensors.numpy

    def full(tensors, path, metadata=None):
        Path(path).write_bytes(b"\0" * 100)  # part of the file, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    monkeypatch.setattr(safetensors.numpy, "save_file", full)
    capsys.readouterr()
    assert compile_to(out, "abcd") == 1
    assert "No space left on device" in capsys.readouterr().err
    assert digest_of(out) == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no temporary left beside it


def test_a_full_disk_while_writing_the_config_leaves_the_old_model(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "m"
    assert compile_to(out) == 0
    old = digest_of(out)

    def full() -> None:  # called between the weights and the config
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("rasp_compiler.atomic_dir.pause_for_tests", full)
    with pytest.raises(ArtifactError, match="No space left on device"):
        from rasp_compiler.compiler import compile_weights
        from rasp_compiler.lang import load_program

        compile_weights(load_program(REVERSE), list("abcd"), 6).save(str(out))
    assert digest_of(out) == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_stale_temporaries_are_cleaned_and_an_aside_model_recovered(tmp_path: Path) -> None:
    out = tmp_path / "m"
    assert compile_to(out) == 0
    old = digest_of(out)
    pid = dead_pid()
    # what killed writers left: safetensors' own temporary inside, a half-written new directory
    (out / ".tmpAb12Cd").write_bytes(b"\0" * 1000)
    half = tmp_path / f".m.tmp-{pid}-x1y2"
    half.mkdir()
    (half / "model.safetensors").write_bytes(b"\0" * 10)
    compile_to(tmp_path / "elsewhere")  # another model's write does not touch m's leftovers
    assert half.exists()
    assert compile_to(out, "abcd") == 0
    assert not half.exists() and not (out / ".tmpAb12Cd").exists()
    # the rename-aside fallback killed between its two renames: m is missing, the old one aside
    aside = tmp_path / f".m.old-{pid}-z9"
    out.rename(aside)
    assert compile_to(out, "abc") == 0  # the next write puts the old one back first, then replaces it
    assert not aside.exists() and digest_of(out) == old


def test_the_rename_aside_fallback_swaps_the_same_way(tmp_path: Path, monkeypatch) -> None:
    """Where the kernel cannot exchange two paths, DIR is renamed aside and the new one renamed in."""
    out = tmp_path / "m"
    assert compile_to(out) == 0
    (out / "notes.txt").write_text("kept")
    monkeypatch.setattr("rasp_compiler.atomic_dir._exchange", lambda a, b: False)
    assert compile_to(out, "abcd") == 0
    assert RaspModel.load(str(out)).vocab == list("abcd") and (out / "notes.txt").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def _kill_during_writes(tmp_path: Path, kills: int, seed: int, targeted: bool) -> None:
    """SIGKILL ``rasp compile`` over an existing model ``kills`` times, the write slowed by a
    test-only pause between the weights and the config: after each kill the directory loads as
    the old model or the new one.  ``targeted``: each kill lands at a random moment of the write
    itself (once the temporary directory exists); otherwise at a random moment of the whole run,
    start-up and compile included."""
    out = tmp_path / "m"
    refs = {}
    for vocab in ("abc", "abcd"):
        assert compile_to(tmp_path / f"ref_{vocab}", vocab) == 0
        refs[vocab] = digest_of(tmp_path / f"ref_{vocab}")
    assert compile_to(out, "abc") == 0
    rng = random.Random(seed)
    env = dict(os.environ, RASP_TEST_WRITE_PAUSE="0.4")
    current, mid_write = "abc", 0
    for _ in range(kills):
        new = "abcd" if current == "abc" else "abc"
        proc = subprocess.Popen([*RASP, "compile", REVERSE, "--vocab", new, "--max-len", "6", "-o", str(out)],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        if targeted:
            deadline = time.monotonic() + 60
            while not any(p.name.startswith(f".m.tmp-{proc.pid}-") for p in tmp_path.iterdir()):
                assert proc.poll() is None and time.monotonic() < deadline, "the write never started"
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.35))  # within the 0.4 s pause, or just before it
        else:  # start-up and compile take about 0.5-1 s here, the write 0.4 s more
            time.sleep(rng.uniform(0.3, 1.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        mid_write += any(p.name.startswith(".m.tmp-") for p in tmp_path.iterdir())
        got = digest_of(out)
        assert got in (refs[current], refs[new]), "the directory holds neither the old model nor the new one"
        current = "abcd" if got == refs["abcd"] else "abc"
    if targeted:
        assert mid_write == kills, "a kill meant for the write missed it"
    # the next write cleans whatever the kills left beside the directory
    assert compile_to(out, "abc") == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "ref_abc", "ref_abcd"]
    assert sorted(os.listdir(out)) == ["config.json", "model.safetensors"]


def test_kills_during_a_write_leave_the_old_model_or_the_new_one(tmp_path: Path) -> None:
    _kill_during_writes(tmp_path, kills=3, seed=0, targeted=True)


@pytest.mark.slow
@pytest.mark.parametrize("targeted", [True, False])
def test_twenty_kills_during_writes_leave_the_old_model_or_the_new_one(tmp_path: Path,
                                                                       targeted: bool) -> None:
    _kill_during_writes(tmp_path, kills=20, seed=1, targeted=targeted)


# --------------------------------------------------------------------- defect 11: file modes

@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_both_files_get_the_mode_the_umask_gives(tmp_path: Path, mask: int) -> None:
    old = os.umask(mask)
    try:
        assert compile_to(tmp_path / "m") == 0
        assert compile_to(tmp_path / "m", "abcd") == 0  # over an existing model too
    finally:
        os.umask(old)
    for name in ("model.safetensors", "config.json"):
        assert (tmp_path / "m" / name).stat().st_mode & 0o777 == 0o666 & ~mask, name
    assert (tmp_path / "m").stat().st_mode & 0o777 == 0o777 & ~mask


# ----------------------------------------------------- defect 13: what the digests do not prove

def test_verify_accepts_the_model_a_program_compiles_to(tmp_path: Path, capsys) -> None:
    out = tmp_path / "m"
    assert compile_to(out) == 0
    capsys.readouterr()
    assert main(["verify", str(out), REVERSE]) == 0
    assert "matches" in capsys.readouterr().out
    numeric = tmp_path / "mm"
    maxmin = str(ROOT / "programs" / "maxmin.rasp")
    assert main(["compile", maxmin, "--input-range", "-1", "1", "--max-len", "4", "--fixed-length", "4",
                 "-o", str(numeric)]) == 0
    assert main(["verify", str(numeric), maxmin]) == 0


def test_verify_refuses_a_consistent_rewrite_the_digests_accept(tmp_path: Path, capsys) -> None:
    """W_U scaled and both digests recomputed: the model loads (the digests cannot tell), and
    verify says which tensor differs."""
    import torch

    out = tmp_path / "m"
    assert compile_to(out) == 0
    config = json.loads((out / "config.json").read_text())
    with safe_open(str(out / "model.safetensors"), framework="pt") as fh:
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    tensors["embed.pos"] = tensors["embed.pos"] * torch.tensor(1.0001)
    config["weights_sha256"] = weights_digest(tensors)
    save_file(tensors, str(out / "model.safetensors"), metadata={"config_sha256": config_digest(config)})
    (out / "config.json").write_text(json.dumps(config))
    RaspModel.load(str(out))  # accepted: the digests bind the files, they do not sign them
    capsys.readouterr()
    assert main(["verify", str(out), REVERSE]) == 1
    err = capsys.readouterr().err
    assert "is not what" in err and "embed.pos differs in" in err


def test_verify_names_another_program_or_options(tmp_path: Path, capsys) -> None:
    out = tmp_path / "m"
    assert compile_to(out) == 0
    capsys.readouterr()
    assert main(["verify", str(out), str(ROOT / "programs" / "sort.rasp")]) == 1
    assert main(["verify", str(out), REVERSE, "--max-len", "7"]) == 1
    assert capsys.readouterr().err.count("is not what") == 2


def test_verify_with_an_option_other_than_recorded_names_that_option(tmp_path: Path, capsys) -> None:
    # it said "is not what ... compiles to with the options it records" and blamed an edit or
    # another program, though --max-len 7 (given here, not recorded) made the difference
    out = tmp_path / "m"
    assert compile_to(out) == 0
    config = json.loads((out / "config.json").read_text())
    capsys.readouterr()
    assert main(["verify", str(out), REVERSE, "--max-len", "7", "--dtype", config["dtype"]]) == 1
    err = capsys.readouterr().err
    assert "with the options it records and those given here" in err
    assert f"hint: the model records other options than those given: --max-len (it records " \
           f"{config['max_len']}, given 7); drop an option" in err
    assert "--dtype" not in err.split("hint:")[1]   # given as recorded: not named


def test_verify_of_a_python_api_model_against_its_to_source_says_the_tensors_match(tmp_path: Path,
                                                                                    capsys) -> None:
    # the config's plan (Python source lines) and tokens_as_given differ, every tensor matches; the
    # hint said "the model was edited, or compiled from another program"
    from rasp_compiler import pyapi as rasp
    from rasp_compiler.pyapi import lib

    hist = lib.make_hist()
    rasp.compile_program(hist, "abc", 5).save(str(tmp_path / "m"))
    source = tmp_path / "hist.rasp"
    source.write_text(rasp.to_source(hist))
    assert main(["verify", str(tmp_path / "m"), str(source)]) == 1
    err = capsys.readouterr().err
    assert "hint: every tensor matches: the model was compiled from Python" in err
    assert "edited" not in err


def test_verify_of_a_model_compiled_with_output_names_the_option(tmp_path: Path, capsys) -> None:
    """A model compiled with --output NAME, verified without it: every tensor was listed as
    different and the hint named --output only among other causes; it now says which s-op."""
    prog = tmp_path / "p.rasp"
    prog.write_text("w = selector_width(select(tokens, tokens, ==));\nr = indices + w;\nr;\n")
    out = tmp_path / "m"
    assert main(["compile", str(prog), "--vocab", "ab", "--max-len", "4", "--output", "w",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), str(prog)]) == 1
    assert "hint: the model outputs 'w', not the program's result: add --output w" in capsys.readouterr().err
    assert main(["verify", str(out), str(prog), "--output", "w"]) == 0
    assert main(["verify", str(out), REVERSE]) == 1           # another program: the general hint
    assert "the model was edited, or compiled from another program" in capsys.readouterr().err


# ------------------------------------------------------------------- the other artifact writers

def test_a_universal_transformer_is_saved_by_the_same_protocol(tmp_path: Path) -> None:
    from rasp_compiler.universal import UniversalTransformer, build_universal

    ut = build_universal("multihead", 2, 1, 2)
    foreign = tmp_path / "f"
    foreign.mkdir()
    (foreign / "ut.json").write_text("mine")
    (foreign / "notes").write_text("x")
    with pytest.raises(ArtifactError, match="does not hold one"):
        ut.save(foreign)
    ut.save(foreign, force=True)
    assert (foreign / "notes").read_text() == "x"
    ut.save(tmp_path / "u")
    ut.save(tmp_path / "u")  # over itself
    assert sorted(os.listdir(tmp_path / "u")) == ["ut.json", "ut.safetensors"]
    assert UniversalTransformer.load(tmp_path / "u").config == ut.config


# ------------------------------------------------------------- defect 12: slow paths refused early

def test_a_mean_listing_too_many_conditional_values_is_refused_quickly(tmp_path: Path, monkeypatch,
                                                                       capsys) -> None:
    """dyck2 at max_len 2,048 listed ~10^9 conditional mean values (past 300 CPU-s, silent); the
    limit, lowered here so that max_len 16 reaches it, refuses with the located map that reads
    the mean."""
    from rasp_compiler.compiler.analysis import limits

    monkeypatch.setattr(limits, "MAX_CONDITIONAL_VALUES", 500)
    capsys.readouterr()
    assert main(["compile", str(ROOT / "programs" / "dyck2.rasp"), "--vocab", "()[]", "--max-len", "16",
                 "-o", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert "dyck2.rasp:" in err and "a mean with too many possible values to enumerate" in err
    assert "smaller --max-len" in err
    assert not (tmp_path / "d").exists()


def test_a_selector_table_too_large_is_refused_before_it_is_built(tmp_path: Path, monkeypatch,
                                                                  capsys) -> None:
    """most_frequent over 30,000 tokens built a 30,000 x 30,000 table (89 CPU-s, 1.9 GB) before
    refusing it; the size is now checked first.  MAX_BLOCK lowered so a small vocabulary reaches
    it, and the atom tables made to fail: refused before any is built."""
    from rasp_compiler.compiler.analysis.core import Analysis
    from rasp_compiler.compiler.lowering import limits

    monkeypatch.setattr(limits, "MAX_BLOCK", 20)

    atom_rows = Analysis.atom_rows

    def checked_first(self, *args, **kwargs):  # the lowering's score tables, not the analysis's
        if sys._getframe(1).f_code.co_filename.endswith("selector_blocks.py"):
            raise AssertionError("a score table was built before its size was checked")
        return atom_rows(self, *args, **kwargs)

    monkeypatch.setattr(Analysis, "atom_rows", checked_first)
    capsys.readouterr()
    assert main(["compile", str(ROOT / "programs" / "most_frequent.rasp"), "--vocab", "abcdefghi",
                 "--max-len", "8",
                 "-o", str(tmp_path / "mf")]) == 1
    err = capsys.readouterr().err
    assert "most_frequent.rasp:" in err and "values) in one attention score" in err and "too large" in err


def test_a_single_file_artifact_written_to_a_directory_is_one_clear_error(tmp_path) -> None:
    """Target.save('/tmp') raised IsADirectoryError from the final rename."""
    from rasp_compiler.errors import ArtifactError
    from rasp_compiler.universal.target import Target

    with pytest.raises(ArtifactError, match="is a directory, not a file") as err:
        Target.random(1, 1, 1).save(tmp_path)
    assert "NAME.safetensors" in str(err.value)
    assert list(tmp_path.iterdir()) == []  # nothing written beside it
