"""Embedding-only experiments: data generators against independent references, frozen backbones,
the CLI's JSON, checkpoints, and the grid pipeline on a tiny configuration."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest
import torch

from rasp_compiler.cli import main as cli_main
from rasp_compiler.errors import UserError
from rasp_compiler.experiments import data
from rasp_compiler.experiments.data import IGNORE, dyck_batch, khop_batch, task_spec
from rasp_compiler.experiments.models import (
    EmbeddingProgrammedTransformer,
    ModelConfig,
    local_sparse_backbone,
    sparse_backbone,
    sparse_blocks,
)
from rasp_compiler.experiments.train import RESULT_KEYS, RunConfig, load_checkpoint, train

# ---------------------------------------------------------------------------------------------
# references written independently of the vectorised generators


def ref_balanced(s: str) -> bool:
    depth = 0
    for c in s:
        depth += 1 if c == "(" else -1
        if depth < 0:
            return False
    return depth == 0


def ref_hop(x: list[int], k: int, vocab: int) -> list[int]:
    out = []
    for i in range(len(x)):
        p = i
        for _ in range(k):
            js = [j for j in range(p) if x[j] == x[p]]
            if not js:
                p = None
                break
            p = js[-1] + 1
        out.append(vocab if p is None else x[p])
    return out


def za_reference(rng: random.Random, max_len: int = 30) -> str:
    """Zhong & Andreas' gen_single, per sample (the label is recomputed by ref_balanced)."""
    def gen_balanced(t):
        if t == 0:
            return ""
        if t == 1:
            return "()"
        if rng.randint(0, 1):
            return "(" + gen_balanced(t - 1) + ")"
        u = rng.randint(1, t - 1)
        return gen_balanced(u) + gen_balanced(t - u)

    mutate = rng.randint(0, 3)
    if rng.randint(0, 2) == 0:
        s = "".join(rng.choice("()") for _ in range(rng.randint(1, 2 * max_len)))
    else:
        s = gen_balanced(rng.randint(1, max_len))
        if rng.randint(0, 1):
            mutate = 0
    if mutate & 1:
        rep = 1
        while rng.randint(0, 1):
            rep += 1
        for _ in range(rep):
            p, q = rng.randint(0, len(s) - 1), rng.randint(0, len(s) - 1)
            if p < q:
                s = s[:p] + s[q] + s[p + 1:q] + s[p] + s[q + 1:]
    if mutate & 2:
        rep = 1
        while rng.randint(0, 1):
            rep += 1
        if rng.randint(0, 2):
            rep *= 2
        for _ in range(rep):
            p = rng.randint(0, len(s) - 1)
            s = s[:p] + {"(": ")", ")": "("}[s[p]] + s[p + 1:]
    return s


def decode_dyck(tokens: np.ndarray) -> str:
    return "".join("()"[t] for t in tokens if t in (0, 1))


# ---------------------------------------------------------------------------------------------
# data

def test_dyck_labels_match_reference_and_query_position():
    b = dyck_batch(np.random.default_rng(3), 2000, "train")
    for tok, tgt in zip(b.tokens, b.targets, strict=True):
        s = decode_dyck(tok)
        q = len(s)
        assert 1 <= q <= 60 and tok[q] == data.DYCK_QUERY
        assert (tok[q + 1:] == data.DYCK_PAD).all()
        assert (tgt != IGNORE).sum() == 1 and tgt[q] == int(ref_balanced(s))


def test_dyck_distribution_matches_zhong_andreas_generator():
    rng = random.Random(0)
    ref = [za_reference(rng) for _ in range(20000)]
    ref_pos = np.mean([ref_balanced(s) for s in ref])
    ref_len = np.mean([len(s) for s in ref])
    b = dyck_batch(np.random.default_rng(0), 20000, "train")
    pos = b.targets[b.targets != IGNORE].mean()
    length = (b.targets != IGNORE).argmax(axis=1).mean()
    assert abs(pos - ref_pos) < 0.02, (pos, ref_pos)
    assert abs(length - ref_len) < 1.0, (length, ref_len)
    # the balanced part really is balanced before mutation: unmutated share is large
    assert 0.35 < pos < 0.55


def test_khop_matches_definition():
    for k in (1, 2, 3, 4):
        b = khop_batch(np.random.default_rng(k), 50, k, "train", length=24, vocab=4)
        assert (b.tokens[:, 1:] != b.tokens[:, :-1]).all()       # no equal neighbours
        for x, y in zip(b.tokens, b.targets, strict=True):
            assert list(y) == ref_hop(list(x), k, 4)


def test_train_and_test_disjoint_and_seeded():
    spec = task_spec("dyck1")
    test = data.test_set(spec, 3000)
    test_keys = {row.tobytes() for row in test.tokens}
    stream = data.Stream(spec, 64, seed=5)
    seen = 0
    for _ in range(80):
        tok, _tgt = stream.next()
        full = np.full((tok.shape[0], 61), data.DYCK_PAD)
        full[:, :tok.shape[1]] = tok
        assert not any(row.tobytes() in test_keys for row in full)
        seen += len(tok)
    assert seen == 80 * 64
    a, b = data.Stream(spec, 16, seed=1).next(), data.Stream(spec, 16, seed=1).next()
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    ks = task_spec("khop", 2)
    t1, t2 = data.test_set(ks, 200), data.test_set(ks, 200)
    assert np.array_equal(t1.tokens, t2.tokens)
    assert data.in_test_split(t1.tokens).all()
    tok, _ = data.Stream(ks, 256, seed=0).next()
    assert not data.in_test_split(tok).any()


# ---------------------------------------------------------------------------------------------
# models

def test_sparse_backbone_is_the_universal_construction():
    for arch, construction in (("attn", "A"), ("attn-res-ln", "C")):
        ours = sparse_backbone(arch, 2, 4, 64)
        ref = local_sparse_backbone(construction, 2, 4, 64)
        for a, b in zip(ours, ref, strict=True):
            assert torch.equal(a["wq"], b["wq"]) and torch.equal(a["wk"], b["wk"])
    # construction A: one head, blocks of d = 64 // 5 = 12; layer 2 queries block 3, keys block 4
    w = sparse_backbone("attn", 2, 4, 64)[1]
    assert w["wq"].shape == (1, 64, 12)
    assert torch.equal(w["wq"][0, 36:48], torch.eye(12)) and w["wq"][0].sum() == 12
    assert torch.equal(w["wk"][0, 48:60], torch.eye(12))


def test_paths_backbone_is_the_universal_paths_construction():
    from rasp_compiler.universal import fixed_backbone

    # one head, residual, 2 layers: (2 + 4) key/query blocks + 4 output blocks = 10 blocks of d = 3
    ours = sparse_backbone("attn-res-ln", 2, 1, 32, construction="paths")
    ut = fixed_backbone("paths", layers=2, heads=1, dim=3, residual=True, causal=True)
    t = ut.backbone_tensors()
    assert t["R_Q"].shape[2] == 30
    for layer, w in enumerate(ours):
        assert w["wq"].shape == (1, 32, 3) and w["vmask"].shape == (1, 32)
        assert torch.equal(w["wq"][:, :30], t["R_Q"][layer].float())
        assert torch.equal(w["wk"][:, :30], t["R_K"][layer].float())
        assert torch.equal(w["vmask"][:, :30], t["R_V"][layer].float())
        assert not w["wq"][:, 30:].any() and not w["vmask"][:, 30:].any()   # unused columns
        assert set(w["vmask"].unique().tolist()) <= {0.0, 1.0}
    # a head writes only into the blocks of the paths that take it at its layer: layer 1 into the
    # layer-2 key and query blocks and the output blocks of paths (1, *), layer 2 into (*, 1)
    assert ours[0]["vmask"].sum() == 4 * 3 and ours[1]["vmask"].sum() == 2 * 3


def test_paths_attention_matches_naive_reference():
    torch.manual_seed(0)
    cfg = ModelConfig(vocab=4, classes=2, seq_len=6, width=42, layers=2, heads=2,
                      arch="attn-res-ln", backbone="sparse", construction="paths")
    m = EmbeddingProgrammedTransformer(cfg)
    layer = m.layers[0]
    x = torch.randn(2, 6, 42, dtype=torch.float64)
    wq, wk, mask = layer.wq.double(), layer.wk.double(), layer.vmask.double()
    d = wq.shape[1] // 2
    expect = torch.zeros_like(x)
    for h in range(2):
        q, k = x @ wq[:, h * d:(h + 1) * d], x @ wk[:, h * d:(h + 1) * d]
        for i in range(6):
            a = torch.softmax(torch.einsum("bd,bjd->bj", q[:, i], k[:, :i + 1]), dim=-1)
            expect[:, i] += torch.einsum("bj,bjm->bm", a, x[:, :i + 1]) * mask[h]
    layer_f64 = layer.double()
    got = layer_f64.attention(x, m.mask.double())
    assert torch.allclose(got, expect, atol=1e-12)


def test_attention_matches_naive_reference():
    torch.manual_seed(0)
    cfg = ModelConfig(vocab=4, classes=2, seq_len=10, width=8, layers=1, heads=2, arch="attn",
                      backbone="random")
    m = EmbeddingProgrammedTransformer(cfg)
    tok = torch.randint(0, 4, (3, 10))
    layer = m.layers[0]
    x = (m.tok[tok] + m.pos[:10]).detach().double()
    out = torch.zeros_like(x)
    for h in range(2):
        sl = slice(4 * h, 4 * h + 4)
        q, k = x @ layer.wq.double()[:, sl], x @ layer.wk.double()[:, sl]
        v = x @ layer.wv.double()[:, sl]
        for i in range(10):
            s = torch.stack([(q[:, i] * k[:, j]).sum(-1) / 2.0 for j in range(i + 1)], dim=-1)
            a = torch.softmax(s, dim=-1)
            out[:, i] += (a[..., None] * v[:, :i + 1]).sum(1) @ layer.wo.double()[sl]
    expect = m.unembed(out.float())
    assert torch.allclose(m(tok), expect, atol=1e-4)


@pytest.mark.parametrize("backbone,arch,construction", [
    ("sparse", "attn", "auto"), ("sparse", "attn-res-ln-mlp", "auto"), ("sparse", "attn-res-ln", "paths"),
    ("random", "attn", "auto"), ("random", "attn-res-ln", "auto"), ("random", "attn-res-ln-mlp", "auto")])
def test_frozen_backbone_is_bit_identical_after_training(backbone, arch, construction, tmp_path):
    width = 42 if construction == "paths" else 16
    cfg = RunConfig(task="khop", k=1, backbone=backbone, arch=arch, width=width, layers=2, heads=2,
                    steps=30, batch=8, lr=3e-2, test_size=16, curve_points=2, construction=construction)
    from rasp_compiler.experiments.models import ModelConfig as MC
    spec = task_spec("khop", 1)
    before = EmbeddingProgrammedTransformer(MC(spec.vocab, spec.classes, spec.seq_len, width, 2, 2, arch,
                                                backbone, 0, cfg.emb_std, construction))
    frozen_before = {n: p.detach().clone() for n, p in before.named_parameters() if not p.requires_grad}
    trained_before = {n: p.detach().clone() for n, p in before.named_parameters() if p.requires_grad}
    assert set(trained_before) == {"tok", "pos", "unembed.weight", "unembed.bias"}
    assert frozen_before  # attention (and LN / MLP) weights exist and are frozen
    train(cfg, out=tmp_path, progress=False)
    after, meta = load_checkpoint(tmp_path)
    state = dict(after.named_parameters())
    for n, p in frozen_before.items():
        assert torch.equal(state[n], p), n                      # bit-identical
    assert any(not torch.equal(state[n], p) for n, p in trained_before.items())
    assert sorted(meta["frozen"]) == sorted(frozen_before)


def test_trained_backbone_trains_everything(tmp_path):
    cfg = RunConfig(task="dyck1", backbone="trained", arch="attn-res-ln-mlp", width=16, layers=1,
                    heads=2, steps=5, batch=8, test_size=32, curve_points=1)
    result, _ = train(cfg, out=tmp_path, progress=False)
    assert result["frozen_params"] == 0 and result["trainable_params"] > 16 * 16 * 8


# ---------------------------------------------------------------------------------------------
# command line and grid

def test_cli_json_output_keys(tmp_path, capsys):
    rc = cli_main(["experiment", "khop", "--k", "2", "--backbone", "sparse", "--arch", "attn-res-ln",
                   "--width", "20", "--layers", "2", "--heads", "2", "--steps", "20", "--batch", "8",
                   "--out", str(tmp_path / "ck"), "--json", "--no-progress"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert tuple(out) == RESULT_KEYS
    assert out["task"] == "khop" and out["k"] == 2 and out["width"] == 20 and out["steps"] == 20
    assert 0 <= out["test_accuracy"] <= 1 and out["frozen_params"] > 0
    assert (tmp_path / "ck" / "model.safetensors").is_file()
    assert json.loads((tmp_path / "ck" / "curve.json").read_text())["step"][-1] == 20
    rc = cli_main(["experiment", "dyck1", "--steps", "3", "--batch", "4", "--width", "8", "--heads", "2",
                   "--out", str(tmp_path / "d"), "--json", "--no-progress"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["k"] is None and out["task"] == "dyck1"


def test_cli_progress_off_a_terminal(tmp_path, capsys):
    """Piped to a log, a training run says how far it is: a line per tenth, not a redrawn bar."""
    rc = cli_main(["experiment", "dyck1", "--steps", "20", "--batch", "4", "--width", "8",
                   "--heads", "2", "--out", str(tmp_path / "d")])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if ": step " in line]
    assert rc == 0 and "\r" not in err
    assert [line.split(": step ")[1].split(" ")[0] for line in lines] == [f"{2 * i}/20" for i in range(1, 11)]
    assert "acc " in lines[0] and "loss " in lines[0] and lines[-1].split(", ")[-1].endswith(" s")
    rc = cli_main(["experiment", "dyck1", "--steps", "20", "--batch", "4", "--width", "8",
                   "--heads", "2", "--out", str(tmp_path / "d2"), "--no-progress"])
    assert rc == 0 and ": step " not in capsys.readouterr().err


def test_report_only_from_a_missing_results_directory_is_refused(tmp_path, capsys):
    """A typo in --results rewrote the report from 0 runs."""
    doc = tmp_path / "experiments.md"
    assert cli_main(["experiment", "table", "--report-only", "--results", str(tmp_path / "nope"),
                     "--doc", str(doc), "--img", str(tmp_path / "img")]) == 1
    assert "no such directory" in capsys.readouterr().err and not doc.exists()


def test_cli_user_errors(capsys):
    assert cli_main(["experiment", "dyck1", "--width", "3", "--backbone", "sparse", "--steps", "1"]) == 1
    assert "too small" in capsys.readouterr().err
    assert cli_main(["experiment", "dyck1", "--width", "30", "--heads", "4", "--steps", "1"]) == 1
    assert "multiple" in capsys.readouterr().err
    assert cli_main(["experiment", "dyck1", "--device", "cuda", "--steps", "1"]) in (0, 1)
    assert cli_main(["experiment", "khop", "--k", "1", "--construction", "paths", "--steps", "1"]) == 1
    assert "sparse backbone only" in capsys.readouterr().err
    assert cli_main(["experiment", "khop", "--k", "3", "--backbone", "sparse", "--construction", "paths",
                     "--layers", "4", "--heads", "2", "--width", "100", "--steps", "1"]) == 1
    err = capsys.readouterr().err
    assert "too small for sparse construction paths" in err and "needs at least 201" in err  # 3+9+27+81+81
    # construction A has one head: --heads 4 ran a one-head backbone without a word
    for construction in (["--construction", "A"], []):  # auto is A for the attn architecture
        assert cli_main(["experiment", "dyck1", "--backbone", "sparse", *construction, "--heads", "4",
                         "--steps", "1"]) == 1
        assert "the sparse construction A has one head" in capsys.readouterr().err


def test_cli_paths_construction_runs_and_names_itself(tmp_path, capsys):
    rc = cli_main(["experiment", "khop", "--k", "1", "--backbone", "sparse", "--construction", "paths",
                   "--width", "40", "--layers", "2", "--heads", "1", "--steps", "5", "--batch", "4",
                   "--out", str(tmp_path / "ck"), "--no-progress"])
    assert rc == 0
    assert "backbone=sparse (paths)" in capsys.readouterr().out
    meta = json.loads((tmp_path / "ck" / "config.json").read_text())
    assert meta["model"]["construction"] == "paths" and "layers.0.vmask" in meta["frozen"]
    cfg = RunConfig(task="khop", k=1, backbone="sparse", arch="attn-res-ln", construction="paths")
    assert cfg.name().startswith("khop1_sparse-paths_attn-res-ln_")


def test_grid_pipeline_tiny(tmp_path):
    from rasp_compiler.experiments import grid, report

    configs = [grid.run_config("dyck1", None, b, "attn", 0, width=16, steps=150, batch=32, lr=3e-2,
                               test_size=512) for b in ("sparse", "random")]
    configs.append(grid.run_config("khop", 1, "random", "attn-res-ln", 0, width=16, steps=150, batch=16,
                                   lr=3e-2, test_size=64))
    res = tmp_path / "results"
    lines = []
    new = grid.run_grid(configs, res, jobs=1, checkpoints=None, log=lines.append)
    assert len(new) == 3
    for r in new:
        assert tuple(r) == RESULT_KEYS
        assert r["test_accuracy"] > r["majority_baseline"], r
    mtime = {p: p.stat().st_mtime_ns for p in res.glob("*.json")}
    assert grid.run_grid(configs, res, jobs=1, checkpoints=None, log=lines.append) == []   # resumable
    assert mtime == {p: p.stat().st_mtime_ns for p in res.glob("*.json")}
    doc = tmp_path / "experiments.md"
    report.write_report(res, doc, tmp_path / "img")
    text = doc.read_text()
    assert "## Results" in text and "Not run yet" in text   # the tiny runs are not the real grid
    for c, r in zip(configs, new, strict=True):  # every run is listed with its own number
        assert f"`{c.name()}` | {100 * r['test_accuracy']:.1f} %" in text
    for png in re.findall(r"\]\(([^)]+\.png)\)", text):     # every plot the report shows exists
        assert (doc.parent / png).is_file()
    assert "met (" not in text                   # no bar is claimed from runs that are not the grid's


@pytest.mark.slow
def test_table_quick_end_to_end(tmp_path):
    import resource

    def cpu() -> float:   # this process and its (finished) worker processes
        a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

    c0 = cpu()
    rc = cli_main(["experiment", "table", "--quick", "--jobs", "2", "--results", str(tmp_path / "r"),
                   "--doc", str(tmp_path / "e.md"), "--img", str(tmp_path / "img")])
    # 10 minutes on 2 cores = 1200 CPU seconds; measured on a loaded machine, wall time says little
    assert rc == 0 and cpu() - c0 < 1200
    results = [json.loads(p.read_text()) for p in (tmp_path / "r").glob("*.json")]
    assert len(results) == 6
    for r in results:
        assert r["test_accuracy"] > r["majority_baseline"], r
    assert (tmp_path / "img" / "experiments_quick_accuracy.png").is_file()
    assert "quick grid" in (tmp_path / "e.md").read_text()


@pytest.mark.parametrize("backbone,arch", [("sparse", "attn"), ("random", "attn"),
                                           ("sparse", "attn-res-ln"), ("trained", "attn-res-ln-mlp")])
def test_query_row_forward_equals_full_forward(backbone, arch):
    cfg = ModelConfig(vocab=4, classes=2, seq_len=12, width=24, layers=2, heads=2, arch=arch,
                      backbone=backbone, seed=1)
    m = EmbeddingProgrammedTransformer(cfg)
    tok = torch.randint(0, 4, (5, 12))
    rows = torch.tensor([0, 3, 11, 7, 5])
    full = m(tok)[torch.arange(5), rows]
    assert torch.allclose(m(tok, rows), full, atol=1e-5)


def test_time_budget_stops_starting_runs(tmp_path):
    from rasp_compiler.experiments import grid

    configs = [grid.run_config("dyck1", None, "random", "attn", s, width=8, heads=2, steps=5, batch=4,
                               test_size=16) for s in (0, 1)]
    lines = []
    assert grid.run_grid(configs, tmp_path, jobs=1, checkpoints=None, log=lines.append,
                         time_budget=0.0) == []
    assert "left for later" in lines[-1] and len(grid.missing(configs, tmp_path)) == 2
    assert len(grid.run_grid(configs, tmp_path, jobs=1, checkpoints=None, log=lines.append)) == 2


def test_a_damaged_result_file_is_a_missing_run(tmp_path):
    """A result file cut short (a run killed while writing) was counted as done and never redone."""
    from rasp_compiler.experiments import grid

    configs = [grid.run_config("dyck1", None, "random", "attn", s, width=8, heads=2, steps=5, batch=4,
                               test_size=16) for s in (0, 1)]
    lines = []
    assert len(grid.run_grid(configs, tmp_path, jobs=1, checkpoints=None, log=lines.append)) == 2
    assert grid.missing(configs, tmp_path) == []
    cut = grid.result_path(tmp_path, configs[1])
    cut.write_text(cut.read_text()[:30])
    assert grid.missing(configs, tmp_path) == [configs[1]] and grid.damaged(configs, tmp_path) == [cut]
    lines.clear()
    redone = grid.run_grid(configs, tmp_path, jobs=1, checkpoints=None, log=lines.append)
    assert len(redone) == 1 and redone[0]["seed"] == 1
    assert any(str(cut) in line and "damaged" in line for line in lines)
    assert grid.read_result(cut) == redone[0]


def test_the_scale_grid_is_part_of_the_resumable_grid():
    from rasp_compiler.experiments import grid

    names = {c.name() for c in grid.full_grid()}
    scale = grid.scale_grid()
    assert scale and all(c.name() in names for c in scale)
    # k-hop at depth k + 1: one layer to look one token back, one per hop
    assert {(c.k, c.layers) for c in scale if c.task == "khop"} == {(k, k + 1) for k in grid.KS}
    assert {c.k for c in scale if c.aux} == set(grid.RANDOM_AUX_KS)
    assert all(c.backbone == "random" and c.aux == c.name().count("_aux") for c in scale if c.aux)
    wide = [c for c in scale if c.precision == "bf16"]
    assert {(c.k, c.width, c.layers) for c in wide} == set(grid.RANDOM_AUX_WIDE)
    assert all(c.aux and c.name().endswith(f"_bf16_seed{c.seed}") for c in wide)
    paths = grid.paths_grid()
    assert paths and all(c.name() in names for c in paths)
    assert {c.construction for c in paths} == {"paths"} and {c.backbone for c in paths} == {"sparse"}
    # every paths run's width is a whole number of blocks of the d it was sized for
    for c in paths:
        blocks = sparse_blocks(c.arch, c.layers, c.heads, "paths")
        assert c.width % blocks == 0 and c.width // blocks >= 8


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_training_on_cuda_keeps_the_backbone_frozen_and_learns(tmp_path):
    cfg = RunConfig(task="dyck1", backbone="sparse", arch="attn", width=32, layers=2, steps=300,
                    batch=64, lr=3e-2, test_size=512, curve_points=2, device="cuda")
    spec = task_spec("dyck1")
    before = EmbeddingProgrammedTransformer(ModelConfig(spec.vocab, spec.classes, spec.seq_len, 32, 2, 4,
                                                        "attn", "sparse", 0, cfg.emb_std))
    result, curve = train(cfg, out=tmp_path, progress=False)
    after, _ = load_checkpoint(tmp_path)
    state = dict(after.named_parameters())
    for n, p in before.named_parameters():
        if not p.requires_grad:
            assert torch.equal(state[n], p), n
    assert curve["device"] != "cpu"
    assert result["test_accuracy"] > result["majority_baseline"] + 0.1


# ---------------------------------------------------------------------------------------------
# the hop curriculum

@pytest.fixture
def hop_calls(monkeypatch) -> list[int]:
    """The hop count of every khop_targets call the training loop makes (targets relabelled)."""
    from rasp_compiler.experiments import train as train_mod

    seen: list[int] = []
    real = train_mod.khop_targets

    def spy(x, k, vocab):
        seen.append(k)
        return real(x, k, vocab)

    monkeypatch.setattr(train_mod, "khop_targets", spy)
    return seen


def test_curriculum_trains_each_hop_in_turn(hop_calls, tmp_path):
    seen = hop_calls
    cfg = RunConfig(task="khop", k=3, backbone="sparse", arch="attn-res-ln", construction="paths",
                    width=46, layers=4, heads=1, steps=7, curriculum=5, batch=4, test_size=8,
                    curve_points=100)
    assert cfg.stages() == [(1, 5), (2, 5), (3, 7)] and cfg.total_steps() == 17
    assert "_s7_cur5_" in cfg.name()
    result, curve = train(cfg, out=tmp_path, progress=False)
    # relabelled batches: 5 per earlier stage (+1 call per stage for its curve's test targets)
    assert seen.count(1) == 5 + 1 and seen.count(2) == 5 + 1 and 3 not in seen
    assert result["steps"] == 17 and curve["step"][-1] == 17
    assert curve["hop"] == [1] * 5 + [2] * 5 + [3] * 7
    meta = json.loads((tmp_path / "config.json").read_text())
    assert meta["run"]["curriculum"] == 5
    # without a curriculum nothing is relabelled and the curve has no stages
    seen.clear()
    _, plain = train(RunConfig(task="khop", k=2, width=16, layers=1, heads=2, steps=3, batch=4,
                               test_size=8), progress=False)
    assert seen == [] and "hop" not in plain


def test_curriculum_user_errors(capsys):
    assert cli_main(["experiment", "khop", "--k", "1", "--curriculum", "10", "--steps", "1"]) == 1
    assert "k >= 2" in capsys.readouterr().err
    assert cli_main(["experiment", "khop", "--k", "2", "--curriculum", "-1", "--steps", "1"]) == 1
    assert "at least 0" in capsys.readouterr().err
    with pytest.raises(Exception, match="k-hop"):
        from rasp_compiler.experiments.train import validate
        validate(RunConfig(task="dyck1", curriculum=5))


def test_report_shows_curriculum_cells_and_probes(tmp_path):
    """The report reads the curriculum cells and the probe files it is given, and nothing else."""
    from rasp_compiler.experiments import grid, report
    from rasp_compiler.experiments.probe import probe, save_probe

    res = tmp_path / "results"
    res.mkdir()
    cur = [c for c in grid.full_grid() if c.curriculum and c.k == 2 and c.steps == 12000]
    assert [c.seed for c in cur] == [0, 1, 2]
    accs = [0.91, 0.97, 0.95]                 # made-up numbers: the report must carry them over
    for c, a in zip(cur, accs, strict=True):
        r = dict.fromkeys(RESULT_KEYS, 0)
        r.update(task="khop", k=2, backbone="sparse", arch="attn-res-ln", seed=c.seed, width=c.width,
                 steps=c.total_steps(), test_accuracy=a, majority_baseline=0.2, seconds=1.0)
        (res / f"{c.name()}.json").write_text(json.dumps(r))
    cfg = RunConfig(task="khop", k=2, backbone="sparse", arch="attn-res-ln", construction="paths",
                    width=22, layers=3, heads=1, steps=4, batch=4, test_size=8, curve_points=1)
    train(cfg, out=tmp_path / "ck", progress=False)
    model, meta = load_checkpoint(tmp_path / "ck")
    p = probe(model, meta, samples=8)
    save_probe(p, res / "probes" / f"{cfg.name()}.json")
    doc = tmp_path / "experiments.md"
    report.write_report(res, doc, tmp_path / "img")
    text = doc.read_text()
    cell = cur[0].name().rsplit("_seed", 1)[0]
    assert f"| 2 | curriculum 2,000/hop | `{cell}` | 95.0 % (3) | 91.0 %, 97.0 %, 95.0 % | not run |" in text
    assert "## Inside the runs" in text and f"`{cfg.name()}` | {100 * p['accuracy']:.1f} %" in text


# ---------------------------------------------------------------------------------------------
# auxiliary hop unembeddings

def test_aux_heads_leave_the_model_and_its_output_alone():
    base = ModelConfig(vocab=4, classes=5, seq_len=16, width=22, layers=3, heads=1, arch="attn-res-ln",
                       backbone="sparse", construction="paths")
    plain = EmbeddingProgrammedTransformer(base)
    with_aux = EmbeddingProgrammedTransformer(ModelConfig(**{**base.to_json(), "aux": 2}))
    tokens = torch.randint(0, 4, (3, 16), generator=torch.Generator().manual_seed(1))
    assert len(with_aux.aux_unembed) == 2 and len(plain.aux_unembed) == 0
    assert torch.equal(plain(tokens), with_aux(tokens))            # forward never reads them
    assert torch.equal(with_aux.unembed(with_aux.hidden(tokens)), with_aux(tokens))


def test_aux_training_adds_one_loss_per_earlier_hop(hop_calls, tmp_path):
    seen = hop_calls
    cfg = RunConfig(task="khop", k=3, backbone="sparse", arch="attn-res-ln", construction="paths",
                    width=46, layers=4, heads=1, steps=6, aux=True, batch=4, test_size=8,
                    curve_points=1)
    assert cfg.name().endswith("_s6_aux_b4_lr0.01_seed0")
    before = EmbeddingProgrammedTransformer(ModelConfig(4, 5, 64, 46, 4, 1, "attn-res-ln", "sparse", 0,
                                                        0.5, "paths", aux=2))
    result, _ = train(cfg, out=tmp_path, progress=False)
    assert seen.count(1) == 6 and seen.count(2) == 6 and 3 not in seen
    model, meta = load_checkpoint(tmp_path)
    assert meta["model"]["aux"] == 2 and len(model.aux_unembed) == 2
    for name, p in model.named_parameters():                 # the backbone stays frozen
        if not p.requires_grad:
            assert torch.equal(p, dict(before.named_parameters())[name]), name
    moved = [not torch.equal(model.aux_unembed[i].weight, before.aux_unembed[i].weight) for i in range(2)]
    assert all(moved)                                        # both auxiliary heads were trained
    n_aux = sum(p.numel() for p in model.aux_unembed.parameters())
    assert result["trainable_params"] == sum(p.numel() for p in before.parameters() if p.requires_grad)
    assert n_aux == 2 * (46 * 5 + 5)


def test_aux_user_errors(capsys):
    assert cli_main(["experiment", "khop", "--k", "1", "--aux-hops", "--steps", "1"]) == 1
    assert "k >= 2" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:                   # a k-hop-only option: argparse says so
        cli_main(["experiment", "dyck1", "--aux-hops", "--steps", "1"])
    assert err.value.code == 2 and "unrecognized arguments: --aux-hops" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# bf16 training matmuls

def test_bf16_training_keeps_fp32_weights_and_a_frozen_backbone(tmp_path):
    common = dict(task="khop", k=2, backbone="random", arch="attn-res-ln", width=16, layers=2,
                  heads=2, steps=4, batch=4, aux=True, test_size=8, curve_points=1)
    fp32 = RunConfig(**common)
    bf16 = RunConfig(**common, precision="bf16")
    assert bf16.name() == fp32.name().replace("_seed0", "_bf16_seed0")
    train(fp32, out=tmp_path / "fp32", progress=False)
    train(bf16, out=tmp_path / "bf16", progress=False)
    a, _ = load_checkpoint(tmp_path / "fp32")
    b, meta = load_checkpoint(tmp_path / "bf16")
    assert meta["run"]["precision"] == "bf16"
    assert all(p.dtype == torch.float32 for p in b.parameters())     # the saved model is fp32
    pa, pb = dict(a.named_parameters()), dict(b.named_parameters())
    for name, p in pb.items():
        if p.requires_grad:
            assert not torch.equal(p, pa[name]), name    # same seed and data: bf16 rounding shows
        else:
            assert torch.equal(p, pa[name]), name        # the backbone is the same, untouched


def test_precision_user_errors(capsys):
    with pytest.raises(SystemExit) as err:
        cli_main(["experiment", "dyck1", "--precision", "fp16", "--steps", "1"])
    assert err.value.code == 2 and "invalid choice: 'fp16'" in capsys.readouterr().err
    with pytest.raises(UserError, match="unknown precision"):
        train(RunConfig(steps=1, precision="fp8"), progress=False)


def test_report_shows_random_4hop_against_width(tmp_path):
    """Grid cells and tuning runs of the depth-5 random 4-hop shape become one width table."""
    from rasp_compiler.experiments import grid, report

    res = tmp_path / "results"
    (res / "tuning").mkdir(parents=True)
    runs = {(256, "fp32", 0, res): 0.61, (256, "bf16", 0, res / "tuning"): 0.62,
            (512, "bf16", 0, res): 0.93, (512, "bf16", 1, res): 0.85, (512, "bf16", 2, res): 0.91}
    for (width, precision, seed, where), acc in runs.items():   # made-up numbers, carried over
        c = grid.run_config("khop", 4, "random", "attn-res-ln", seed, width=width, layers=5,
                            steps=6000, aux=True, precision=precision)
        r = dict.fromkeys(RESULT_KEYS, 0)
        r.update(task="khop", k=4, backbone="random", arch="attn-res-ln", seed=seed, width=width,
                 steps=6000, test_accuracy=acc, majority_baseline=0.2, seconds=1.0)
        (where / f"{c.name()}.json").write_text(json.dumps(r))
    doc = tmp_path / "experiments.md"
    report.write_report(res, doc, tmp_path / "img")
    text = doc.read_text()
    assert "| 256 | bf16 | 1 | 62.0 % (seed 0) | 62.0 % |" in text
    assert "| 256 | fp32 | 1 | 61.0 % (seed 0) | 61.0 % |" in text
    assert "| 512 | bf16 | 3 | 93.0 % (seed 0), 85.0 % (seed 1), 91.0 % (seed 2) | 91.0 % |" in text


def _write_results(where, accs: list) -> None:
    """Made-up result files, one per (RunConfig, accuracy) in ``accs``."""
    where.mkdir(parents=True, exist_ok=True)
    for c, acc in accs:
        r = dict.fromkeys(RESULT_KEYS, 0)
        r.update(task=c.task, k=c.k, backbone=c.backbone, arch=c.arch, seed=c.seed, width=c.width,
                 steps=c.steps, test_accuracy=acc, majority_baseline=0.2, seconds=1.0)
        (where / f"{c.name()}.json").write_text(json.dumps(r))


def test_report_words_the_mlp_note_from_the_results(tmp_path):
    """The frozen-MLP note quotes the random UT's base medians and picks its verbs from them."""
    from rasp_compiler.experiments import grid, report

    made_up = {("khop", 1, "attn-res-ln"): 0.70, ("khop", 1, "attn-res-ln-mlp"): 0.75,    # rises
               ("khop", 2, "attn-res-ln"): 0.50, ("khop", 2, "attn-res-ln-mlp"): 0.501,   # level
               ("dyck1", None, "attn-res-ln"): 0.90, ("dyck1", None, "attn-res-ln-mlp"): 0.80}
    _write_results(tmp_path / "results", [(grid.run_config(task, k, "random", arch, seed), acc)
                                          for (task, k, arch), acc in made_up.items()
                                          for seed in grid.SEEDS])
    doc = tmp_path / "experiments.md"
    report.write_report(tmp_path / "results", doc, tmp_path / "img")
    text = doc.read_text()
    assert ("At these base settings they help for 1-hop: 1-hop rises from 70.0 % (res+LN) to "
            "75.0 % (with the MLP), and 2-hop stays within 0.1 points (50.0 → 50.1 %). Dyck-1 "
            "falls from 90.0 % to 80.0 %. No run with a frozen MLP was made") in text
    assert "not reproduced as a help" not in text


def test_report_finds_frozen_runs_at_the_papers_learning_rate(tmp_path):
    """The learning-rate note says whether a frozen backbone was ever run at the paper's lr."""
    from rasp_compiler.experiments import grid, report

    res = tmp_path / "results"
    _write_results(res, [(grid.run_config("khop", 1, "random", "attn-res-ln", 0, lr=1e-2), 0.8)])
    report.write_report(res, tmp_path / "a.md", tmp_path / "img")
    assert "No frozen-backbone run at lr 1e-3 is recorded" in (tmp_path / "a.md").read_text()
    at_paper_lr = grid.run_config("khop", 1, "random", "attn-res-ln", 0, lr=1e-3)
    _write_results(res / "tuning", [(at_paper_lr, 0.8)])
    report.write_report(res, tmp_path / "b.md", tmp_path / "img")
    assert f"Frozen-backbone runs at lr 1e-3: `{at_paper_lr.name()}`." in (tmp_path / "b.md").read_text()


# ---------------------------------------------------------------------------------------------
# the floor settings `rasp experiment` defaults to

def test_floor_settings_are_the_cheapest_measured_cells_that_reach_the_floor():
    """Re-derives FLOOR_SETTINGS from the committed result files: each entry's cell has 3 seeds
    whose median meets the paper's floor, and no other such cell costs less CPU time per run."""
    import statistics
    from pathlib import Path

    from rasp_compiler.experiments import grid

    results = Path(__file__).resolve().parents[1] / "docs" / "results" / "experiments"
    cells: dict[str, list] = {}
    for c in grid.full_grid():
        path = results / f"{c.name()}.json"
        if path.is_file():
            r = json.loads(path.read_text())
            curve = results / "curves" / path.name
            cpu = json.loads(curve.read_text()).get("total_cpu_seconds") if curve.is_file() else None
            cells.setdefault(c.name().rsplit("_seed", 1)[0], []).append((c, r["test_accuracy"],
                                                                       cpu or r["seconds"]))
    assert set(grid.FLOOR_SETTINGS) == set(grid.FLOORS)
    for (task, k, backbone), recipe in grid.FLOOR_SETTINGS.items():
        floor = grid.FLOORS[(task, k, backbone)]
        chosen = grid.run_config(task, k, backbone, grid.FLOOR_ARCH[task], 0, **recipe).name()
        reaching = {}
        for cell, runs in cells.items():
            c = runs[0][0]
            if (c.task, c.k, c.backbone, c.arch) == (task, k, backbone, grid.FLOOR_ARCH[task]) and \
                    len(runs) >= 3 and statistics.median(a for _, a, _ in runs) >= floor:
                reaching[cell] = statistics.median(t for _, _, t in runs)
        cell = chosen.rsplit("_seed", 1)[0]
        assert cell in reaching, (task, k, backbone)
        assert reaching[cell] == min(reaching.values()), (task, k, backbone, reaching)


def test_cli_defaults_to_the_floor_settings(tmp_path, capsys):
    def run(*extra):
        rc = cli_main(["experiment", "khop", "--k", "1", "--steps", "2", "--batch", "2",
                       # --no-resume: each run replaces the one before (another run's is refused)
                       "--out", str(tmp_path / "ck"), "--json", "--no-progress", "--no-resume", *extra])
        assert rc == 0
        return json.loads(capsys.readouterr().out)

    assert run("--backbone", "sparse")["width"] == 80                    # the paths cell
    assert run("--backbone", "sparse", "--settings", "base")["width"] == 64
    assert run("--backbone", "sparse", "--construction", "C")["width"] == 64   # recipe not for C
    assert run("--backbone", "sparse", "--width", "120")["width"] == 120     # options still win
    assert run("--backbone", "trained")["width"] == 64                   # no floor: base settings
    cfg = json.loads((tmp_path / "ck" / "config.json").read_text())["run"]
    assert cfg["backbone"] == "trained"


def test_unwritable_out_fails_before_training(tmp_path, monkeypatch, capsys):
    """A floor run takes up to 45 minutes: an --out that cannot be written must fail at once."""
    from rasp_compiler.experiments import train as train_mod

    def no_training(*args, **kwargs):
        raise AssertionError("training started although --out is unwritable")
    monkeypatch.setattr(train_mod, "_train_stage", no_training)
    (tmp_path / "file").write_text("")
    rc = cli_main(["experiment", "dyck1", "--settings", "base", "--steps", "2", "--batch", "4",
                   "--no-progress", "--out", str(tmp_path / "file" / "run")])
    assert rc == 1
    err = capsys.readouterr().err
    assert f"--out {tmp_path / 'file' / 'run'}: cannot write the checkpoint" in err


def test_an_out_that_is_a_file_is_named_as_a_file(tmp_path, monkeypatch, capsys):
    """mkdir said only "File exists" (--out is a file) or "Not a directory" (a parent is)."""
    from rasp_compiler.experiments import grid
    from rasp_compiler.experiments import train as train_mod

    def no_run(*args, **kwargs):
        raise AssertionError("a run started although the output path is a file")
    monkeypatch.setattr(train_mod, "_train_stage", no_run)
    monkeypatch.setattr(grid, "run_grid", no_run)
    afile = tmp_path / "afile"
    afile.write_text("")
    for argv, says in (
            (["dyck1", "--steps", "1", "--no-progress", "--out", str(afile)],
             f"--out {afile}: cannot write the checkpoint there: it is a file, not a directory"),
            (["dyck1", "--steps", "1", "--no-progress", "--out", str(afile / "run")],
             f"--out {afile / 'run'}: cannot write the checkpoint there: {afile} is a file, not a "
             "directory"),
            (["table", "--quick", "--results", str(afile), "--doc", str(tmp_path / "d.md"),
              "--img", str(tmp_path / "i")],
             f"--results {afile}: cannot write the results there: it is a file, not a directory"),
            (["table", "--quick", "--results", str(tmp_path / "r"), "--doc", str(afile / "x.md"),
              "--img", str(tmp_path / "i")],
             f"--doc {afile}: cannot write the report there: it is a file, not a directory")):
        assert cli_main(["experiment", *argv]) == 1
        err = capsys.readouterr().err
        assert says in err and err.count("error:") == 1, err


def test_diverged_training_is_an_error_not_a_result(tmp_path, capsys):
    rc = cli_main(["experiment", "dyck1", "--settings", "base", "--width", "8", "--heads", "2",
                   "--steps", "5", "--batch", "4", "--lr", "1e30", "--no-progress",
                   "--out", str(tmp_path / "run")])
    assert rc == 1
    err = capsys.readouterr().err
    assert "the training loss became nan" in err and "lower --lr" in err
    assert not (tmp_path / "run" / "result.json").exists()


def test_runs_too_big_for_memory_or_cores_are_refused(capsys):
    import os

    assert cli_main(["experiment", "dyck1", "--settings", "base", "--width", "1000000",
                     "--steps", "1", "--no-progress"]) == 1
    assert "--width 1000000 with --layers 2 and --batch 64 needs about" in capsys.readouterr().err
    assert cli_main(["experiment", "dyck1", "--settings", "base", "--steps", "1",
                     "--threads", str((os.cpu_count() or 1) + 1), "--no-progress"]) == 1
    assert "CPU cores" in capsys.readouterr().err


def test_table_checks_its_output_directories_before_any_run(tmp_path, monkeypatch, capsys):
    """The grid writes results, report and plots only after its runs (hours): an unwritable path
    must fail first, naming the option."""
    from rasp_compiler.experiments import grid

    def no_runs(*args, **kwargs):
        raise AssertionError("the grid started although an output directory is unwritable")
    monkeypatch.setattr(grid, "run_grid", no_runs)
    (tmp_path / "file").write_text("")
    bad = str(tmp_path / "file" / "sub")
    for flag in ("--results", "--doc", "--img"):
        paths = {"--results": str(tmp_path / "r"), "--doc": str(tmp_path / "d" / "e.md"),
                 "--img": str(tmp_path / "i")}
        paths[flag] = bad if flag != "--doc" else bad + "/e.md"
        argv = ["experiment", "table", "--quick"] + [x for kv in paths.items() for x in kv]
        assert cli_main(argv) == 1
        err = capsys.readouterr().err
        assert f"error: {flag} {bad}: cannot write the" in err and "there" in err


def test_a_run_larger_than_the_free_memory_is_refused_up_front(monkeypatch) -> None:
    """A scale audit: the guard compared with the machine's total memory, so a run that fit the
    total but not what was free passed it and was killed 19 s later."""
    from rasp_compiler.errors import UserError
    from rasp_compiler.experiments import train as train_module
    from rasp_compiler.experiments.train import RunConfig, estimated_bytes, validate

    cfg = RunConfig(task="dyck1", backbone="trained", arch="attn-res-ln-mlp", width=16, layers=1)
    need = estimated_bytes(cfg)
    monkeypatch.setattr(train_module, "available_memory", lambda: need - 1)
    with pytest.raises(UserError, match=r"GiB free now"):
        validate(cfg)
    monkeypatch.setattr(train_module, "available_memory", lambda: need + 1)
    validate(cfg)


def test_the_accuracy_plot_of_one_result_fits_its_legend_and_labels(tmp_path):
    # `rasp experiment table --quick --only dyck1_random` drew a 2.8-inch figure: matplotlib warned
    # "Tight layout not applied" on stderr and the saved image lost its legend and x label
    import warnings

    from rasp_compiler.experiments import report

    res = tmp_path / "results"
    res.mkdir()
    result = {"task": "dyck1", "k": None, "backbone": "random", "arch": "attn", "seed": 0,
              "width": 32, "steps": 400, "test_accuracy": 0.806641, "majority_baseline": 0.541992,
              "trainable_params": 2146, "frozen_params": 8192, "seconds": 8.41}
    (res / "dyck1_random_attn_w32_L2_H4_s400_b64_lr0.01_seed0.json").write_text(json.dumps(result))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report.write_report(res, tmp_path / "e.md", tmp_path / "img", quick=True)
    assert (tmp_path / "img" / "experiments_quick_accuracy.png").is_file()


@pytest.mark.parametrize("quick,expected", [(True, "runs/experiments-quick/checkpoints"),
                                            (False, "runs/experiments")])
def test_table_keeps_the_quick_grids_checkpoints_with_its_other_files(quick, expected, tmp_path,
                                                                      monkeypatch):
    # --quick's help says its grid is written to runs/experiments-quick/, but the checkpoints went
    # to runs/experiments/NAME beside the full grid's
    from rasp_compiler.experiments import grid

    seen = []
    monkeypatch.setattr(grid, "run_grid", lambda *a, **k: seen.append(k["checkpoints"]) or [])
    monkeypatch.setattr("rasp_compiler.experiments.report.write_report", lambda *a, **k: None)
    monkeypatch.chdir(tmp_path)
    args = ["experiment", "table", "--only", "dyck1_random", "--results", "r", "--doc", "e.md",
            "--img", "img"]
    assert cli_main(args + (["--quick"] if quick else [])) == 0
    assert cli_main(args + ["--checkpoints", "mine"]) == 0
    assert seen == [expected, "mine"]


def test_the_quick_grids_page_gives_the_quick_settings_and_commands(tmp_path):
    # `rasp experiment table --quick` wrote "dyck1: width 64, ..., steps 6000" under Settings and the
    # full grid's commands (no --quick, hours-long runs) for runs of width 32 and 400 steps
    from rasp_compiler.experiments import grid, report

    res = tmp_path / "results"
    quick = [c for c in grid.quick_grid() if c.backbone == "random"]
    _write_results(res, [(c, 0.8) for c in quick])
    report.write_report(res, tmp_path / "e.md", tmp_path / "img", quick=True)
    text = (tmp_path / "e.md").read_text()
    dyck = next(c for c in quick if c.task == "dyck1")
    assert (f"* `dyck1`: width {dyck.width}, layers {dyck.layers}, heads {dyck.heads}, "
            f"steps {dyck.steps}, batch {dyck.batch}") in text
    assert f"--width {dyck.width} --layers {dyck.layers} --heads {dyck.heads} --steps {dyck.steps} " in text
    commands = text.split("## Commands")[1].split("## Every run")[0]
    assert all("--quick" in line for line in commands.splitlines() if "experiment table" in line)
    assert "--construction paths" not in commands and "nice 10" not in text
    report.write_report(res, tmp_path / "full.md", tmp_path / "img")  # the full grid's page is as it was
    full = (tmp_path / "full.md").read_text()
    assert "* `dyck1`: width 64, layers 2, heads 4, steps 6000" in full and "--quick" not in full


def test_the_quick_grids_accuracy_plot_shows_only_what_it_draws():
    # the quick grid's plot was titled "the base grid and the best setting per cell" and its legend
    # listed best settings and floors it never drew; its rows read "(1 seeds)"
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rasp_compiler.experiments import grid
    from rasp_compiler.experiments.report import plots
    from rasp_compiler.experiments.report.results import cell_of, main_cells

    quick = grid.quick_grid()
    cells: dict = {}
    for c in quick:
        cells.setdefault(cell_of(c.name()), []).append(c)
    got = {cell: [{"test_accuracy": 0.8}] for cell in cells}
    fig = plots._accuracy(plt, main_cells(cells, True), got, quick=True)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert ax.get_title() == "Embedding-only training: the quick grid"
    assert not any("floor" in t or "best" in t for t in labels) and len(labels) == 3
    assert all(t.get_text().endswith("(1 seed)") for t in ax.get_yticklabels())
    plt.close(fig)


def test_dry_run_of_a_results_path_that_is_a_file_says_so(tmp_path, capsys):
    # `table --dry-run --results FILE` listed every run as missing ("6 of 6 runs missing")
    (tmp_path / "afile").write_text("")
    assert cli_main(["experiment", "table", "--quick", "--dry-run", "--results",
                     str(tmp_path / "afile")]) == 1
    captured = capsys.readouterr()
    assert f"--results {tmp_path / 'afile'} is a file" in captured.err and captured.out == ""


def test_table_replaces_only_an_earlier_report_without_force(tmp_path, capsys):
    """--doc README.md (or any file that is not a report) was replaced by the report, after the runs."""
    results, img = tmp_path / "results", tmp_path / "img"
    results.mkdir()
    notes = tmp_path / "notes.md"
    notes.write_text("# my notes\n")
    base = ["experiment", "table", "--report-only", "--results", str(results), "--img", str(img)]
    assert cli_main(base + ["--doc", str(notes)]) == 1
    err = capsys.readouterr().err
    assert f"--doc {notes} exists and is not an earlier report of rasp experiment table" in err, err
    assert "--force" in err and notes.read_text() == "# my notes\n" and not img.exists()
    report = tmp_path / "report.md"
    assert cli_main(base + ["--doc", str(report)]) == 0
    assert cli_main(base + ["--doc", str(report)]) == 0  # an earlier report: replaced
    assert cli_main(base + ["--doc", str(notes), "--force"]) == 0
    assert notes.read_text() == report.read_text()
    assert cli_main(base + ["--doc", str(tmp_path)]) == 1
    assert "is a directory, not a file" in capsys.readouterr().err


@pytest.mark.parametrize("construction", [["--construction", "A"], ["--settings", "base"]])
def test_construction_a_records_and_shows_its_one_head(construction, tmp_path, capsys):
    # the base settings' heads=4 was printed (H=4) and written to config.json for a one-head backbone
    rc = cli_main(["experiment", "dyck1", "--backbone", "sparse", *construction, "--width", "10",
                   "--steps", "2", "--batch", "4", "--out", str(tmp_path / "a"), "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0 and " L=2 H=1 " in out, out
    meta = json.loads((tmp_path / "a" / "config.json").read_text())
    assert meta["run"]["heads"] == 1 and meta["model"]["heads"] == 1
    from safetensors import safe_open
    with safe_open(str(tmp_path / "a" / "model.safetensors"), "pt") as f:
        # stored concatenated over heads, (m, H * d): one head of d = 10 // (2L + 1) = 2 columns
        assert f.get_slice("layers.0.wq").get_shape() == [10, 2]


def test_table_report_at_a_link_replaces_the_link_not_the_file_it_names(tmp_path, capsys):
    # --doc was written with write_text: through a link there (its check skips links), so the file
    # the link named was replaced by the report
    results, img = tmp_path / "results", tmp_path / "img"
    results.mkdir()
    notes = tmp_path / "notes.md"
    notes.write_text("# my notes\n")
    doc = tmp_path / "report.md"
    doc.symlink_to(notes)
    assert cli_main(["experiment", "table", "--report-only", "--results", str(results), "--img", str(img),
                     "--doc", str(doc)]) == 0
    assert notes.read_text() == "# my notes\n"
    assert not doc.is_symlink() and "rasp experiment table" in doc.read_text()
    assert not [p for p in tmp_path.rglob(".*tmp*")]   # no temporary left
