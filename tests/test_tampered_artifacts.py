"""Saved models edited with both hashes recomputed: `RaspModel.load` checks config.json against the
schema the compiler writes and every tensor against the config (names, shapes, dtypes, finite values),
so each edit is one clean ArtifactError naming the field or tensor, never a traceback at run time or
a silently different answer.  Also: non-finite outputs are refused at decode, and every kind of model
the compiler writes still loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from rasp_compiler.cli import main
from rasp_compiler.compiler import compile_program
from rasp_compiler.errors import ArtifactError, InputError
from rasp_compiler.lang import load_program
from rasp_compiler.lang.elaborator import program_from_source
from rasp_compiler.runtime import (
    ModelArtifactError,
    ModelOutputError,
    RaspModel,
    config_digest,
    weights_digest,
)

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parent.parent
Edit = Callable[[dict, dict], Any]


def tamper(src: Path, dst: Path, edit: Edit) -> Path:
    """Copy the model in ``src`` to ``dst`` with ``edit(config, tensors)`` applied, and both hashes
    recomputed the way ``RaspModel.save`` writes them, so that only the new checks can object."""
    config = json.loads((src / "config.json").read_text())
    with safe_open(str(src / "model.safetensors"), framework="pt") as fh:
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    edit(config, tensors)
    config.pop("weights_sha256", None)
    config["weights_sha256"] = weights_digest(tensors)
    dst.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(dst / "model.safetensors"),
              metadata={"config_sha256": config_digest(config)})
    (dst / "config.json").write_text(json.dumps(config, indent=1, sort_keys=True))
    return dst


@pytest.fixture(scope="module")
def categorical(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """reverse over abc: layer 0 has a head and an MLP, layer 1 a head and no MLP."""
    out = tmp_path_factory.mktemp("models") / "reverse"
    model = compile_program(load_program(str(ROOT / "programs" / "reverse.rasp")), list("abc"), 6)
    assert [(lc["n_heads"], bool(lc["d_mlp"])) for lc in model.config["layers"]] == [(1, True), (1, False)]
    model.save(str(out))
    return out


@pytest.fixture(scope="module")
def numerical(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """maxmin over real numbers in [-1, 1], 4 of them: an embed.value and a gated MLP."""
    out = tmp_path_factory.mktemp("models") / "maxmin"
    model = compile_program(load_program(str(ROOT / "programs" / "maxmin.rasp")), None, 4, fixed_length=4,
                            input_range=(-1.0, 1.0))
    assert "layers.0.mlp.W_gate" in model.tensors and model.config["input"]["kind"] == "numerical"
    model.save(str(out))
    return out


def _set(path: str, value: Any) -> Edit:
    """An edit that sets config[path] (dotted, list indices as numbers) to ``value``."""
    def edit(c: dict, t: dict) -> None:
        *head, last = path.split(".")
        for key in head:
            c = c[int(key)] if isinstance(c, list) else c[key]
        c[int(last) if isinstance(c, list) else last] = value
    return edit


def _del(path: str) -> Edit:
    def edit(c: dict, t: dict) -> None:
        *head, last = path.split(".")
        for key in head:
            c = c[int(key)] if isinstance(c, list) else c[key]
        del c[last]
    return edit


def _tensor(name: str, fn: Callable[[torch.Tensor], torch.Tensor | None]) -> Edit:
    """Replace (or, when ``fn`` returns None, delete) one tensor."""
    def edit(c: dict, t: dict) -> None:
        new = fn(t[name]) if name in t else fn(None)  # type: ignore[arg-type]
        if new is None:
            del t[name]
        else:
            t[name] = new
    return edit


def _all_tensors(dtype: torch.dtype) -> Edit:
    def edit(c: dict, t: dict) -> None:
        t.update({k: v.to(dtype) for k, v in t.items()})
    return edit


def _nan(x: torch.Tensor) -> torch.Tensor:
    x = x.clone()
    x[..., 0] = float("nan")
    return x


def _inf(x: torch.Tensor) -> torch.Tensor:
    x = x.clone()
    x.view(-1)[0] = float("inf")
    return x


# (id, edit, what the message must say): one case per kind of edit the audit tried on reverse
CATEGORICAL = [
    # tensors: missing, extra, shape, dtype, values
    ("drop_tensor", _tensor("layers.1.attn.W_V", lambda x: None), r"has no tensor layers\.1\.attn\.W_V"),
    ("drop_unembed_b", _tensor("unembed.b_U", lambda x: None), r"has no tensor unembed\.b_U"),
    ("extra_tensor", _tensor("evil.x", lambda x: torch.zeros(3)), r"holds a tensor evil\.x"),
    ("extra_layer_tensor", _tensor("layers.5.mlp.W_in", lambda x: torch.zeros(16, 3)),
     r"n_layers is 2 but .* holds layers\.5\.mlp\.W_in"),
    ("gate_on_categorical", _tensor("layers.0.mlp.W_gate", lambda x: torch.zeros(16, 11)),
     r"layers\.0\.mlp\.W_gate.*numerical-input"),
    ("value_on_categorical", _tensor("embed.value", lambda x: torch.zeros(16)), r"embed\.value"),
    ("shape_W_U_columns", _tensor("unembed.W_U", lambda x: torch.zeros(16, 5)),
     r"len\(output\.values\) is 3 but unembed\.W_U .* has 5"),
    ("shape_W_U_rows", _tensor("unembed.W_U", lambda x: torch.zeros(15, 3)),
     r"d_model is 16 but unembed\.W_U"),
    ("shape_embed_pos", _tensor("embed.pos", lambda x: x[:3]), r"max_len \+ 1 .* is 7 but embed\.pos"),
    ("shape_embed_token", _tensor("embed.token", lambda x: x[:2]), r"len\(vocab\) \+ 2 .* embed\.token"),
    ("shape_rank", _tensor("unembed.b_U", lambda x: x[None]), r"unembed\.b_U has shape \[1, 3\]"),
    ("dtype_int32", _tensor("unembed.W_U", lambda x: x.to(torch.int32)), r"unembed\.W_U is int32 but"),
    ("dtype_float16", _tensor("unembed.W_U", lambda x: x.half()), r"unembed\.W_U is float16 but"),
    ("dtype_bool", _tensor("unembed.b_U", lambda x: x.bool()), r"unembed\.b_U is bool but"),
    ("dtype_all_float64", _all_tensors(torch.float64), r"is float64 but .* says float32"),
    ("dtype_all_bfloat16", _all_tensors(torch.bfloat16), r"is bfloat16 but"),
    ("dtype_all_int64", _all_tensors(torch.int64), r"is int64 but"),
    ("nan_weights", _tensor("unembed.W_U", _nan), r"unembed\.W_U holds 16 non-finite values"),
    ("inf_weight", _tensor("layers.0.mlp.W_in", _inf), r"layers\.0\.mlp\.W_in holds 1 non-finite value"),
    ("nan_bias", _tensor("unembed.b_U", lambda x: torch.full_like(x, float("nan"))),
     r"unembed\.b_U .*non-finite"),
    # layers
    ("n_layers_3", _set("n_layers", 3), r"n_layers is 3 but layers lists 2"),
    ("layers_fewer", lambda c, t: c.update(layers=c["layers"][:1]), r"n_layers is 2 but layers lists 1"),
    ("layers_not_list", _set("layers", {"0": 1}), r"layers must be a list"),
    ("layers_null", _set("layers", None), r"layers must be a list"),
    ("n_heads_2", _set("layers.0.n_heads", 2), r"layers\[0\]\.n_heads is 2 but layers\.0\.attn\.W_Q"),
    ("n_heads_0", _set("layers.0.n_heads", 0), r"layers\[0\]\.n_heads is 0 but .* holds layers\.0\.attn"),
    ("n_heads_str", _set("layers.0.n_heads", "1"), r"layers\[0\]\.n_heads must be an integer"),
    ("d_head_str", _set("layers.0.d_head", "2"), r"layers\[0\]\.d_head must be an integer"),
    ("d_head_zero", _set("layers.0.d_head", 0), r"layers\[0\]\.d_head is 0 but the layer has 1 heads"),
    ("d_head_negative", _set("layers.0.d_head", -4), r"layers\[0\]\.d_head must be an integer >= 0"),
    ("d_head_bigger", _set("layers.0.d_head", 3), r"layers\[0\]\.d_head is 3 but layers\.0\.attn\.W_Q"),
    ("d_mlp_zero", _set("layers.0.d_mlp", 0), r"layers\[0\]\.d_mlp is 0 but .* holds layers\.0\.mlp\.W_in"),
    ("d_mlp_str", _set("layers.0.d_mlp", "x"), r"layers\[0\]\.d_mlp must be an integer"),
    ("d_mlp_negative", _set("layers.0.d_mlp", -1), r"layers\[0\]\.d_mlp must be an integer"),
    ("d_mlp_huge", _set("layers.0.d_mlp", 10 ** 30),
     r"layers\[0\]\.d_mlp is 10{30} but layers\.0\.mlp\.W_in"),
    ("d_mlp_float", _set("layers.0.d_mlp", 11.0), r"layers\[0\]\.d_mlp must be an integer"),
    ("layer_missing_key", _del("layers.0.d_head"), r"layers\[0\] has no 'd_head'"),
    ("layer_unknown_key", _set("layers.0.activation", "gelu"),
     r"layers\[0\] has an unknown key 'activation'"),
    # reverse's first MLP has step pairs, so it is stored in float64 (blocks._steps)
    ("mlp_dtype_float32", _set("layers.0.mlp_dtype", "float32"),
     r"layers\.0\.mlp\.W_in is float64 but .* says float32 \(layers\[0\]\.mlp_dtype"),
    ("mlp_dtype_bogus", _set("layers.0.mlp_dtype", "float8"), r"layers\[0\]\.mlp_dtype must be"),
    # sizes
    ("max_len_bigger", _set("max_len", 100), r"max_len \+ 1 .* is 101 but embed\.pos"),
    ("max_len_zero", _set("max_len", 0), r"max_len must be an integer >= 1, not 0"),
    ("max_len_negative", _set("max_len", -1), r"max_len must be an integer >= 1"),
    ("max_len_str", _set("max_len", "six"), r"max_len must be an integer"),
    ("max_len_float", _set("max_len", 6.7), r"max_len must be an integer"),
    ("max_len_bool", _set("max_len", True), r"max_len must be an integer >= 1, not true"),
    ("max_len_huge", _set("max_len", 10 ** 40), r"max_len \+ 1 .* but embed\.pos"),
    ("max_len_missing", _del("max_len"), r"the key 'max_len' is missing"),
    ("d_model_str", _set("d_model", "sixteen"), r"d_model must be an integer"),
    ("d_model_bigger", _set("d_model", 99), r"d_model is 99 but embed\.token"),
    ("d_model_negative", _set("d_model", -1), r"d_model must be an integer >= 1"),
    ("d_model_missing", _del("d_model"), r"the key 'd_model' is missing"),
    ("fixed_length_str", _set("fixed_length", "3"), r"fixed_length must be null or an integer from 1 to"),
    ("fixed_length_zero", _set("fixed_length", 0), r"fixed_length must be"),
    ("fixed_length_past_max_len", _set("fixed_length", 7), r"fixed_length must be .* max_len \(6\)"),
    # vocabulary
    ("vocab_more", _set("vocab", list("abcd")), r"len\(vocab\) \+ 2 .* is 6 but embed\.token"),
    ("vocab_fewer", _set("vocab", list("ab")), r"len\(vocab\) \+ 2 .* is 4 but embed\.token"),
    ("vocab_str", _set("vocab", "abc"), r"vocab must be a non-empty list"),
    ("vocab_int", _set("vocab", 5), r"vocab must be a non-empty list"),
    ("vocab_null", _set("vocab", None), r"vocab must be a non-empty list"),
    ("vocab_repeat", _set("vocab", ["a", "a", "c"]), r"vocab\[1\] repeats the token \"a\""),
    ("vocab_nested", _set("vocab", [["a"], "b", "c"]), r"vocab\[0\] is \[\"a\"\]"),
    ("vocab_reorder", _set("vocab", ["c", "b", "a"]), r"vocab\[0\] is \"c\", but row 0 of embed\.token"),
    ("vocab_missing", _del("vocab"), r"the key 'vocab' is missing"),
    # output
    ("values_reorder", _set("output.values", ["c", "b", "a"]), r"output\.values .* differ from .* 'reverse'"),
    ("values_more", _set("output.values", list("abcd")), r"output\.values"),
    ("values_empty", _set("output.values", []), r"output\.values must be a non-empty list"),
    ("values_str", _set("output.values", "abc"), r"output\.values must be a non-empty list"),
    ("values_repeat", _set("output.values", ["a", "a", "c"]), r"output\.values repeats a value"),
    ("encoding_numerical", _set("output.encoding", "numerical"),
     r"output\.encoding is 'numerical' but output has 'logit_scale'"),
    ("encoding_bogus", _set("output.encoding", "bogus"), r"output\.encoding must be .*not \"bogus\""),
    ("encoding_missing", _del("output.encoding"), r"output\.encoding must be"),
    ("output_missing", _del("output"), r"the key 'output' is missing"),
    ("output_null", _set("output", None), r"output must be a JSON object, not null"),
    ("output_str", _set("output", "x"), r"output must be a JSON object"),
    ("output_unknown_key", _set("output.argmax", True), r"output has an unknown key 'argmax'"),
    ("logit_scale_zero", _set("output.logit_scale", 0), r"output\.logit_scale must be a finite number > 0"),
    ("logit_scale_negative", _set("output.logit_scale", -10), r"output\.logit_scale must be"),
    ("logit_scale_str", _set("output.logit_scale", "ten"), r"output\.logit_scale must be"),
    ("logit_scale_nan", _set("output.logit_scale", float("nan")), r"output\.logit_scale must be .*NaN"),
    ("logit_scale_small", _set("output.logit_scale", 0.01),
     r"output\.logit_scale is 0\.01 but the largest weight of unembed\.W_U"),
    ("undefined_str", _set("output.undefined", {"3": "x"}), r"output\.undefined\['3'\] must map"),
    ("undefined_list", _set("output.undefined", [1]), r"output\.undefined must be an object"),
    ("undefined_length", _set("output.undefined", {"9": ["s", 0]}), r"output\.undefined\['9'\]"),
    # residual labels
    ("residual_out_of_range", _set("residual.0.start", 1000), r"residual\[0\] spans .* past d_model \(16\)"),
    ("residual_negative", _set("residual.0.start", -100), r"residual\[0\]\.start must be an integer"),
    ("residual_str", _set("residual.0.start", "0"), r"residual\[0\]\.start must be an integer"),
    ("residual_overlap", _set("residual.1.start", 0), r"residual\[1\] overlaps residual\[0\] at dimension 0"),
    ("residual_labels", _set("residual.0.labels", ["one", "two"]),
     r"residual\[0\]\.labels must be a list of 1"),
    ("residual_null", _set("residual", None), r"residual must be a list"),
    ("residual_missing", _del("residual"), r"the key 'residual' is missing"),
    # flags and the rest
    ("causal_str", _set("causal", "false"), r"causal must be true or false, not \"false\""),
    ("bos_changed", _set("bos", "a"), r"bos and pad must be"),
    ("pad_changed", _set("pad", "b"), r"bos and pad must be"),
    ("bos_missing", _del("bos"), r"the key 'bos' is missing"),
    ("dtype_config_float16", _set("dtype", "float16"), r"dtype must be \"float32\" or \"float64\""),
    ("attention_scale", _set("attention_scale", "1/d_head"), r"attention_scale must be"),
    ("unknown_key", _set("evil", {"x": 1}), r"the config has an unknown key 'evil'"),
    ("input_on_categorical", _set("input", {"kind": "numerical", "range": [0, 1]}),
     r"numerical-input model has the one token"),
    ("input_bogus", _set("input", {"kind": "bogus"}), r"input\.kind must be \"numerical\""),
    ("input_str", _set("input", "numerical"), r"input must be a JSON object"),
    ("plan_short", lambda c, t: c.update(plan=c["plan"][:1]), r"plan has 1 layers but n_layers is 2"),
    ("plan_heads", _set("plan.0.heads", []), r"plan\[0\]\.heads must list the layer's 1 heads"),
    ("notes_str", _set("notes", "x"), r"notes must be a JSON list"),
]

NUMERICAL = [
    ("range_reversed", _set("input.range", [1, -1]), r"input\.range must be \[lo, hi\] with finite lo <= hi"),
    ("range_nan", _set("input.range", [float("nan"), 1]), r"input\.range must be"),
    ("range_str", _set("input.range", "x"), r"input\.range must be"),
    ("range_three", _set("input.range", [0, 1, 2]), r"input\.range must be"),
    ("range_missing", _del("input.range"), r"input\.range must be"),
    ("input_kind_categorical", _set("input.kind", "categorical"), r"input\.kind must be \"numerical\""),
    ("drop_value", _tensor("embed.value", lambda x: None), r"has no tensor embed\.value.*input\.kind"),
    ("value_shape", _tensor("embed.value", lambda x: torch.zeros(3)), r"d_model is \d+ but embed\.value"),
    ("drop_gate", _tensor("layers.0.mlp.W_gate", lambda x: None), r"has no tensor layers\.0\.mlp\.W_gate"),
    ("integer_str", _set("output.integer", "no"), r"output\.integer must be true or false"),
    ("encoding_categorical", lambda c, t: c["output"].update(encoding="categorical", values=[1]),
     r"output\.encoding is 'categorical' but output has 'integer'"),
    ("nan_unembedding", _tensor("unembed.W_U", lambda x: torch.full_like(x, float("nan"))),
     r"unembed\.W_U holds .* non-finite"),
    ("inf_bias", _tensor("unembed.b_U", lambda x: torch.full_like(x, float("inf"))),
     r"unembed\.b_U .*non-finite"),
    ("fixed_length_past_max_len", _set("fixed_length", 5), r"fixed_length must be"),
]


def _ids(cases: list) -> list[str]:
    return [c[0] for c in cases]


@pytest.mark.parametrize("name, edit, words", CATEGORICAL, ids=_ids(CATEGORICAL))
def test_an_edited_categorical_model_is_refused_at_load(categorical: Path, tmp_path: Path, name: str,
                                                       edit: Edit, words: str) -> None:
    bad = tamper(categorical, tmp_path / name, edit)
    with pytest.raises(ModelArtifactError, match=words) as err:
        RaspModel.load(str(bad))
    assert isinstance(err.value, ArtifactError)  # a user error: one clean line from the CLI
    assert str(bad) in err.value.message  # names the file


@pytest.mark.parametrize("name, edit, words", NUMERICAL, ids=_ids(NUMERICAL))
def test_an_edited_numerical_model_is_refused_at_load(numerical: Path, tmp_path: Path, name: str,
                                                     edit: Edit, words: str) -> None:
    bad = tamper(numerical, tmp_path / name, edit)
    with pytest.raises(ModelArtifactError, match=words):
        RaspModel.load(str(bad))


def test_an_untouched_copy_still_loads(categorical: Path, numerical: Path, tmp_path: Path) -> None:
    """The helper itself changes nothing: a re-hashed copy with no edit loads and runs."""
    assert RaspModel.load(str(tamper(categorical, tmp_path / "c", lambda c, t: None))).run(["abc"]) == [
        list("cba")]
    out = RaspModel.load(str(tamper(numerical, tmp_path / "n", lambda c, t: None))).run([[0.5, -0.5, 1, 0]])
    assert len(out[0]) == 4 and all(isinstance(v, float) for v in out[0])


@pytest.mark.parametrize("name", ["d_mlp_zero", "nan_weights", "output_missing", "causal_str"])
def test_rasp_eval_of_an_edited_model_prints_one_error_line(categorical: Path, tmp_path: Path, capsys,
                                                            name: str) -> None:
    edit = next(e for n, e, _ in CATEGORICAL if n == name)
    bad = tamper(categorical, tmp_path / name, edit)
    code = main(["eval", str(bad), "--input", "abc"])
    out = capsys.readouterr()
    assert code == 1 and out.out == ""
    lines = out.err.splitlines()
    assert lines[0].startswith("error: ") and str(bad) in lines[0]
    assert all(line.startswith("  hint: ") for line in lines[1:]) and "Traceback" not in out.err


def test_rasp_eval_in_a_fresh_process_exits_1_without_a_traceback(categorical: Path, tmp_path: Path) -> None:
    bad = tamper(categorical, tmp_path / "m", _tensor("layers.0.mlp.W_in", _inf))
    run = subprocess.run([sys.executable, "-m", "rasp_compiler.cli", "eval", str(bad), "--input", "abc"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and run.stdout == "" and "Traceback" not in run.stderr
    assert [line for line in run.stderr.splitlines() if line.startswith("error:")] == [
        f"error: {bad}/model.safetensors: layers.0.mlp.W_in holds 1 non-finite value (NaN or infinity): "
        "a compiled model's weights are all finite"]


# ---------------------------------------------------------------- non-finite outputs
def test_non_finite_logits_are_refused_not_decoded(categorical: Path) -> None:
    """A NaN logit made `top0 - top1 < margin` False, so NaN outputs were decoded as the first value."""
    model = RaspModel.load(str(categorical))
    logits = model.forward(["abc"])
    nan = logits.clone()
    nan[0, 1:] = float("nan")
    with pytest.raises(ModelOutputError, match=r"positions 1, 2 of input 0 is not a finite number \(nan\)"):
        model.decode(nan, [3])
    assert model.unclean(nan, [3]) == [[1, 2]]  # `rasp check` counts them as disagreements
    inf = logits.clone()
    inf[0, 0, 0] = float("inf")
    with pytest.raises(ModelOutputError, match=r"position 0 of input 0 is not a finite number \(inf\)"):
        model.decode(inf, [3])


def test_finite_logits_whose_sum_overflows_are_not_called_non_finite(categorical: Path) -> None:
    """The decode screens a position by the sum of its logits; a sum past the float range from
    finite logits must fall back to the exact test, not refuse a clean output."""
    model = RaspModel.load(str(categorical))
    width = len(model.config["output"]["values"])
    huge = torch.zeros((1, 3, width), dtype=torch.float64)
    huge[0, :, 0] = 1.7e308
    huge[0, :, 1] = 1.7e308 if width > 1 else 0.0
    huge[0, 1, 1] = 0.0  # position 1 is clean (value 0 far ahead), positions 0 and 2 are ties
    assert model.unclean(huge, [3]) == [[0, 2]]
    with pytest.raises(ModelOutputError, match="position 0 of input 0 is ambiguous"):
        model.decode(huge, [3])
    first = torch.zeros((1, 1, width))
    first[0, 0, 0] = 1.0
    assert model.decode(huge, [3], strict=False)[0][1] == model.decode(first, [1], strict=False)[0][0]


def test_non_finite_numerical_outputs_are_refused(numerical: Path) -> None:
    model = RaspModel.load(str(numerical))
    logits = model.forward([[0.5, -0.5, 1, 0]])
    assert model.unclean(logits, [4]) == [[]]
    logits[0, 2, 0] = float("nan")
    logits[0, 3, 0] = -float("inf")
    with pytest.raises(ModelOutputError, match=r"positions 2, 3 of input 0 is not a finite number "
                                               r"\(-inf, nan\)"):
        model.decode(logits, [4])
    assert model.unclean(logits, [4]) == [[2, 3]]


def test_a_model_built_in_memory_with_nan_weights_refuses_to_answer(categorical: Path) -> None:
    """Past `load` (a model built from tensors in Python), decode is the last line of defence."""
    model = RaspModel.load(str(categorical))
    tensors = dict(model.tensors)
    tensors["unembed.b_U"] = torch.full_like(tensors["unembed.b_U"], float("nan"))
    with pytest.raises(ModelOutputError, match="not a finite number"):
        RaspModel(model.config, tensors).run(["abc"])


def test_a_huge_integer_input_is_an_input_error(numerical: Path, capsys) -> None:
    """math.isfinite(10**400) raised OverflowError (a traceback from `rasp eval --input-json`)."""
    model = RaspModel.load(str(numerical))
    with pytest.raises(InputError, match=r"position 3 holds an integer of \d+ bits: this model reads finite"):
        model.run([[1, 0, -1, 10 ** 400]])
    code = main(["eval", str(numerical), "--input-json", "[1, 0, -1, 1" + "0" * 400 + "]"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: ") and "Traceback" not in err


# ---------------------------------------------------------------- every kind the compiler writes loads
KINDS = {
    "categorical": lambda: compile_program(load_program(str(ROOT / "programs/sort.rasp")), "abc", 5),
    "causal_float64": lambda: compile_program(load_program(str(ROOT / "programs/frac_prevs.rasp")), "abc", 6,
                                              causal=True, dtype="float64"),
    "fixed_length": lambda: compile_program(load_program(str(ROOT / "programs/reverse.rasp")), "abc", 6,
                                            fixed_length=4),
    "integer_range": lambda: compile_program(load_program(str(ROOT / "programs/tracr/sort.rasp")), None, 4,
                                             input_range=(0, 5)),
    "numerical_float64": lambda: compile_program(load_program(str(ROOT / "programs/maxmin.rasp")), None, 4,
                                                 fixed_length=4, input_range=(-1, 1), dtype="float64"),
    "undefined_lengths": lambda: compile_program(program_from_source("x = 6 / (indices - 2);\nx + 1;"),
                                                 "ab", 4),
    "simulator": lambda: _simulator(),
}


def _simulator() -> RaspModel:
    from rasp_compiler.simulator.build import build_simulator

    return build_simulator(2, 2, 1, causal=True, dtype="float32").model


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_of_compiled_model_loads(kind: str, tmp_path: Path) -> None:
    model = KINDS[kind]()
    model.save(str(tmp_path / kind))
    loaded = RaspModel.load(str(tmp_path / kind))
    assert loaded.config == model.config and set(loaded.tensors) == set(model.tensors)
    n = loaded.config.get("fixed_length") or 2
    x = [[0.5, -0.25, 1.0, 0.0, 0.5][:n]] if loaded.config.get("input") else [(loaded.vocab * n)[:n]]
    if kind != "simulator":
        assert loaded.run(x) == model.run(x)


@pytest.mark.parametrize("edit, words", [
    (_set("simulator.n", "x"), "the simulator block is not valid"),
    (_set("simulator.causal", "yes"), "the simulator block is not valid"),
    (_set("simulator.n", 3), "does not match the model it describes"),
    (_set("simulator.heads", 2), "does not match the model it describes"),
])
def test_an_edited_simulator_block_is_refused(tmp_path: Path, edit: Edit, words: str) -> None:
    """`rasp simulate --model DIR` read n, d, heads with int(): 'x' was a ValueError traceback."""
    from rasp_compiler.errors import ArtifactError
    from rasp_compiler.simulator.build import load_simulator

    _simulator().save(str(tmp_path / "u"))
    assert load_simulator(str(tmp_path / "u")).layout.n == 2
    bad = tamper(tmp_path / "u", tmp_path / "bad", edit)
    with pytest.raises(ArtifactError, match=words):
        load_simulator(str(bad))


def test_a_model_path_of_the_wrong_kind_is_named_as_such(categorical: Path, tmp_path: Path) -> None:
    """A file given as the model directory was "FILE/config.json does not exist", a config.json that is
    a directory "does not exist", and saving over a file "File exists"."""
    with pytest.raises(ModelArtifactError, match=r"config\.json is a file, not a model directory"):
        RaspModel.load(str(categorical / "config.json"))
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "config.json").mkdir()
    (odd / "model.safetensors").write_bytes((categorical / "model.safetensors").read_bytes())
    with pytest.raises(ModelArtifactError, match=r"odd/config\.json is not a file"):
        RaspModel.load(str(odd))
    model = RaspModel.load(str(categorical))
    (tmp_path / "plain").write_text("x")
    with pytest.raises(ModelArtifactError, match="it is a file, not a directory"):
        model.save(str(tmp_path / "plain"))
    with pytest.raises(ModelArtifactError, match=r"plain/sub: cannot write the model there: .*plain is a "
                       r"file, not a directory"):
        model.save(str(tmp_path / "plain" / "sub"))


def test_a_trained_runs_directory_is_named_as_such(tmp_path: Path) -> None:
    """`rasp export RUN` on a `rasp experiment` run said only "not a rasp-compiler model config"."""
    run = tmp_path / "run1"
    run.mkdir()
    save_file({"w": torch.zeros(2)}, str(run / "model.safetensors"))
    (run / "config.json").write_text(json.dumps({"format": "rasp-experiment-run/1", "run": {}, "model": {}}))
    with pytest.raises(ModelArtifactError, match="not a rasp-compiler model config") as err:
        RaspModel.load(str(run))
    assert "`rasp experiment` run" in str(err.value) and "rasp experiment probe" in str(err.value)
