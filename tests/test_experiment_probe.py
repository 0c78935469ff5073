"""`rasp experiment probe`: hop pointers against the definition, attention maps against the forward
pass, role shares on patterns whose answer is known, and the command's errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rasp_compiler.cli import main as cli_main
from rasp_compiler.experiments import probe as probe_mod
from rasp_compiler.experiments.data import khop_batch, khop_pointers
from rasp_compiler.experiments.models import EmbeddingProgrammedTransformer, ModelConfig
from rasp_compiler.experiments.train import RunConfig, load_checkpoint, train
from rasp_compiler.runtime import weights_digest


def ref_pointers(x: list[int], k: int) -> list[list[int]]:
    """sigma_0..sigma_k per position, by the definition (-1 once there is no earlier occurrence)."""
    rows = [list(range(len(x)))]
    for _ in range(k):
        nxt = []
        for p in rows[-1]:
            js = [j for j in range(p) if x[j] == x[p]] if p >= 0 else []
            nxt.append(js[-1] + 1 if js else -1)
        rows.append(nxt)
    return rows


def test_khop_pointers_match_definition():
    b = khop_batch(np.random.default_rng(4), 40, 1, "train", length=20, vocab=4)
    got = khop_pointers(b.tokens, 4, 4)
    for n, x in enumerate(b.tokens):
        ref = ref_pointers(list(x), 4)
        assert [list(got[j, n]) for j in range(5)] == ref


@pytest.mark.parametrize("arch,backbone,construction", [
    ("attn-res-ln", "sparse", "paths"), ("attn", "random", "auto"), ("attn-res-ln-mlp", "random", "auto")])
def test_attention_maps_are_the_forward_pass_weights(arch, backbone, construction):
    cfg = ModelConfig(vocab=4, classes=5, seq_len=12, width=40 if backbone == "sparse" else 16, layers=2,
                      heads=1 if backbone == "sparse" else 2, arch=arch, backbone=backbone,
                      construction=construction)
    model = EmbeddingProgrammedTransformer(cfg).double()
    tokens = torch.randint(0, 4, (3, 12), generator=torch.Generator().manual_seed(0))
    maps = model.attention_maps(tokens)
    assert len(maps) == 2 and maps[0].shape == (3, cfg.heads, 12, 12)
    for a in maps:
        assert torch.allclose(a.sum(-1), torch.ones_like(a.sum(-1)))
        assert float(a.triu(diagonal=1).abs().max()) == 0.0          # causal
    # recompute layer 2's attention output from its map by hand and compare with the layer
    x = model.tok[tokens] + model.pos[:12]
    x1 = model.layers[0](x, model.mask)
    layer = model.layers[1]
    xin = layer.attention_input(x1)
    a = maps[1]
    if layer.vmask is not None:
        by_hand = torch.einsum("bhqt,btm,hm->bqm", a, xin, layer.vmask.double())
    else:
        v = (xin @ layer.wv).view(3, 12, layer.heads, -1).transpose(1, 2)
        by_hand = (a @ v).transpose(1, 2).reshape(3, 12, -1) @ layer.wo
    assert torch.allclose(by_hand, layer.attention(xin, model.mask), atol=1e-12)


def test_role_shares_on_known_patterns(monkeypatch):
    """A head that always attends to i-1 and one that always attends to sigma_1(i)."""
    cfg = ModelConfig(vocab=4, classes=5, seq_len=64, width=16, layers=2, heads=1, arch="attn-res-ln")
    model = EmbeddingProgrammedTransformer(cfg)
    meta = {"run": {"task": "khop", "k": 2, "backbone": "random", "arch": "attn-res-ln", "width": 16,
                    "layers": 2, "heads": 1}}
    seen = {}

    def fake_maps(tokens):
        x = tokens.numpy()
        b, t = x.shape
        sigma1 = khop_pointers(x, 1, 4)[1]
        prev = np.zeros((b, 1, t, t))
        ind = np.zeros((b, 1, t, t))
        for i in range(t):
            prev[:, 0, i, max(i - 1, 0)] = 1
            ind[np.arange(b), 0, i, np.where(sigma1[:, i] >= 0, sigma1[:, i], 0)] = 1
        seen["tokens"] = x
        return [torch.from_numpy(prev), torch.from_numpy(ind)]

    monkeypatch.setattr(model, "attention_maps", fake_maps)
    p = probe_mod.probe(model, meta, samples=32)
    first, second = p["heads"]
    assert first["roles"]["previous"] == 1.0 and probe_mod.main_role(first) == ("previous", 1.0)
    assert second["roles"]["hop 1"] == 1.0 and second["roles"]["self"] == 0.0
    # the hop 2 share of the induction head is how often sigma_2 == sigma_1, measured independently
    x = seen["tokens"]
    ptr = np.array([ref_pointers(list(row), 2) for row in x]).transpose(1, 0, 2)
    defined = ptr[2][:, probe_mod.SKIP:] >= 0
    same = (ptr[2] == ptr[1])[:, probe_mod.SKIP:][defined].mean()
    assert second["roles"]["hop 2"] == pytest.approx(same, abs=1e-4)
    assert sum(r["positions"] for r in p["by_distance"]) == 32 * 64      # every position once


def test_probe_command_on_a_trained_run(tmp_path, capsys):
    cfg = RunConfig(task="khop", k=1, backbone="sparse", arch="attn-res-ln", construction="paths",
                    width=40, layers=2, heads=1, steps=10, batch=8, test_size=16, curve_points=1)
    train(cfg, out=tmp_path / "ck", progress=False)
    assert cli_main(["experiment", "probe", str(tmp_path / "ck"), "--samples", "16",
                     "--save", str(tmp_path / "p.json")]) == 0
    out = capsys.readouterr().out
    assert "main role" in out and "accuracy by pointer distance" in out
    saved = json.loads((tmp_path / "p.json").read_text())
    assert saved["run"] == cfg.name() and len(saved["heads"]) == 2
    # layers and heads count from 0, as rasp compile and rasp show count them
    assert [(h["layer"], h["head"]) for h in saved["heads"]] == [(0, 0), (1, 0)]
    assert [line.split()[:2] for line in out.splitlines() if line.strip()[:1].isdigit()][:2] == \
        [["0", "0"], ["1", "0"]]
    model, meta = load_checkpoint(tmp_path / "ck")
    assert probe_mod.probe(model, meta, samples=16)["accuracy"] == saved["accuracy"]    # seeded
    assert cli_main(["experiment", "probe", str(tmp_path / "ck"), "--samples", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["samples"] == 8
    # Dyck-1 runs have the generic roles only
    dy = RunConfig(task="dyck1", backbone="random", width=8, layers=1, heads=2, steps=3, batch=4,
                   test_size=16, curve_points=1)
    train(dy, out=tmp_path / "dy", progress=False)
    assert cli_main(["experiment", "probe", str(tmp_path / "dy"), "--samples", "16", "--json"]) == 0
    roles = json.loads(capsys.readouterr().out)["heads"][0]["roles"]
    assert set(roles) == {"self", "previous", "first"}


def test_probe_command_errors(tmp_path, capsys):
    assert cli_main(["experiment", "probe", str(tmp_path)]) == 1
    assert "not a run checkpoint" in capsys.readouterr().err
    cfg = RunConfig(task="khop", k=1, backbone="random", arch="attn-res-ln", width=16, layers=1,
                    heads=2, steps=2, batch=4, test_size=8, curve_points=1)
    train(cfg, out=tmp_path / "ck", progress=False)
    meta = json.loads((tmp_path / "ck" / "config.json").read_text())
    meta["model"]["width"] = 32                                        # tampered: shapes disagree
    (tmp_path / "ck" / "config.json").write_text(json.dumps(meta))
    assert cli_main(["experiment", "probe", str(tmp_path / "ck")]) == 1
    err = capsys.readouterr().err
    assert "does not match its config.json" in err and "Traceback" not in err
    (tmp_path / "ck" / "model.safetensors").write_bytes(b"\x00" * 10)    # truncated
    assert cli_main(["experiment", "probe", str(tmp_path / "ck")]) == 1
    err = capsys.readouterr().err   # safetensors' "incomplete metadata" named no file
    assert "cannot read checkpoint" in err and "model.safetensors is truncated or corrupt" in err
    assert cli_main(["experiment", "probe", str(tmp_path / "ck"), "--samples", "0"]) == 1


def test_probe_of_a_compiled_model_says_what_it_is(tmp_path, capsys):
    """A compiled model directory also holds config.json and model.safetensors; reading it as a
    checkpoint said "does not match its config.json: 'run'" (a bare KeyError)."""
    root = Path(__file__).resolve().parents[1]
    assert cli_main(["compile", str(root / "programs/reverse.rasp"), "--vocab", "ab", "--max-len", "4",
                     "-o", str(tmp_path / "m")]) == 0
    capsys.readouterr()
    assert cli_main(["experiment", "probe", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'm'} is a compiled model (rasp compile), not an experiment checkpoint" in err
    assert "rasp show or rasp eval" in err and "'run'" not in err and err.count("error:") == 1


def test_probe_save_into_a_file_says_it_is_a_file(tmp_path, capsys):
    """mkdir said only "File exists" (or "Not a directory"), not which path is the file."""
    cfg = RunConfig(task="dyck1", backbone="random", width=8, layers=1, heads=2, steps=2, batch=4,
                    test_size=8, curve_points=1)
    train(cfg, out=tmp_path / "ck", progress=False)
    (tmp_path / "afile").write_text("")
    for save in ("x.json", "sub/x.json"):
        assert cli_main(["experiment", "probe", str(tmp_path / "ck"), "--samples", "4",
                         "--save", str(tmp_path / "afile" / save)]) == 1
        err = capsys.readouterr().err
        assert f"{tmp_path / 'afile'} is a file, not a directory" in err, err
        assert err.count("error:") == 1


def test_probe_save_into_a_directory_names_it(tmp_path, capsys):
    """--save DIR said only "DIR: Is a directory"."""
    cfg = RunConfig(task="dyck1", backbone="random", width=8, layers=1, heads=2, steps=2, batch=4,
                    test_size=8, curve_points=1)
    train(cfg, out=tmp_path / "ck", progress=False)
    (tmp_path / "d").mkdir()
    assert cli_main(["experiment", "probe", str(tmp_path / "ck"), "--samples", "4",
                     "--save", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'd'} is a directory, not a file" in err and "probe.json" in err, err
    assert err.count("error:") == 1 and list((tmp_path / "d").iterdir()) == []



def test_probe_save_replaces_only_an_earlier_probe_without_force(tmp_path, capsys):
    """--save onto a run's own model.safetensors (or any file) replaced it with the JSON silently."""
    cfg = RunConfig(task="dyck1", backbone="random", width=8, layers=1, heads=2, steps=2, batch=4,
                    test_size=8, curve_points=1)
    train(cfg, out=tmp_path / "ck", progress=False)
    weights = tmp_path / "ck" / "model.safetensors"
    before = weights.read_bytes()
    base = ["experiment", "probe", str(tmp_path / "ck"), "--samples", "4"]
    assert cli_main(base + ["--save", str(weights)]) == 1
    err = capsys.readouterr().err
    assert f"--save {weights} exists and is not an earlier probe's JSON; it is not replaced" in err, err
    assert "--force" in err and err.count("error:") == 1 and weights.read_bytes() == before
    saved = tmp_path / "probe.json"
    assert cli_main(base + ["--save", str(saved)]) == 0
    assert cli_main(base + ["--save", str(saved), "--seed", "3"]) == 0  # an earlier probe: replaced
    assert json.loads(saved.read_text())["seed"] == 3
    other = tmp_path / "notes.json"
    other.write_text('{"mine": 1}\n')
    assert cli_main(base + ["--save", str(other)]) == 1
    assert cli_main(base + ["--save", str(other), "--force"]) == 0
    assert json.loads(other.read_text())["run"] == cfg.name()
    capsys.readouterr()
    assert cli_main(base + ["--force"]) == 1
    assert "--force applies only with --save" in capsys.readouterr().err

@pytest.mark.parametrize("edit, words", [
    (lambda meta: meta["run"].update(k=3), "k is 3 in config.json but 1 in result.json"),
    (lambda meta: meta["run"].update(k=None), "k-hop run with k = None"),
    (lambda meta: meta["run"].update(k="1"), "k-hop run with k = '1'"),
    (lambda meta: meta["run"].update(task="bogus"), "unknown task 'bogus'"),
    (lambda meta: meta["model"].update(vocab=10), "is not that of task khop"),
])
def test_probe_refuses_a_config_that_does_not_describe_the_run(tmp_path, capsys, edit, words):
    """A probe read with another task or k measures the wrong thing: an error, not a table."""
    cfg = RunConfig(task="khop", k=1, backbone="random", arch="attn-res-ln", width=16, layers=1,
                    heads=2, steps=2, batch=4, test_size=8, curve_points=1)
    train(cfg, out=tmp_path / "ck", progress=False)
    meta = json.loads((tmp_path / "ck" / "config.json").read_text())
    edit(meta)
    (tmp_path / "ck" / "config.json").write_text(json.dumps(meta))
    assert cli_main(["experiment", "probe", str(tmp_path / "ck"), "--samples", "4"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and "Traceback" not in err


def test_probe_refuses_nan_weights(tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    cfg = RunConfig(task="khop", k=1, backbone="random", arch="attn-res-ln", width=16, layers=1,
                    heads=2, steps=2, batch=4, test_size=8, curve_points=1)
    train(cfg, out=tmp_path / "ck", progress=False)
    tensors = load_file(str(tmp_path / "ck" / "model.safetensors"))
    tensors["tok"][0, 0] = float("nan")
    save_file(tensors, str(tmp_path / "ck" / "model.safetensors"))
    config = json.loads((tmp_path / "ck" / "config.json").read_text())   # a consistent rewrite
    config["weights_sha256"] = weights_digest(tensors)
    (tmp_path / "ck" / "config.json").write_text(json.dumps(config))
    assert cli_main(["experiment", "probe", str(tmp_path / "ck"), "--samples", "4"]) == 1
    assert "NaN or infinite weights (tok)" in capsys.readouterr().err


def test_probe_refuses_more_samples_than_memory_holds(tmp_path, capsys):
    cfg = RunConfig(task="khop", k=1, backbone="random", arch="attn-res-ln", width=16, layers=1,
                    heads=2, steps=2, batch=4, test_size=8, curve_points=1)
    train(cfg, out=tmp_path / "ck", progress=False)
    assert cli_main(["experiment", "probe", str(tmp_path / "ck"), "--samples", str(10 ** 12)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --samples 1,000,000,000,000 needs about") and "use --samples" in err


def test_probe_of_an_unfinished_run_says_to_finish_it(tmp_path, capsys):
    """A killed run's --out holds only resume.safetensors: "not a run checkpoint" sent the user to
    look for another directory, where running the same command again finishes this one."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "resume.safetensors").write_bytes(b"\x00" * 16)
    assert cli_main(["experiment", "probe", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'run'} holds an unfinished run" in err and "run the same" in err
    assert err.count("error:") == 1
