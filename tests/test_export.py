"""TransformerLens export: the TL model computes what the compiled model computes."""

from __future__ import annotations

import glob
import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from rasp_compiler.cli import main as cli
from rasp_compiler.compiler import compile_program
from rasp_compiler.errors import CompileError, UserError
from rasp_compiler.export.transformer_lens import (
    UnsupportedUnitError,
    _import_tl,
    load_transformer_lens,
    metadata,
    resid_hook_names,
    run_padded,
    save_transformer_lens,
    tl_config,
    tl_state_dict,
    to_hooked_transformer,
    verify,
)
from rasp_compiler.lang import load_program
from rasp_compiler.runtime import RaspModel

ROOT = Path(__file__).resolve().parents[1]

# TransformerLens is an optional extra; without it only the "missing TransformerLens" test runs.
requires_tl = pytest.mark.skipif(importlib.util.find_spec("transformer_lens") is None,
                                 reason="the optional extra: pip install -e .[lens]")

# softmax.rasp is numerical (exp, division) and its value sets are too large to compile at any
# vocabulary here; it is not one of the categorical programs the export bar is about.
SKIP = {"/programs/softmax.rasp"}
SHIPPED = glob.glob(str(ROOT / "programs/*.rasp")) + glob.glob(str(ROOT / "programs/tracr/*.rasp"))
PROGRAMS = sorted(p for p in SHIPPED if not p.endswith(tuple(SKIP)))
VOCABS = ["abc()", [1, 2, 3, 4], [0.5, 1.0, 2.0]]
MAX_LEN = 6


def compile_any(path: str, max_len: int = MAX_LEN, **options):
    """The program compiled with the first vocabulary it accepts (None if none)."""
    program = load_program(path)
    for vocab in VOCABS:
        try:
            return compile_program(program, vocab, max_len, **options)
        except CompileError:
            continue
    return None


@pytest.fixture(scope="module")
def compiled() -> dict[str, RaspModel]:
    models = {}
    for path in PROGRAMS:
        model = compile_any(path)
        if model is not None:
            models[path] = model
    return models


@requires_tl
def test_most_shipped_programs_compile(compiled) -> None:
    categorical = [p for p, m in compiled.items() if m.config["output"]["encoding"] == "categorical"]
    assert len(categorical) >= 15, sorted(compiled)


@requires_tl
def test_round_trip_every_shipped_program(compiled) -> None:
    """max |Δ logits| <= 1e-5 in float32 for every shipped program that compiles (categorical ones
    are the bar; numerical ones are held to it too), and every residual hook point agrees."""
    worst = {}
    for path, model in compiled.items():
        report = verify(model, inputs=16, seed=1)
        assert report["inputs"] == 16
        assert set(report["hooks"]) == set(resid_hook_names(max(1, len(model.config["layers"]))))
        assert report["max_abs_diff_pattern"] <= 1e-5, path
        worst[path] = report["max_abs_diff"]
    assert max(worst.values()) <= 1e-5, {p: d for p, d in worst.items() if d > 1e-5}


@requires_tl
def test_hook_points_match_the_weights_by_hand() -> None:
    """Independent of verify(): the TL residual before block 0 is token + position embedding, and the
    logits of a reversed input decode to the reversal."""
    model = compile_program(load_program(ROOT / "programs/reverse.rasp"), "abc", 8)
    tl = to_hooked_transformer(model)
    ids, lengths = model.encode(["abcab"])
    _, cache = tl.run_with_cache(ids, attention_mask=torch.ones_like(ids))
    expected = model.tensors["embed.token"][ids[0]] + model.tensors["embed.pos"][: ids.shape[1]]
    assert torch.equal(cache["blocks.0.hook_resid_pre"][0], expected)
    logits = tl(ids, attention_mask=torch.ones_like(ids))
    values = model.config["output"]["values"]
    assert [values[i] for i in logits[0, 1:].argmax(-1).tolist()] == list("bacba")
    pattern = cache[f"blocks.{model.config['n_layers'] - 1}.attn.hook_pattern"][0, 0]
    assert torch.allclose(pattern.sum(-1), torch.ones(ids.shape[1]))


@requires_tl
def test_padded_batch_equals_one_at_a_time() -> None:
    model = compile_program(load_program(ROOT / "programs/sort.rasp"), "abc", 8)
    tl = to_hooked_transformer(model)
    batch = ["cab", "abcabcab", "b", "ccba"]
    ids, lengths = model.encode(batch)
    mask = (torch.arange(ids.shape[1]).unsqueeze(0) <= lengths.unsqueeze(1)).long()
    together = tl(ids, attention_mask=mask)
    for r, text in enumerate(batch):
        one_ids, _ = model.encode([text])
        alone = tl(one_ids, attention_mask=torch.ones_like(one_ids))
        n = len(text) + 1
        assert torch.allclose(together[r, :n], alone[0], atol=1e-6)


@requires_tl
def test_causal_model_exports_causal() -> None:
    model = compile_program(load_program(ROOT / "programs/tracr/frac_prevs.rasp"), "abc", 8, causal=True)
    assert tl_config(model)["attention_dir"] == "causal"
    assert verify(model, inputs=16)["max_abs_diff"] <= 1e-5
    bidirectional = compile_program(load_program(ROOT / "programs/reverse.rasp"), "abc", 8)
    assert tl_config(bidirectional)["attention_dir"] == "bidirectional"


@requires_tl
def test_layers_with_different_head_sizes_keep_their_scale(compiled) -> None:
    """TL divides every layer by one attn_scale; a layer with a smaller d_head gets W_Q rescaled."""
    mixed = [m for m in compiled.values()
             if len({lc["d_head"] for lc in m.config["layers"] if lc["n_heads"]}) > 1]
    assert mixed, "no shipped program has layers with different head sizes"
    model = mixed[0]
    sd = tl_state_dict(model)
    cfg = tl_config(model)
    for li, lc in enumerate(model.config["layers"]):
        if lc["n_heads"] and lc["d_head"] < cfg["d_head"]:
            ratio = sd[f"blocks.{li}.attn.W_Q"][: lc["n_heads"], :, : lc["d_head"]] / model.tensors[
                f"layers.{li}.attn.W_Q"]
            finite = ratio[torch.isfinite(ratio)]
            assert torch.allclose(finite, torch.full_like(finite, (cfg["d_head"] / lc["d_head"]) ** 0.5))
    assert verify(model, inputs=16)["max_abs_diff"] <= 1e-5


def _with_extra(model: RaspModel, tensors: dict | None = None, layer_cfg: dict | None = None) -> RaspModel:
    config = json.loads(json.dumps(model.config))
    if layer_cfg:
        config["layers"][0].update(layer_cfg)
    return RaspModel(config, {**model.tensors, **(tensors or {})})


def test_unsupported_unit_names_the_unit_and_the_line() -> None:
    model = compile_program(load_program(ROOT / "programs/sort.rasp"), "abc", 6)
    d, m = model.config["d_model"], max(1, model.config["layers"][0]["d_mlp"])
    gated = _with_extra(model, {"layers.0.mlp.W_gate": torch.zeros(d, m)})
    with pytest.raises(UnsupportedUnitError) as err:
        to_hooked_transformer(gated)
    text = err.value.render()
    assert "layer 0" in text and "W_gate" in text and "gated/bilinear" in text
    plan_mlp = model.config["plan"][0]["mlp"]
    if plan_mlp and any(op.get("source") for op in plan_mlp["ops"]):
        assert "needed by" in text and "programs/sort.rasp:" in text
    gelu = _with_extra(model, layer_cfg={"mlp_activation": "gelu"})
    with pytest.raises(UnsupportedUnitError, match="activation 'gelu'"):
        tl_state_dict(gelu)


def test_unsupported_unit_error_quotes_the_program_line() -> None:
    model = compile_program(load_program(ROOT / "programs/reverse.rasp"), "abc", 6)
    layer = next(i for i, lp in enumerate(model.config["plan"]) if lp["heads"])
    bad = _with_extra(model, {f"layers.{layer}.attn.b_Q": torch.zeros(1)})
    with pytest.raises(UnsupportedUnitError) as err:
        tl_state_dict(bad)
    assert "programs/reverse.rasp:" in err.value.render()
    head = model.config["plan"][layer]["heads"][0]
    assert (head["text"] or head["node"]) in err.value.render()


def test_missing_transformer_lens_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "transformer_lens", None)
    with pytest.raises(UserError) as err:
        _import_tl()
    assert ".[lens]" in err.value.render()


@requires_tl
def test_cli_export_verify_json(tmp_path, capsys) -> None:
    out = tmp_path / "model"
    sort = str(ROOT / "programs/sort.rasp")
    assert cli(["compile", sort, "--vocab", "abc", "--max-len", "6", "-o", str(out)]) == 0
    capsys.readouterr()
    pt = tmp_path / "tl" / "model_tl.pt"
    code = cli(["export", str(out), "--format", "transformer-lens", "-o", str(pt), "--verify",
                "--inputs", "20", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["inputs"] == 20 and report["max_abs_diff"] <= 1e-5
    # the files load the documented way: plain tensors, weights_only=True, cfg from the JSON
    sd = torch.load(pt, weights_only=True)
    doc = json.loads((tmp_path / "tl" / "model_tl.json").read_text())
    assert doc["cfg"]["normalization_type"] is None and doc["cfg"]["act_fn"] == "relu"
    assert set(report["hooks"]) == set(resid_hook_names(doc["cfg"]["n_layers"]))
    assert sd["embed.W_E"].shape == (doc["cfg"]["d_vocab"], doc["cfg"]["d_model"])
    try:  # TransformerLens 2.x/3.x: the documented recipe, strict state-dict load
        from transformer_lens import HookedTransformer, HookedTransformerConfig
    except ImportError:  # TransformerLens 4.x: the loader handles its bridge
        tl, _ = load_transformer_lens(str(pt))
    else:
        tl = HookedTransformer(HookedTransformerConfig(**doc["cfg"]))
        tl.load_state_dict(sd, strict=True)
    ids = torch.tensor([[doc["bos_id"]] + [doc["token_ids"][t] for t in "cab"]])
    logits = tl(ids, attention_mask=torch.ones_like(ids))
    assert [doc["output"]["values"][i] for i in logits[0, 1:].argmax(-1).tolist()] == list("abc")


@requires_tl
def test_the_exported_recipe_runs_as_written_on_the_installed_transformer_lens(tmp_path, monkeypatch) -> None:
    """The JSON's ``how_to_load`` lines, run in order: they mixed TransformerLens 2.x and 4.x
    (the 4.x imports fail on 2.x, the 2.x ones on 4.x), so the recipe ran on no version."""
    from rasp_compiler.export.transformer_lens import save_transformer_lens, transformer_lens_version

    model = compile_program(load_program(str(ROOT / "programs/sort.rasp")), "abc", 6, dtype="float64")
    save_transformer_lens(model, str(tmp_path / "model_tl.pt"))
    doc = json.loads((tmp_path / "model_tl.json").read_text())
    stated = doc["how_to_load"][0]
    assert stated.startswith("# TransformerLens 2.x") and "4.x" not in " ".join(doc["how_to_load"])
    assert transformer_lens_version().startswith("2."), "the recipe states 2.x: update it with the extra"
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec("\n".join(line for line in doc["how_to_load"] if not line.startswith("#")), scope)
    text = "cab"
    ids = [doc["bos_id"]] + [doc["token_ids"][t] for t in text]  # as the recipe's comment says
    logits = scope["model"](torch.tensor([ids]))
    assert logits.dtype == torch.float64
    assert [doc["output"]["values"][i] for i in logits[0, 1:].argmax(-1).tolist()] == model.run([text])[0]


def test_cli_export_errors(tmp_path, capsys) -> None:
    assert cli(["export", str(ROOT / "programs/sort.rasp"), "-o", str(tmp_path / "x.pt")]) == 1
    assert "compile it first" in capsys.readouterr().err
    assert cli(["export", str(tmp_path / "missing"), "-o", str(tmp_path / "x.pt")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_cli_export_into_a_file_says_it_is_a_file(tmp_path, capsys) -> None:
    # os.makedirs said only "File exists" (or "Not a directory"), not which path is the file
    out = tmp_path / "model"
    assert cli(["compile", str(ROOT / "programs/reverse.rasp"), "--vocab", "ab", "--max-len", "4",
                "-o", str(out)]) == 0
    (tmp_path / "afile").write_text("")
    for target in ("afile/x.pt", "afile/sub/x.pt"):
        capsys.readouterr()
        assert cli(["export", str(out), "--format", "transformer-lens", "-o", str(tmp_path / target)]) == 1
        err = capsys.readouterr().err
        assert f"{tmp_path / 'afile'} is a file, not a directory" in err, err
        assert err.count("error:") == 1 and "File exists" not in err


@requires_tl
def test_float64_model_exports_float64() -> None:
    model = compile_program(load_program(ROOT / "programs/histogram.rasp"), "abc", 6, dtype="float64")
    tl = to_hooked_transformer(model)
    assert next(tl.parameters()).dtype == torch.float64
    assert verify(model, tl, inputs=12)["max_abs_diff"] <= 1e-12


def test_state_dict_is_hooked_transformer_layout() -> None:
    model = compile_program(load_program(ROOT / "programs/reverse.rasp"), "abc", 6)
    sd, cfg = tl_state_dict(model), tl_config(model)
    h, d, dh = cfg["n_heads"], cfg["d_model"], cfg["d_head"]
    for li in range(cfg["n_layers"]):
        assert sd[f"blocks.{li}.attn.W_Q"].shape == (h, d, dh)
        assert sd[f"blocks.{li}.attn.W_O"].shape == (h, dh, d)
        assert sd[f"blocks.{li}.mlp.W_in"].shape == (d, cfg["d_mlp"])
    assert sd["unembed.W_U"].shape == (d, cfg["d_vocab_out"])


@requires_tl
def test_padded_batch_of_a_bidirectional_model_matches_with_run_padded() -> None:
    """reverse reads `length`: a head that also attends to PAD keys (TransformerLens 2.x/3.x ignore
    attention_mask in bidirectional models) gets the length wrong.  run_padded masks PAD keys."""
    from rasp_compiler.export.transformer_lens import run_padded

    model = compile_program(load_program(ROOT / "programs/reverse.rasp"), "abc", 8)
    tl = to_hooked_transformer(model)
    batch = ["cab", "abcabcab", "b", "ccba"]
    ids, lengths = model.encode(batch)
    mask = (torch.arange(ids.shape[1]).unsqueeze(0) <= lengths.unsqueeze(1)).long()
    together, _ = run_padded(tl, ids, mask)
    values = model.config["output"]["values"]
    for r, text in enumerate(batch):
        n = len(text) + 1
        assert [values[i] for i in together[r, 1:n].argmax(-1).tolist()] == list(reversed(text))
    with torch.no_grad():
        ours = model.module(ids, lengths)
    ours = ours[0] if isinstance(ours, tuple) else ours
    real = mask.bool().clone()
    real[:, 0] = False
    assert float((together - ours).abs()[real].max()) <= 1e-5


def test_to_hooked_transformer_sends_padded_batches_to_run_padded() -> None:
    """Its docstring once said to pass attention_mask, which TransformerLens 2.x/3.x ignores in a
    bidirectional model: ["abc", "a"] then had a logit 10.0 off at the "a"."""
    doc = " ".join(to_hooked_transformer.__doc__.split())
    assert "run_padded(tl_model, ids, attention_mask)" in doc
    assert "for padded batches, ``attention_mask``" not in doc
    if importlib.util.find_spec("transformer_lens") is None or _import_tl()[0] != "hooked":
        return
    model = compile_program(load_program(ROOT / "programs/reverse.rasp"), "abc", 5)
    tl = to_hooked_transformer(model)
    ids, lengths = model.encode(["abc", "a"])
    mask = (torch.arange(ids.shape[1]).unsqueeze(0) <= lengths.unsqueeze(1)).long()
    with torch.no_grad():
        wrong = tl(ids, attention_mask=mask)
    assert float((wrong[1, 1] - run_padded(tl, ids, mask)[0][1, 1]).abs().max()) > 1.0


@requires_tl
def test_verify_checks_mixed_lengths_in_one_batch(monkeypatch) -> None:
    """verify's batches mix lengths (as a user's would): reverse agrees with PAD keys masked, and
    where TransformerLens ignores attention_mask (2.x/3.x, bidirectional) it would not without."""
    import rasp_compiler.export.transformer_lens as tlmod

    model = compile_program(load_program(ROOT / "programs/reverse.rasp"), "abc", 8)
    batch = ["cab", "abcabcab", "b"]
    assert verify(model, inputs=batch, batch_size=3)["max_abs_diff_logits"] <= 1e-5
    if _import_tl()[0] == "hooked":
        monkeypatch.setattr(tlmod, "padding_hooks", lambda n_layers, mask: [])
        assert verify(model, inputs=batch, batch_size=3)["max_abs_diff_logits"] > 1.0


@requires_tl
def test_cli_verify_fails_when_the_models_differ(tmp_path, capsys, monkeypatch) -> None:
    import rasp_compiler.export.transformer_lens as tlmod

    out = tmp_path / "model"
    assert cli(["compile", str(ROOT / "programs/reverse.rasp"), "--vocab", "abc", "--max-len", "6",
                "-o", str(out)]) == 0
    original = tlmod.load_transformer_lens

    def tampered(path: str):  # a head's output weights lost, as a wrong conversion would lose them
        tl, doc = original(path)
        with torch.no_grad():
            tl.blocks[1].attn.W_O.mul_(0.5)
        return tl, doc

    monkeypatch.setattr(tlmod, "load_transformer_lens", tampered)
    capsys.readouterr()
    assert cli(["export", str(out), "-o", str(tmp_path / "tl.pt"), "--verify", "--inputs", "8"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the TransformerLens model differs") and "Traceback" not in err
    assert err.count("error:") == 1


def test_cli_verify_judges_rounding_against_the_values_in_play(tmp_path, capsys) -> None:
    """reverse at max_len 512 failed --verify by 5.2e-4 against 1e-4: its MLP writes the number
    length - index - 1 (up to 511) in float32 in another summation order than TransformerLens's.
    At 128 the difference is 1.8e-4 on an Intel Xeon (the size of the rounding depends on the
    CPU), while the largest values there are over 100."""
    out = tmp_path / "model"
    assert cli(["compile", str(ROOT / "programs/reverse.rasp"), "--vocab", "abc", "--max-len", "128",
                "-o", str(out)]) == 0
    capsys.readouterr()
    assert cli(["export", str(out), "-o", str(tmp_path / "tl.pt"), "--verify", "--inputs", "8",
                "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["max_rel_diff"] <= min(1e-5, report["max_abs_diff_residual"] / 100), report
    assert report["ok"] and report["max_abs_diff_logits"] <= 1e-5 and report["max_abs_diff_pattern"] <= 1e-5


def test_cli_export_refuses_to_overwrite_the_model_config(tmp_path, capsys) -> None:
    out = tmp_path / "model"
    assert cli(["compile", str(ROOT / "programs/sort.rasp"), "--vocab", "abc", "--max-len", "4",
                "-o", str(out)]) == 0
    before = (out / "config.json").read_bytes()
    capsys.readouterr()
    assert cli(["export", str(out), "-o", str(out / "config.pt")]) == 1
    assert "overwrite" in capsys.readouterr().err
    assert (out / "config.json").read_bytes() == before and not (out / "config.pt").exists()


def test_real_valued_input_model_is_refused_by_name(tmp_path, capsys) -> None:
    out = tmp_path / "model"
    assert cli(["compile", str(ROOT / "programs/maxmin.rasp"), "--input-range", "-1", "1",
                "-o", str(out)]) == 0
    capsys.readouterr()
    assert cli(["export", str(out), "-o", str(tmp_path / "mm.pt")]) == 1
    err = capsys.readouterr().err
    assert "real-valued tokens" in err and "--input-range" in err and err.count("error:") == 1
    assert not (tmp_path / "mm.pt").exists()


@requires_tl
def test_load_of_a_tampered_export_is_one_artifact_error(tmp_path) -> None:
    from rasp_compiler.errors import ArtifactError
    from rasp_compiler.export.transformer_lens import save_transformer_lens

    model = compile_program(load_program(ROOT / "programs/sort.rasp"), "abc", 4)
    pt, js = save_transformer_lens(model, str(tmp_path / "tl.pt"))
    doc = json.loads(Path(js).read_text())
    doc["cfg"]["d_model"] += 1  # the weights no longer fit the config
    Path(js).write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="do not make a TransformerLens model"):
        load_transformer_lens(pt)
    doc["cfg"]["bogus_option"] = 1
    Path(js).write_text(json.dumps(doc))
    with pytest.raises(ArtifactError):
        load_transformer_lens(pt)


def test_metadata_token_ids_keep_apart_tokens_that_print_alike() -> None:
    """JSON keys are strings: the token "1" and the token 1 were both "1", one id lost."""
    from rasp_compiler.pyapi import Map, tokens
    from rasp_compiler.pyapi import compile_program as compile_sop

    model = compile_sop(Map(lambda x: type(x).__name__, tokens), vocab=["1", 1, "a"], max_len=3)
    ids = metadata(model)["token_ids"]
    assert sorted(ids.values()) == [0, 1, 2] and ids["a"] == model.config["vocab"].index("a")
    assert model.config["vocab"][ids["'1'"]] == "1" and model.config["vocab"][ids["1"]] == 1


@pytest.mark.parametrize("given, got", [(None, "got None"), ("program", "got a Program")])
def test_export_functions_given_no_compiled_model_say_what_to_pass(given, got) -> None:
    """Audit: to_hooked_transformer(load_program(...)) or (None) raised AttributeError 'config'."""
    if given == "program":
        given = load_program(ROOT / "programs/reverse.rasp")
    for fn in (to_hooked_transformer, tl_config, tl_state_dict, verify):
        with pytest.raises(UserError, match=rf"^{fn.__name__} takes a compiled model "
                                            rf"\(compile_program\(\.\.\.\)\), {got}"):
            fn(given)


@requires_tl
def test_to_hooked_transformer_takes_tracrs_assembled_model() -> None:
    """First use: to_hooked_transformer(compile_rasp_to_model(...)) was refused ("takes a compiled
    model ..., got an AssembledModel"), though tracr's entry point returns the compiled model too;
    its input_encoder's ids are the export's, so the exported model reads them as apply does."""
    import warnings

    from rasp_compiler.pyapi import compiling, lib, tokens

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assembled = compiling.compile_rasp_to_model(lib.make_reverse(tokens), {"a", "b"}, 4,
                                                    compiler_bos="BOS")
    tl_model = to_hooked_transformer(assembled)
    given = ["BOS", "a", "a", "b"]
    logits = tl_model(torch.tensor([assembled.input_encoder.encode(given)]))
    decoded = assembled.output_encoder.decode(logits[0, 1:].argmax(-1).tolist())
    assert decoded == assembled.apply(given).decoded[1:] == ["b", "a", "a"]


@requires_tl
def test_run_padded_given_the_wrong_arguments_says_what_to_pass() -> None:
    """Audit: a compiled model for the TL model, ids as a list, or no mask raised AttributeError or
    TransformerLens's tokenizer assertion."""
    model = compile_program(load_program(ROOT / "programs/reverse.rasp"), "abc", 5)
    tl = to_hooked_transformer(model)
    ids, lengths = model.encode(["abc", "a"])
    mask = (torch.arange(ids.shape[1]).unsqueeze(0) <= lengths.unsqueeze(1)).long()
    for args, words in [((model, ids, mask), "takes the TransformerLens model, got a CompiledModel"),
                        ((tl, ids.tolist(), mask), "ids must be a tensor of token ids .*, got a list"),
                        ((tl, ids, None), r"attention_mask must be a tensor of the ids' shape \(2, 4\)"),
                        ((tl, ids, mask[:, :2]), r"attention_mask .* got a tensor of shape \(2, 2\)")]:
        with pytest.raises(UserError, match=f"^run_padded.*{words}"):
            run_padded(*args)


def test_load_transformer_lens_says_which_file_to_pass(tmp_path) -> None:
    """Audit: a model directory read as "does not exist", the .json as torch's weights-only text,
    None as a TypeError."""
    from rasp_compiler.errors import ArtifactError
    from rasp_compiler.export.transformer_lens import save_transformer_lens

    model = compile_program(load_program(ROOT / "programs/reverse.rasp"), "abc", 4)
    model.save(str(tmp_path / "out"))
    pt, js = save_transformer_lens(model, str(tmp_path / "tl.pt"))
    with pytest.raises(ArtifactError, match="is a model directory from rasp compile; pass the .pt written "
                                            "by rasp export"):
        load_transformer_lens(str(tmp_path / "out"))
    with pytest.raises(ArtifactError, match=r"pass the \.pt, not its \.json") as info:
        load_transformer_lens(js)
    assert pt in info.value.hint
    with pytest.raises(UserError, match="load_transformer_lens takes the path of the .pt .*, got None"):
        load_transformer_lens(None)


@requires_tl
def test_verify_batch_follows_free_memory(tmp_path, capsys, monkeypatch) -> None:
    """verify ran 64 inputs at once whatever the size: sort at max_len 512 (about 0.4 GB an
    input) ran out of memory.  It runs as many as fit in half the free memory (the same result),
    and refuses, before TransformerLens builds its copy, a model one input of which does not fit."""
    import rasp_compiler.export.transformer_lens as tlmod

    model = compile_program(load_program(ROOT / "programs/sort.rasp"), "abc", 6)
    per_input = tlmod.verify_bytes_per_input(model.config)
    assert 6 * 7 * 4 < per_input < 10**8
    monkeypatch.setattr(tlmod, "available_memory", lambda: 2 * 3 * per_input + 1)
    assert tlmod.verify_batch(model.config) == 3
    sizes = []
    real_encode = model.encode
    monkeypatch.setattr(model, "encode", lambda chunk: (sizes.append(len(chunk)), real_encode(chunk))[1])
    small = verify(model, inputs=10)
    assert sizes == [3, 3, 3, 1]
    monkeypatch.setattr(tlmod, "available_memory", lambda: None)  # unknown: the batch asked for
    assert verify(model, inputs=10)["max_abs_diff"] == small["max_abs_diff"] <= 1e-5
    assert sizes[4:] == [10]

    monkeypatch.setattr(tlmod, "available_memory", lambda: per_input)  # half of it: not one input
    out = tmp_path / "model"
    assert cli(["compile", str(ROOT / "programs/sort.rasp"), "--vocab", "abc", "--max-len", "6",
                "-o", str(out)]) == 0
    capsys.readouterr()
    monkeypatch.setattr(tlmod, "to_hooked_transformer",
                        lambda m: pytest.fail("TransformerLens was built before the refusal"))
    assert cli(["export", str(out), "-o", str(tmp_path / "tl.pt"), "--verify"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: verifying this model (max length 6, residual width")
    assert "hint: export without --verify" in err and "Traceback" not in err
    assert not (tmp_path / "tl.pt").exists()  # refused before anything was written


@requires_tl
def test_a_fixed_length_export_says_its_one_length(tmp_path, capsys) -> None:
    """A --fixed-length model exported to TransformerLens answers other lengths wrongly (reverse
    compiled for 4 tokens read "abc" as "acb") and the JSON said only max_len 6: nothing told a
    TransformerLens user that 4 is the one length."""
    fixed, free = tmp_path / "fixed", tmp_path / "free"
    rev = str(ROOT / "programs/reverse.rasp")
    assert cli(["compile", rev, "--vocab", "abc", "--max-len", "6", "--fixed-length", "4",
                "-o", str(fixed)]) == 0
    assert cli(["compile", rev, "--vocab", "abc", "--max-len", "6", "-o", str(free)]) == 0
    capsys.readouterr()
    assert cli(["export", str(fixed), "-o", str(tmp_path / "f.pt"), "--verify", "--inputs", "4"]) == 0
    out = capsys.readouterr().out
    assert "inputs of exactly 4 tokens" in out and "4 random inputs of length 4" in out
    assert json.loads((tmp_path / "f.json").read_text())["fixed_length"] == 4
    assert cli(["export", str(free), "-o", str(tmp_path / "g.pt")]) == 0
    assert "exactly" not in capsys.readouterr().out
    assert json.loads((tmp_path / "g.json").read_text())["fixed_length"] is None


@requires_tl
def test_verify_draws_its_random_inputs_one_batch_at_a_time(monkeypatch) -> None:
    """verify drew all K inputs into one list first: `rasp export --verify --inputs 100000000000`
    grew it until memory ran out.  The batches it runs are still random_inputs(model, K, seed),
    in order."""
    import rasp_compiler.export.transformer_lens as tlmod

    model = compile_program(load_program(ROOT / "programs/reverse.rasp"), "abc", 5)
    seen = []
    real_encode = model.encode
    monkeypatch.setattr(model, "encode", lambda chunk: (seen.append(list(chunk)), real_encode(chunk))[1])
    monkeypatch.setattr(tlmod, "random_inputs", lambda *a: pytest.fail("all inputs drawn at once"))
    report = verify(model, inputs=11, seed=7, batch_size=4)
    assert report["inputs"] == 11 and [len(c) for c in seen] == [4, 4, 3]
    monkeypatch.undo()
    assert [x for c in seen for x in c] == tlmod.random_inputs(model, 11, seed=7)
    assert {len(x) for x in seen[0]} == {5, 4, 3, 2}  # lengths cycle from max_len down


@requires_tl
def test_export_replaces_only_an_earlier_export_without_force(tmp_path, capsys) -> None:
    """-o FILE.pt replaced a checkpoint of the user's own, and FILE.json beside it, silently."""
    model = tmp_path / "m"
    assert cli(["compile", str(ROOT / "programs/reverse.rasp"), "--vocab", "abc", "--max-len", "4",
                "-o", str(model)]) == 0
    mine, notes = tmp_path / "ckpt.pt", tmp_path / "ckpt.json"
    mine.write_bytes(b"my checkpoint")
    capsys.readouterr()
    assert cli(["export", str(model), "-o", str(mine)]) == 1
    err = capsys.readouterr().err
    assert f"{mine} exists, and no ckpt.json of an earlier export is beside it; it is not replaced" in err
    assert mine.read_bytes() == b"my checkpoint" and not notes.exists()
    notes.write_text('{"mine": 1}')
    assert cli(["export", str(model), "-o", str(mine)]) == 1
    assert f"{notes} exists and is not the config of an earlier export" in capsys.readouterr().err
    assert notes.read_text() == '{"mine": 1}'
    assert cli(["export", str(model), "-o", str(mine), "--force"]) == 0
    assert cli(["export", str(model), "-o", str(mine)]) == 0  # an earlier export: replaced
    assert json.loads(notes.read_text())["weights"] == "ckpt.pt"
    from rasp_compiler.export.transformer_lens import save_transformer_lens

    (tmp_path / "other.json").write_text("[]")
    with pytest.raises(UserError, match="not the config of an earlier export"):
        save_transformer_lens(str(model), str(tmp_path / "other.pt"))
    assert save_transformer_lens(str(model), str(tmp_path / "other.pt"), force=True)[1].endswith("other.json")


def test_the_same_model_exported_to_two_names_gives_the_same_bytes(tmp_path) -> None:
    # torch.save given a path names the archive's records after the file (".a.pt/data.pkl"), so the
    # bytes depended on -o's name; the JSON differs only in the "weights" file it names
    import zipfile

    model = compile_program(load_program(str(ROOT / "programs/reverse.rasp")), "abc", 4)
    a, a_json = save_transformer_lens(model, str(tmp_path / "a.pt"))
    b, b_json = save_transformer_lens(model, str(tmp_path / "sub" / "other_name.pt"))
    assert Path(a).read_bytes() == Path(b).read_bytes()
    assert all(name.startswith("archive/") for name in zipfile.ZipFile(a).namelist())
    docs = [json.loads(Path(p).read_text()) for p in (a_json, b_json)]
    assert docs[0].pop("weights") == "a.pt" and docs[1].pop("weights") == "other_name.pt"
    assert docs[0] == docs[1]
    assert torch.load(a, weights_only=True).keys() == tl_state_dict(model).keys()
