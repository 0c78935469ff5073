"""A run's files: bound together by digests (a mix of two runs is refused), resumed bit-exactly
after an injected stop or a real SIGKILL, stale temporaries removed, and the grid's scheduling on
this process, local processes and Ray giving the same result files."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rasp_compiler import scheduling
from rasp_compiler.cli import main as cli_main
from rasp_compiler.errors import ArtifactError, UserError
from rasp_compiler.experiments import grid, runfiles
from rasp_compiler.experiments import train as train_mod
from rasp_compiler.experiments.train import RunConfig, train


def tiny(seed: int = 0, **kw) -> RunConfig:
    base = dict(task="dyck1", backbone="random", arch="attn", width=8, layers=1, heads=2, steps=30,
                batch=4, test_size=16, curve_points=10, seed=seed)
    base.update(kw)
    return RunConfig(**base)


# ------------------------------------------------------------------------------------ A: binding

def test_probe_refuses_a_run_whose_files_are_of_two_runs(tmp_path, capsys):
    """A run killed between its final renames left run A's config and result beside run B's
    weights, and `rasp experiment probe` reported them as run A."""
    a, b = tmp_path / "a", tmp_path / "b"
    train(tiny(0), out=a, progress=False)
    train(tiny(1), out=b, progress=False)    # same shapes: the weights load into A's model
    assert cli_main(["experiment", "probe", str(a), "--samples", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"] == tiny(0).name()
    for name in ("model.safetensors", "result.json", "curve.json"):
        mixed = tmp_path / f"mixed-{name}"
        shutil.copytree(a, mixed)
        shutil.copy(b / name, mixed / name)
        assert cli_main(["experiment", "probe", str(mixed), "--samples", "4"]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "mixes files of different runs" in err, err
        assert name in err and "Traceback" not in err
        with pytest.raises(ArtifactError):
            runfiles.load_checkpoint(mixed)
    (a / "result.json").unlink()
    assert cli_main(["experiment", "probe", str(a), "--samples", "4"]) == 1
    assert "incomplete: result.json is missing" in capsys.readouterr().err


def test_the_config_records_each_files_digest(tmp_path):
    from safetensors.torch import load_file

    from rasp_compiler.runtime import config_digest, weights_digest

    train(tiny(), out=tmp_path, progress=False)
    meta = json.loads((tmp_path / "config.json").read_text())
    assert meta["format"] == runfiles.RUN_FORMAT
    assert meta["weights_sha256"] == weights_digest(load_file(str(tmp_path / "model.safetensors")))
    assert meta["result_sha256"] == config_digest(json.loads((tmp_path / "result.json").read_text()))
    assert meta["curve_sha256"] == config_digest(json.loads((tmp_path / "curve.json").read_text()))
    assert not (tmp_path / runfiles.RESUME_FILE).exists()        # removed once the run is saved
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "curve.json",
                                                          "model.safetensors", "result.json"]


def test_a_checkpoint_saved_before_digests_loads_with_a_note(tmp_path, capsys):
    train(tiny(), out=tmp_path, progress=False)
    meta = json.loads((tmp_path / "config.json").read_text())
    for key in ("format", "weights_sha256", "result_sha256", "curve_sha256"):
        del meta[key]
    (tmp_path / "config.json").write_text(json.dumps(meta))
    assert cli_main(["experiment", "probe", str(tmp_path), "--samples", "4"]) == 0
    assert "is not checked" in capsys.readouterr().err


# ------------------------------------------------------------------------------------- B: resume

class Stop(Exception):
    """Stands for a kill right after a given step."""


def _stop_after(monkeypatch, at: int) -> list[int]:
    """Make training raise Stop after global step ``at``, once; returns the global steps run."""
    seen: list[int] = []
    stopped: list[bool] = []
    original = train_mod._Checkpointer.after_step

    def after_step(self, stage, done, opt, running, step):
        seen.append(done + step)
        original(self, stage, done, opt, running, step)
        if done + step == at and not stopped:
            stopped.append(True)
            raise Stop

    monkeypatch.setattr(train_mod._Checkpointer, "after_step", after_step)
    return seen


def _same_run(a: Path, b: Path) -> None:
    """Byte-identical weights, and the same result and curve but for the clocks."""
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    clocks = {"seconds", "cpu_seconds", "total_seconds", "total_cpu_seconds"}
    for name in ("result.json", "curve.json"):
        x, y = (json.loads((d / name).read_text()) for d in (a, b))
        assert {k: v for k, v in x.items() if k not in clocks} == \
            {k: v for k, v in y.items() if k not in clocks}, name


@pytest.mark.parametrize("cfg,stop_at", [
    (tiny(seed=3, steps=40), 17),
    (tiny(seed=1, backbone="sparse", width=20, layers=2, heads=1, steps=40), 33),
    # the curriculum: stopped inside hop_1's stage, and in hop_2's after the switch
    (RunConfig(task="khop", k=2, backbone="random", arch="attn-res-ln", width=16, heads=2, steps=20,
               curriculum=15, batch=4, test_size=8, curve_points=10), 10),
    (RunConfig(task="khop", k=2, backbone="random", arch="attn-res-ln", width=16, heads=2, steps=20,
               curriculum=15, batch=4, test_size=8, curve_points=10), 26),
    (RunConfig(task="khop", k=3, backbone="random", arch="attn-res-ln-mlp", width=16, heads=2,
               layers=2, steps=30, aux=True, batch=4, test_size=8, curve_points=10), 22),
    (RunConfig(task="khop", k=1, backbone="random", arch="attn-res-ln", width=16, heads=2, steps=30,
               batch=4, test_size=8, curve_points=10, precision="bf16"), 12),
])
def test_a_stopped_run_resumes_bit_exactly(cfg, stop_at, tmp_path, monkeypatch):
    train(cfg, out=tmp_path / "whole", progress=False, checkpoint_minutes=0)
    seen = _stop_after(monkeypatch, stop_at)
    with pytest.raises(Stop):
        train(cfg, out=tmp_path / "cut", progress=False, checkpoint_every=7, checkpoint_minutes=0)
    assert (tmp_path / "cut" / runfiles.RESUME_FILE).is_file()
    assert not (tmp_path / "cut" / "model.safetensors").exists()
    seen.clear()
    train(cfg, out=tmp_path / "cut", progress=False, checkpoint_every=7, checkpoint_minutes=0)
    last = stop_at // 7 * 7
    assert seen == list(range(last + 1, cfg.total_steps() + 1))   # from the last checkpoint on
    _same_run(tmp_path / "whole", tmp_path / "cut")
    assert not (tmp_path / "cut" / runfiles.RESUME_FILE).exists()


@pytest.mark.slow      # about 50 s on a loaded 2-core machine: three runs, two of them subprocesses
def test_a_sigkilled_run_resumes_bit_exactly(tmp_path):
    """A real SIGKILL of `rasp experiment dyck1` in a subprocess, then the same command again."""
    cmd = [sys.executable, "-c", "import sys; from rasp_compiler.cli import main; sys.exit(main())",
           "experiment", "dyck1", "--backbone", "random", "--width", "8", "--layers", "1",
           "--heads", "2", "--steps", "400", "--batch", "4", "--seed", "5",
           "--json", "--checkpoint-every", "100"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cut = tmp_path / "cut"
    proc = subprocess.Popen(cmd + ["--out", str(cut)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    state = cut / runfiles.RESUME_FILE
    deadline = time.monotonic() + 120
    while not state.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.05)                         # some steps past that checkpoint, maybe mid-write
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert state.exists() and not (cut / "model.safetensors").exists()
    resumed = subprocess.run(cmd + ["--out", str(cut)], env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed at step 100 of 400 from {cut}" in resumed.stderr    # not from step 0
    # the uninterrupted run, in this process (the same settings the command chose)
    cfg = grid.run_config("dyck1", None, "random", "attn", 5, width=8, layers=1, heads=2, steps=400,
                          batch=4)
    train(cfg, out=tmp_path / "whole", progress=False)
    _same_run(tmp_path / "whole", cut)
    assert not any(p.name.count(".tmp") for p in cut.iterdir())     # no temporary left


def test_the_resume_state_of_another_run_is_refused(tmp_path, monkeypatch, capsys):
    _stop_after(monkeypatch, 10)
    with pytest.raises(Stop):
        train(tiny(steps=30), out=tmp_path, progress=False, checkpoint_every=5)
    monkeypatch.undo()
    with pytest.raises(UserError, match="resume state of another run .*steps"):
        train(tiny(steps=40), out=tmp_path, progress=False)
    args = ["experiment", "dyck1", "--backbone", "random", "--width", "8", "--layers", "1",
            "--heads", "2", "--steps", "40", "--batch", "4", "--no-progress", "--out", str(tmp_path)]
    assert cli_main(args) == 1
    err = capsys.readouterr().err
    assert "another run" in err and "--no-resume" in err
    assert cli_main(args + ["--no-resume"]) == 0
    assert not (tmp_path / runfiles.RESUME_FILE).exists()


def test_a_finished_run_is_not_trained_again(tmp_path, monkeypatch, capsys):
    """The same run into the same --out gives its saved result (training is deterministic); it
    trained again from step 0 without a word.  --no-resume or a damaged checkpoint train; another
    run's settings are refused (hard6), and train with --no-resume."""
    args = ["experiment", "dyck1", "--backbone", "random", "--width", "8", "--layers", "1",
            "--heads", "2", "--steps", "20", "--batch", "4", "--no-progress", "--json",
            "--out", str(tmp_path)]
    assert cli_main(args) == 0
    first = json.loads(capsys.readouterr().out)
    weights = (tmp_path / "model.safetensors").read_bytes()
    seen = _stop_after(monkeypatch, 10 ** 9)
    assert cli_main(args) == 0
    captured = capsys.readouterr()
    assert seen == [] and json.loads(captured.out) == first
    # with --no-progress too (it said nothing, and the summary's seconds read as a new run's)
    assert "already finished" in captured.err
    assert cli_main([a for a in args if a != "--no-progress"]) == 0
    assert "already finished" in capsys.readouterr().err
    assert cli_main(args + ["--no-resume"]) == 0
    assert len(seen) == 20 and (tmp_path / "model.safetensors").read_bytes() == weights
    seen.clear()
    (tmp_path / "curve.json").write_text("{}")
    assert cli_main(args) == 0
    assert len(seen) == 20 and "damaged" in capsys.readouterr().err
    seen.clear()
    # another run's settings: refused, as another run's unfinished state is (hard6); it trained
    # over the finished run without a word.  --no-resume replaces it.
    other = [a if a != "20" else "25" for a in args]
    assert cli_main(other) == 1 and seen == []
    assert "holds another finished run" in capsys.readouterr().err
    assert cli_main(other + ["--no-resume"]) == 0
    assert len(seen) == 25


def test_a_damaged_resume_state_is_refused(tmp_path):
    tmp_path.joinpath(runfiles.RESUME_FILE).write_bytes(b"\x10\x00\x00\x00garbage")
    with pytest.raises(UserError, match="cannot be read"):
        train(tiny(), out=tmp_path, progress=False)


def test_stale_temporaries_are_removed_and_live_ones_kept(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True)
    dead = int(done.stdout)                  # that process has ended
    (tmp_path / "curves").mkdir()
    stale = [tmp_path / f"x.json.tmp{dead}", tmp_path / "curves" / f"x.json.tmp{dead}"]
    live = tmp_path / f"y.json.tmp{os.getpid()}"
    for p in stale + [live]:
        p.write_text("{")
    lines: list[str] = []
    configs = [grid.run_config("dyck1", None, "random", "attn", 0, width=8, heads=2, steps=5,
                               batch=4, test_size=16)]
    assert len(grid.run_grid(configs, tmp_path, checkpoints=None, log=lines.append)) == 1
    assert not any(p.exists() for p in stale) and live.exists()
    assert sum("left by a run killed while writing" in line for line in lines) == 2


def test_a_run_killed_while_saving_is_finished_without_training_again(tmp_path, monkeypatch):
    """Killed after its last step but before its result files: the rerun trains no step."""
    cfg = grid.run_config("dyck1", None, "random", "attn", 0, width=8, heads=2, steps=12, batch=4,
                          test_size=16)
    ckpt, results = tmp_path / "ck", tmp_path / "results"

    def killed(*args, **kwargs):
        raise Stop

    monkeypatch.setattr(train_mod, "save_checkpoint", killed)
    with pytest.raises(Stop):
        grid.run_grid([cfg], results, checkpoints=str(ckpt), log=lambda _: None)
    monkeypatch.undo()
    assert grid.missing([cfg], results) == [cfg]
    seen = _stop_after(monkeypatch, -1)
    assert len(grid.run_grid([cfg], results, checkpoints=str(ckpt), log=lambda _: None)) == 1
    assert seen == [] and grid.missing([cfg], results) == []
    seen.clear()
    assert grid.run_grid([cfg], results, checkpoints=str(ckpt), log=lambda _: None) == []
    assert seen == []                                                  # a run done is not redone


# --------------------------------------------------------------------------------- C: scheduling

@pytest.mark.parametrize("make", [scheduling.InProcess, lambda: scheduling.LocalProcesses(2)])
def test_run_tasks_runs_each_once_and_stops_starting_when_told(make):
    from math import factorial  # a stdlib function: spawned workers import nothing of ours

    got: dict[int, int] = {}
    left = scheduling.run_tasks(make(), factorial, [(i, (i,)) for i in range(6)],
                                lambda k, r: got.__setitem__(k, r))
    assert left == [] and got == {0: 1, 1: 1, 2: 2, 3: 6, 4: 24, 5: 120}
    got.clear()
    left = scheduling.run_tasks(make(), factorial, [(i, (i,)) for i in range(6)],
                                lambda k, r: got.__setitem__(k, r), stop=lambda: len(got) >= 2)
    # every task started before the stop finished and was reported; the rest were never started
    assert set(got) | set(left) == set(range(6)) and not set(got) & set(left) and len(got) >= 2
    assert left == list(range(6))[len(got):]
    with pytest.raises(ValueError, match="negative"):
        scheduling.run_tasks(make(), factorial, [(0, (0,)), (1, (-1,))], lambda k, r: None)


def _comparable(results: Path) -> dict[str, dict]:
    clocks = {"seconds", "cpu_seconds", "total_seconds", "total_cpu_seconds"}
    out = {}
    for p in sorted(results.rglob("*.json")):
        value = json.loads(p.read_text())
        out[str(p.relative_to(results))] = {k: v for k, v in value.items() if k not in clocks}
    return out


@pytest.mark.slow
def test_the_ray_grid_writes_the_local_grids_files(tmp_path):
    pytest.importorskip("ray", reason="ray is not installed (pip install 'rasp-compiler[ray]')")
    configs = [grid.run_config(task, 1 if task == "khop" else None, "random", arch, seed, width=8,
                               heads=2, steps=20, batch=4, test_size=16)
               for task, arch in (("dyck1", "attn"), ("khop", "attn-res-ln")) for seed in (0, 1)]
    local, remote = tmp_path / "local", tmp_path / "ray"
    assert len(grid.run_grid(configs, local, checkpoints=str(tmp_path / "ck-local"),
                             log=lambda _: None)) == 4
    lines: list[str] = []
    t0 = time.monotonic()
    assert len(grid.run_grid(configs, remote, jobs=2, ray=True, checkpoints=str(tmp_path / "ck-ray"),
                             log=lines.append)) == 4
    print(f"ray grid of 4 runs: {time.monotonic() - t0:.1f} s")
    assert sorted(p.name for p in remote.rglob("*.json")) == sorted(p.name for p in local.rglob("*.json"))
    assert _comparable(remote) == _comparable(local)
    assert any("with Ray" in line for line in lines)
    assert grid.run_grid(configs, remote, ray=True, log=lines.append) == []   # not redone


def test_write_atomic_gives_safetensors_the_umask_mode(tmp_path):
    # safetensors' save_file creates its file 0600; the weights were unreadable to the group
    # while config.json beside them was 0644
    import torch
    from safetensors.torch import save_file

    old = os.umask(0o022)
    try:
        runfiles.write_atomic(tmp_path / "w.safetensors", lambda tmp: save_file({"x": torch.zeros(1)}, tmp))
        runfiles.write_atomic(tmp_path / "c.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "w.safetensors").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "c.json").stat().st_mode & 0o777 == 0o644


def test_a_run_refuses_an_out_that_holds_a_compiled_model_and_keeps_its_files(tmp_path):
    # `rasp experiment dyck1 --out DIR` on a `rasp compile -o DIR` replaced the compiled model's
    # config.json and model.safetensors without a word
    from rasp_compiler.runtime import FORMAT as MODEL_FORMAT

    model, other = tmp_path / "model", tmp_path / "other"
    for d, config in ((model, {"format": MODEL_FORMAT}), (other, ["not", "a", "run"])):
        d.mkdir()
        (d / "config.json").write_text(json.dumps(config))
        (d / "model.safetensors").write_bytes(b"weights")
    with pytest.raises(UserError, match="holds a compiled model .rasp compile.: the run would replace"):
        train(tiny(), out=model, progress=False)
    with pytest.raises(UserError, match="holds files that are not an experiment run's"):
        train(tiny(), out=other, progress=False)
    simulator = tmp_path / "U"  # U is a compiled model too, and is named as U
    simulator.mkdir()
    (simulator / "config.json").write_text(json.dumps({"format": MODEL_FORMAT, "simulator": {"n": 2}}))
    (simulator / "model.safetensors").write_bytes(b"weights")
    with pytest.raises(UserError, match=r"holds the universal simulator U \(rasp simulate -o\): the run"):
        train(tiny(), out=simulator, progress=False)
    for d in (model, other):
        assert sorted(p.name for p in d.iterdir()) == ["config.json", "model.safetensors"]
        assert (d / "model.safetensors").read_bytes() == b"weights"
    done = tmp_path / "done"
    train(tiny(), out=done, progress=False)
    train(tiny(), out=done, progress=False)     # an earlier run's directory is still fine
