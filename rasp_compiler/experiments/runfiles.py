"""A run's files on disk: the finished checkpoint, bound together by digests; the resume state of
a run in progress; atomic writes; stale temporaries.

A finished run's directory holds ``model.safetensors``, ``config.json``, ``curve.json`` and
``result.json``.  ``config.json`` records the SHA-256 of the weights (``runtime.weights_digest``)
and of the result and the curve (``runtime.config_digest`` of their JSON), as a compiled model's
config records its weights' digest; it is written last.  Each file is written aside, fsynced and
renamed into place, so a file is never half-written, but a run killed between its renames (or a
file copied from another run) leaves files of two runs side by side: ``load_checkpoint`` refuses
such a mix instead of reporting run A with run B's weights.  ``model.safetensors`` holds the
weights only, so the same run gives the same bytes however often it was interrupted.

While a run trains, ``resume.safetensors`` holds everything a bit-exact continuation needs: every
weight, the optimiser's moments and step count, the RNG states (torch, CUDA where used, NumPy's
global one, Python's ``random`` and the data stream's generator with its queue position), the
stage and step (the learning-rate schedule is a function of them), the running averages and the
curve so far.  Tensors are in the safetensors body; the rest is JSON in its metadata, with the
digest of the tensors.  It is written atomically every N steps or minutes and removed once the
finished checkpoint is in place.

A temporary file is ``NAME.tmpPID``: ``remove_stale_temporaries`` removes those whose process is
gone (a run killed while writing), never one a live process is still writing.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from rasp_compiler.atomic_dir import file_mode, fsync_path, process_alive
from rasp_compiler.errors import ArtifactError, UserError
from rasp_compiler.experiments.data import task_spec
from rasp_compiler.experiments.models import EmbeddingProgrammedTransformer, ModelConfig

RUN_FORMAT = "rasp-experiment-run/1"
RESUME_FORMAT = "rasp-experiment-resume/1"
WEIGHTS_FILE, CONFIG_FILE, CURVE_FILE, RESULT_FILE = ("model.safetensors", "config.json", "curve.json",
                                                      "result.json")
RESUME_FILE = "resume.safetensors"
# run settings that do not change a run's numbers: a run may resume with other values
NOT_BINDING = ("device", "threads")

_TEMPORARY = re.compile(r"^(?P<name>.+)\.tmp(?P<pid>\d+)$")


# ------------------------------------------------------------------------------------------ JSON

def parse_json(text: str | bytes, what: str) -> Any:
    """Every JSON an experiment reads goes through here (one place to bound it); ``ValueError``
    naming ``what`` when the text is not JSON."""
    from rasp_compiler.bounded_json import load_json_text
    from rasp_compiler.errors import UserError

    try:  # bounded in size and depth: a config.json of 100,000 nested "[" was a RecursionError
        return load_json_text(text, what)
    except UserError as err:
        raise ValueError(err.message) from None


def read_json(path: Path) -> Any:
    """The JSON value in the file ``path``; ``OSError`` or ``ValueError`` when it cannot be read."""
    return parse_json(path.read_bytes(), str(path))


def digest(value: Any) -> str:
    """The SHA-256 of a JSON value as ``runtime.config_digest`` writes it (keys sorted)."""
    from rasp_compiler.runtime import config_digest

    return config_digest(value)


# ---------------------------------------------------------------------------------------- writes

def write_atomic(path: str | os.PathLike, write: Callable[[str], None] | str) -> None:
    """Write ``path`` so that it holds its old content or the new one, whole, at every instant:
    ``write`` (a function given the temporary path, or the text itself) writes ``NAME.tmpPID``
    beside it, which is fsynced and renamed over ``path``; the directory is fsynced after."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        if isinstance(write, str):
            tmp.write_text(write, encoding="utf-8")
        else:
            write(str(tmp))
        os.chmod(tmp, file_mode())  # safetensors' save_file creates 0600 whatever the umask
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_path(path.parent)


def remove_stale_temporaries(directory: str | os.PathLike) -> list[Path]:
    """Remove the ``NAME.tmpPID`` files in ``directory`` whose process has ended (a writer killed
    before its rename); returns them.  A live writer's file is left alone."""
    directory = Path(directory)
    removed = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return removed
    for p in entries:
        m = _TEMPORARY.match(p.name)
        if m and p.is_file() and not p.is_symlink() and not process_alive(int(m["pid"])):
            try:
                p.unlink()
                removed.append(p)
            except OSError:
                pass
    return removed


# ---------------------------------------------------------------------------- finished checkpoint

def run_settings(run: dict) -> dict:
    """The settings that decide a run's numbers (``NOT_BINDING`` left out)."""
    return {k: v for k, v in run.items() if k not in NOT_BINDING}


def save_checkpoint(model: EmbeddingProgrammedTransformer, run: dict, result: dict, curve: dict,
                    out: str | os.PathLike) -> None:
    """Write a finished run: weights, curve and result first, then the config that binds them."""
    from safetensors.torch import save_file

    from rasp_compiler.runtime import weights_digest

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    frozen = sorted(n for n, p in model.named_parameters() if not p.requires_grad)
    meta = {"format": RUN_FORMAT, "run": run, "model": model.cfg.to_json(), "frozen": frozen,
            "weights_sha256": weights_digest(tensors), "result_sha256": digest(result),
            "curve_sha256": digest(curve)}
    write_atomic(out / WEIGHTS_FILE, lambda tmp: save_file(tensors, tmp))
    write_atomic(out / CURVE_FILE, json.dumps(curve) + "\n")
    write_atomic(out / RESULT_FILE, json.dumps(result, indent=1) + "\n")
    write_atomic(out / CONFIG_FILE, json.dumps(meta, indent=1) + "\n")


MIXED_HINT = ("a run killed while it saved, or a file copied from another run: run the experiment "
              "again (it resumes from its last checkpoint where one is left)")


def refuse_foreign_config(out: str | os.PathLike, flag: str = "--out") -> None:
    """Refuse to train into ``out`` when its ``config.json`` is not a run's (a compiled model's,
    say): a run writes ``config.json`` and ``model.safetensors`` there and would replace them."""
    config = Path(out) / CONFIG_FILE
    if not config.is_file():
        from rasp_compiler.artifact_kinds import describe

        held = describe(out)  # a UT's or a backbone's directory: the run's files went in beside them
        if held is not None and "rasp experiment" not in held:
            raise UserError(f"{flag} {out} holds another command's files: the run would write its "
                            f"{CONFIG_FILE} and {WEIGHTS_FILE} beside them", f"{held}; choose another {flag}")
        return
    try:
        meta = read_json(config)
    except (OSError, ValueError):
        meta = None
    if isinstance(meta, dict) and (meta.get("format") == RUN_FORMAT or ("run" in meta and "model" in meta)):
        return
    from rasp_compiler.runtime import FORMAT as MODEL_FORMAT

    what = "files that are not an experiment run's"
    if isinstance(meta, dict) and meta.get("format") == MODEL_FORMAT:  # U is one too: named as U
        what = ("the universal simulator U (rasp simulate -o)" if isinstance(meta.get("simulator"), dict)
                else "a compiled model (rasp compile)")
    raise UserError(f"{flag} {out} holds {what}: the run would replace its {CONFIG_FILE} and "
                    f"{WEIGHTS_FILE}", f"choose another {flag}: an empty directory or an earlier run's")


def load_checkpoint(path: str | os.PathLike) -> tuple[EmbeddingProgrammedTransformer, dict]:
    """Rebuild a saved model (no pickle): the config from JSON, the weights from safetensors,
    after checking that the files are one run's (the digests in ``config.json``)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from rasp_compiler.runtime import FORMAT as MODEL_FORMAT
    from rasp_compiler.runtime import weights_digest
    path = Path(path)
    try:
        meta = read_json(path / CONFIG_FILE)
    except (OSError, ValueError) as err:
        raise ArtifactError(f"cannot read checkpoint {path}: {err}") from None
    try:
        tensors = load_file(str(path / WEIGHTS_FILE))
    except (SafetensorError, OSError, ValueError) as err:  # safetensors' own words named no file
        raise ArtifactError(f"cannot read checkpoint {path}: {path / WEIGHTS_FILE} is truncated or "
                            f"corrupt ({err})", "re-run the experiment to rewrite it") from None
    # a compiled model directory also holds these two files; read as a run it failed on KeyError 'run'
    if isinstance(meta, dict) and meta.get("format") == MODEL_FORMAT \
            and isinstance(meta.get("simulator"), dict):
        # U is a compiled model too, and was named "a compiled model (rasp compile)"
        raise ArtifactError(f"{path} is the universal simulator U (rasp simulate -o), not an experiment "
                            "checkpoint", "pass the directory a `rasp experiment dyck1|khop` run wrote "
                            "(its --out); rasp simulate --model DIR --input-json '[...]' runs U")
    if isinstance(meta, dict) and meta.get("format") == MODEL_FORMAT:
        raise ArtifactError(f"{path} is a compiled model (rasp compile), not an experiment checkpoint",
                            "pass the directory a `rasp experiment dyck1|khop` run wrote (its --out); "
                            "for a compiled model use rasp show or rasp eval")
    if not isinstance(meta, dict):
        raise ArtifactError(f"checkpoint {path}: {CONFIG_FILE} is not a JSON object")
    bound = "weights_sha256" in meta
    if bound:
        if meta.get("weights_sha256") != weights_digest(tensors):
            raise ArtifactError(f"checkpoint {path} mixes files of different runs: {WEIGHTS_FILE} is "
                                f"not the weights {CONFIG_FILE} was saved with (their SHA-256 differ; "
                                "or the weights were changed)", MIXED_HINT)
        for name, key in ((RESULT_FILE, "result_sha256"), (CURVE_FILE, "curve_sha256")):
            _check_bound_file(path, name, meta.get(key))
    try:
        _check_run_meta(meta, _saved_result(path))
        mcfg = ModelConfig(**meta["model"])
        model = EmbeddingProgrammedTransformer(mcfg)
        model.load_state_dict(tensors)
    except (KeyError, TypeError, ValueError, RuntimeError, UserError) as err:
        raise ArtifactError(f"checkpoint {path} does not match its config.json: {_first_problem(err)}",
                            "re-run the experiment to rewrite it") from None
    bad = sorted(k for k, v in tensors.items() if v.is_floating_point() and not torch.isfinite(v).all())
    if bad:
        raise ArtifactError(f"checkpoint {path} holds NaN or infinite weights ({', '.join(bad)})",
                            "the run diverged or the file was damaged: re-run the experiment")
    if not bound:
        print(f"note: {path} was saved before runs recorded digests: that its files belong to one "
              "run is not checked", file=sys.stderr)
    return model, meta


def finished_run(out: str | os.PathLike, run: dict) -> tuple[dict, dict] | None:
    """The result and curve of ``run`` where ``out`` holds it finished (its settings, every file
    whole and bound by the digests, no resume state left); None otherwise.  Training is
    deterministic, so a run found finished need not be trained again.  A damaged checkpoint of
    this run counts as unfinished (a note says so): training again rewrites it."""
    out = Path(out)
    if (out / RESUME_FILE).is_file() or not (out / CONFIG_FILE).is_file():
        return None
    try:
        meta = read_json(out / CONFIG_FILE)
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("run"), dict) \
            or run_settings(meta["run"]) != run_settings(run) or "weights_sha256" not in meta:
        return None
    try:
        load_checkpoint(out)
        return read_json(out / RESULT_FILE), read_json(out / CURVE_FILE)
    except (UserError, OSError, ValueError) as err:
        print(f"note: {out} holds this run, damaged ({str(err).splitlines()[0]}): training it again",
              file=sys.stderr)
        return None


def refuse_other_finished_run(out: str | os.PathLike, run: dict, name: str,
                              flag: str = "--out") -> None:
    """Refuse to train ``run`` into ``out`` when ``out`` holds a finished run of other settings:
    training would replace that run's weights and result without a word (the resume state of
    another run is refused alike, ``load_resume``).  ``--no-resume`` skips this check."""
    out = Path(out)
    if (out / RESUME_FILE).is_file() or not (out / CONFIG_FILE).is_file():
        return
    try:
        meta = read_json(out / CONFIG_FILE)
    except (OSError, ValueError):
        return
    if not isinstance(meta, dict) or not isinstance(meta.get("run"), dict):
        return
    other, mine = run_settings(meta["run"]), run_settings(run)
    if other == mine:
        return
    diff = [f"{k} ({other.get(k, 'unset')!r} there, {mine.get(k, 'unset')!r} here)"
            for k in sorted(set(other) | set(mine)) if other.get(k) != mine.get(k)]
    more = f" and {len(diff) - 4} more" if len(diff) > 4 else ""
    raise UserError(f"{flag} {out} holds another finished run: it differs from {name} in "
                    f"{', '.join(diff[:4])}{more}; training would replace its weights and result",
                    f"give this run another {flag}, or pass --no-resume to replace that run")


def _check_bound_file(path: Path, name: str, want: object) -> None:
    try:
        got = digest(read_json(path / name))
    except FileNotFoundError:
        raise ArtifactError(f"checkpoint {path} is incomplete: {name} is missing", MIXED_HINT) from None
    except (OSError, ValueError) as err:
        raise ArtifactError(f"checkpoint {path}: {name} cannot be read ({err})", MIXED_HINT) from None
    if got != want:
        raise ArtifactError(f"checkpoint {path} mixes files of different runs: {name} is not the "
                            f"one {CONFIG_FILE} was saved with (their SHA-256 differ)", MIXED_HINT)


def _saved_result(path: Path) -> dict:
    """The checkpoint's result.json, or {} when it is missing or unreadable (it is optional in a
    checkpoint saved before digests; a bound one was checked already)."""
    try:
        result = read_json(path / RESULT_FILE)
    except (OSError, ValueError):
        return {}
    return result if isinstance(result, dict) else {}


def _check_run_meta(meta: dict, result: dict) -> None:
    """The run settings a loaded checkpoint is read with (task, k, k-hop shape) must be valid and
    match the saved model (and result.json, where there is one): a probe with another task or k
    would measure the wrong thing silently."""
    run, model = meta["run"], meta["model"]
    task, k = run["task"], run.get("k")
    if task not in ("dyck1", "khop"):
        raise ValueError(f"unknown task {task!r}")
    if task == "khop" and (type(k) is not int or k < 1):
        raise ValueError(f"k-hop run with k = {k!r} (expected a whole number >= 1)")
    for name in ("khop_len", "khop_vocab"):
        if type(run.get(name, 1)) is not int or run.get(name, 1) < 1:
            raise ValueError(f"{name} = {run.get(name)!r} (expected a whole number >= 1)")
    if task == "khop" and k > run.get("khop_len", 64):
        raise ValueError(f"k = {k} hops is more than the sequence length")
    for name, value in (("task", task), ("k", k)):
        if name in result and result[name] != value:
            raise ValueError(f"{name} is {value!r} in config.json but {result[name]!r} in result.json")
    spec = task_spec(task, k, run.get("khop_len", 64), run.get("khop_vocab", 4))
    want = {"vocab": spec.vocab, "classes": spec.classes, "seq_len": spec.seq_len}
    got = {name: model.get(name) for name in want}
    if got != want:
        raise ValueError(f"the model's shape {got} is not that of task {task} ({want})")


def _first_problem(err: BaseException) -> str:
    """One line about what does not match (torch's load_state_dict puts it on the second line)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    if not lines:
        return type(err).__name__
    if lines[0].startswith("Error(s) in loading state_dict") and len(lines) > 1:
        return lines[1]
    return lines[0]


# ---------------------------------------------------------------------------------- resume state

@dataclass
class ResumeState:
    """Where a run stopped: ``stage`` (index into ``RunConfig.stages()``) and ``step`` (steps of it
    done), and everything the loop carries across steps."""
    stage: int
    step: int
    model: dict[str, torch.Tensor]
    optimizer: dict[int, dict[str, torch.Tensor]]
    running: dict            # the running accuracy and loss of the progress bar and the curve
    curve: dict
    stream: dict
    seconds: float           # wall and CPU seconds the run had spent when it was saved
    cpu_seconds: float
    rng: dict                # Python's and NumPy's global states; torch's are tensors in `tensors`
    tensors: dict[str, torch.Tensor]


def save_resume(out: str | os.PathLike, run: dict, state: ResumeState) -> None:
    from safetensors.torch import save_file

    from rasp_compiler.runtime import weights_digest

    tensors = {f"model/{k}": v.detach().cpu().contiguous() for k, v in state.model.items()}
    for index, values in state.optimizer.items():
        for key, value in values.items():
            tensors[f"optimizer/{index}/{key}"] = value.detach().cpu().contiguous()
    tensors.update({k: v.cpu().contiguous() for k, v in state.tensors.items()})
    # 0-d tensors (the optimiser's step count) are stored with one axis, which the digest needs
    scalars = sorted(k for k, v in tensors.items() if v.dim() == 0)
    tensors.update({k: tensors[k].reshape(1) for k in scalars})
    meta = {"format": RESUME_FORMAT, "run": run_settings(run), "stage": state.stage,
            "step": state.step, "running": state.running, "curve": state.curve,
            "stream": state.stream, "seconds": state.seconds, "cpu_seconds": state.cpu_seconds,
            "rng": state.rng, "scalars": scalars, "tensors_sha256": weights_digest(tensors)}
    write_atomic(Path(out) / RESUME_FILE,
                 lambda tmp: save_file(tensors, tmp, metadata={"state": json.dumps(meta)}))


def load_resume(out: str | os.PathLike, run: dict, name: str) -> ResumeState | None:
    """The resume state in ``out``, or None when there is none.  A state of another run, or one
    that cannot be read, is an error: starting over would overwrite another run's progress, or
    hide a damaged file."""
    from safetensors import safe_open

    from rasp_compiler.runtime import weights_digest

    path = Path(out) / RESUME_FILE
    if not path.is_file():
        return None
    hint = f"delete {path} (or pass --no-resume) to start this run from step 0"
    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = parse_json((fh.metadata() or {}).get("state", ""), "its state")
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    except Exception as err:   # safetensors reports a damaged file as several kinds of error
        raise UserError(f"{path} cannot be read: {str(err).splitlines()[0]}", hint) from None
    if not isinstance(meta, dict) or meta.get("format") != RESUME_FORMAT:
        raise UserError(f"{path} is not a resume state of a `rasp experiment` run", hint)
    if meta.get("tensors_sha256") != weights_digest(tensors):
        raise UserError(f"{path} is damaged: its tensors are not those it was saved with", hint)
    if meta.get("run") != run_settings(run):
        other = meta.get("run") if isinstance(meta.get("run"), dict) else {}
        diff = sorted(k for k in set(other) | set(run_settings(run))
                      if other.get(k) != run.get(k))
        raise UserError(f"{path} is the resume state of another run (it differs from {name} in "
                        f"{', '.join(diff) or 'its settings'}), at step {meta.get('step')}",
                        f"give this run another --out, or {hint}")
    try:
        for key in meta.get("scalars", []):
            tensors[key] = tensors[key].reshape(())
        optimizer: dict[int, dict[str, torch.Tensor]] = {}
        for key, value in tensors.items():
            if key.startswith("optimizer/"):
                _, index, field = key.split("/", 2)
                optimizer.setdefault(int(index), {})[field] = value
        state = ResumeState(
            stage=int(meta["stage"]), step=int(meta["step"]),
            model={k[len("model/"):]: v for k, v in tensors.items() if k.startswith("model/")},
            optimizer=optimizer, running=dict(meta["running"]), curve=dict(meta["curve"]),
            stream=dict(meta["stream"]), seconds=float(meta["seconds"]),
            cpu_seconds=float(meta["cpu_seconds"]), rng=dict(meta["rng"]),
            tensors={k: v for k, v in tensors.items() if k.startswith("rng/")})
    except (KeyError, TypeError, ValueError) as err:
        raise UserError(f"{path} is damaged ({err})", hint) from None
    return state


def remove_resume(out: str | os.PathLike) -> None:
    (Path(out) / RESUME_FILE).unlink(missing_ok=True)


def rng_state(device: torch.device) -> tuple[dict, dict[str, torch.Tensor]]:
    """The global RNG states: (JSON part, tensors).  The training loop draws from none of them
    today (the data stream has its own generator); they are saved so that a loss or model that
    does (dropout, sampling) still resumes bit-exactly."""
    version, internal, gauss = random.getstate()
    kind, key, pos, has_gauss, cached = np.random.get_state()
    tensors = {"rng/torch": torch.get_rng_state(),
               "rng/numpy": torch.from_numpy(np.asarray(key, dtype=np.int64))}
    if device.type == "cuda":
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng/cuda/{i}"] = s
    meta = {"python": [version, list(internal), gauss],
            "numpy": {"kind": kind, "pos": int(pos), "has_gauss": int(has_gauss),
                      "cached_gaussian": float(cached)}}
    return meta, tensors


def restore_rng(meta: dict, tensors: dict[str, torch.Tensor], device: torch.device) -> None:
    version, internal, gauss = meta["python"]
    random.setstate((version, tuple(internal), gauss))
    n = meta["numpy"]
    np.random.set_state((n["kind"], tensors["rng/numpy"].numpy().astype(np.uint32), n["pos"],
                         n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(tensors["rng/torch"])
    cuda = sorted((k for k in tensors if k.startswith("rng/cuda/")), key=lambda k: int(k.rsplit("/", 1)[1]))
    if device.type == "cuda" and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([tensors[k] for k in cuda])
