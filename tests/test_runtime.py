"""The standalone runtime and the compile / eval / check commands: artifacts, bad inputs, exit codes."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rasp_compiler import runtime
from rasp_compiler.cli import main
from rasp_compiler.compiler import compile_program, load
from rasp_compiler.errors import ArtifactError, InputError
from rasp_compiler.interpreter import run
from rasp_compiler.lang import load_program, program_from_source
from rasp_compiler.runtime import ModelOutputError as OutputError
from rasp_compiler.runtime import RaspModel

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parent.parent
REVERSE = str(ROOT / "programs" / "reverse.rasp")


@pytest.fixture()
def saved(tmp_path: Path) -> Path:
    model = compile_program(load_program(REVERSE), list("abc"), 8)
    model.save(str(tmp_path / "m"))
    return tmp_path / "m"


def test_runtime_imports_only_torch_safetensors_and_stdlib() -> None:
    tree = ast.parse((ROOT / "rasp_compiler" / "runtime.py").read_text())
    allowed = {"torch", "safetensors", "json", "math", "operator", "hashlib", "os", "typing", "warnings",
               "__future__"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert {a.name.split(".")[0] for a in node.names} <= allowed
        elif isinstance(node, ast.ImportFrom) and node.module:
            root = node.module.split(".")[0]
            # the optional imports (the package's error classes, its atomic directory writer for
            # save, and what names another command's directory) sit in a try/except ImportError
            optional = ("rasp_compiler.errors", "rasp_compiler.compiler.artifact",
                        "rasp_compiler.artifact_kinds")
            assert root in allowed or node.module in optional


def test_runtime_runs_as_a_copied_file(saved: Path, tmp_path: Path) -> None:
    copy = tmp_path / "solo"
    copy.mkdir()
    (copy / "rasp_runtime.py").write_text((ROOT / "rasp_compiler" / "runtime.py").read_text())
    code = ("import sys; sys.modules['rasp_compiler'] = None; import rasp_runtime as r; "
            f"print(r.RaspModel.load({str(saved)!r}).run(['abca']))")
    out = subprocess.run([sys.executable, "-c", code], cwd=copy, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[['a', 'c', 'b', 'a']]"


def test_save_load_roundtrip(saved: Path) -> None:
    model = load(str(saved))
    assert isinstance(model, RaspModel)
    assert model.run(["abc", "ab"]) == [list("cba"), list("ba")]
    cfg = json.loads((saved / "config.json").read_text())
    assert cfg["output"]["values"] == ["a", "b", "c"]
    labels = [lab for sub in cfg["residual"] for lab in sub["labels"]]
    assert "tokens:a" in labels and "indices:7" in labels


def test_out_of_vocabulary_and_too_long(saved: Path) -> None:
    model = load(str(saved))
    with pytest.raises(InputError, match="not in the vocabulary"):
        model.run(["abz"])
    with pytest.raises(InputError, match="more than the 8"):
        model.run(["a" * 9])
    with pytest.raises(InputError, match="empty"):
        model.run([""])
    with pytest.raises(InputError, match=r"token \['b'\] at position 1 of input 0 is not in the vocabulary"):
        model.run([["a", ["b"]]])  # was a TypeError: unhashable type
    with pytest.raises(InputError, match="input 1 is not a string or a list of tokens"):
        model.run(["ab", 5])


@pytest.mark.parametrize("vocab, max_len, words", [
    (5, 4, "a string or a list of tokens, not int"),
    ({"a": 1}, 4, "not dict"),
    ([["a"]], 4, r"holds \['a'\]"),
    ([1.0, float("nan")], 4, "holds nan"),
    ("abc", True, r"max_len \(--max-len\) must be a positive integer, got True"),
])
def test_compile_program_names_a_bad_vocabulary_or_length(vocab, max_len, words) -> None:
    from rasp_compiler.errors import UserError

    with pytest.raises(UserError, match=words):
        compile_program(load_program(REVERSE), vocab, max_len)


def test_truncated_weights(saved: Path) -> None:
    w = saved / "model.safetensors"
    data = w.read_bytes()
    w.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError, match="truncated or corrupt"):
        load(str(saved))


def test_edited_config(saved: Path) -> None:
    c = saved / "config.json"
    cfg = json.loads(c.read_text())
    cfg["output"]["values"] = ["c", "b", "a"]
    c.write_text(json.dumps(cfg))
    with pytest.raises(ArtifactError, match="edited"):
        load(str(saved))


def test_changed_weights(saved: Path) -> None:
    from safetensors.torch import load_file, save_file
    w = saved / "model.safetensors"
    from safetensors import safe_open
    with safe_open(str(w), framework="pt") as fh:
        meta = fh.metadata()
    tensors = load_file(str(w))
    tensors["unembed.W_U"] = tensors["unembed.W_U"] * 2
    save_file(tensors, str(w), metadata=meta)
    with pytest.raises(ArtifactError, match="weights were changed"):
        load(str(saved))


# ---------------------------------------------------------------- the command line
def cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_compile_eval_check(tmp_path: Path, capsys) -> None:
    code, out, _ = cli(["compile", REVERSE, "--vocab", "abc", "--max-len", "6", "-o", str(tmp_path / "m")],
                       capsys)
    assert code == 0 and "layers: 2" in out and "residual width" in out
    code, out, _ = cli(["eval", str(tmp_path / "m"), "--input", "abca", "--json"], capsys)
    assert code == 0 and json.loads(out) == {"output": ["a", "c", "b", "a"]}
    code, out, _ = cli(["eval", str(tmp_path / "m"), "--input-json", '["a", "b"]', "--json"], capsys)
    assert json.loads(out) == {"output": ["b", "a"]}
    code, out, _ = cli(["check", REVERSE, "--vocab", "abc", "--max-len", "4", "--json"], capsys)
    rep = json.loads(out)
    assert code == 0 and rep["inputs_checked"] == 3 + 9 + 27 + 81 == rep["inputs_agreeing"]
    for k in ("layers", "heads_per_layer", "residual_width", "params", "max_abs_error", "compile_seconds"):
        assert k in rep
    code, out, _ = cli(["check", REVERSE, "--vocab", '["a","b","c"]', "--max-len", "16", "--samples", "50",
                        "--json"], capsys)
    assert code == 0 and json.loads(out)["mode"] == "random"


def test_cli_bad_inputs_exit_nonzero_without_traceback(tmp_path: Path, capsys) -> None:
    m = str(tmp_path / "m")
    assert cli(["compile", REVERSE, "--vocab", "abc", "--max-len", "4", "-o", m], capsys)[0] == 0
    code, out, err = cli(["eval", m, "--input", "abz"], capsys)
    assert code != 0 and "not in the vocabulary" in err and "Traceback" not in err
    code, out, err = cli(["eval", m, "--input", "abcab"], capsys)
    assert code != 0 and "more than the 4" in err
    w = Path(m) / "model.safetensors"
    w.write_bytes(w.read_bytes()[:100])
    code, out, err = cli(["eval", m, "--input", "ab"], capsys)
    assert code != 0 and "truncated" in err
    bad = tmp_path / "bad.rasp"
    bad.write_text("x = 1;\ny = aggregate(select(tokens, tokens, ==), indices, \"none\");\nnumerical(y);\n")
    code, out, err = cli(["compile", str(bad), "--vocab", "abc", "--max-len", "4", "-o", m], capsys)
    assert code != 0 and "bad.rasp:" in err and "Traceback" not in err


def test_ambiguous_output_is_refused_not_decoded() -> None:
    """A categorical output that is not a clean one-hot raises instead of decoding by argmax, so a
    model outside its derived exactness fails loudly; `check` counts it as a disagreement."""
    from rasp_compiler.runtime import ModelOutputError

    model = compile_program(load_program(REVERSE), list("abc"), 8)
    logits = model.forward([list("abc")])
    assert model.decode(logits, [3]) == [list("cba")]
    assert model.unclean(logits, [3]) == [[]]
    blurred = logits.clone()
    best, second = blurred[0, 1].topk(2).indices.tolist()
    blurred[0, 1, second] = blurred[0, 1, best] - 1.0
    with pytest.raises(ModelOutputError, match="position 1 of input 0 is ambiguous"):
        model.decode(blurred, [3])
    assert isinstance(ModelOutputError("x"), ArtifactError)  # a clean CLI error, not a traceback
    assert model.decode(blurred, [3], strict=False)[0][1] == "b"
    assert model.unclean(blurred, [3]) == [[1]]


# ---------------------------------------------------------------- devices

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_a_model_moved_to_the_cpu_gives_the_same_outputs(saved: Path) -> None:
    model = RaspModel.load(str(saved))
    xs = ["abc", "cab", "a", "bbbbbbbb"]
    assert model.to("cpu").run(xs) == [list(reversed(x)) for x in xs]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_asking_for_cuda_without_one_is_a_clear_error(saved: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(InputError, match="no CUDA device"):
        RaspModel.load(str(saved)).to("cuda")
    assert main(["eval", str(saved), "--input", "abc", "--device", "cuda"]) != 0
    assert "no CUDA device" in capsys.readouterr().err


def test_an_unknown_device_is_a_clear_error(saved: Path) -> None:
    with pytest.raises(InputError, match="device"):
        RaspModel.load(str(saved)).to("abacus")


def test_trace_gives_the_scores_its_softmax_read_and_pads_on_request(saved: Path) -> None:
    """``attn_logits`` are the softmax's input (masked keys at the lowest float); ``positions``
    runs an input padded, as in a batch with a longer one (tracr's ``apply`` computes pads)."""
    model = RaspModel.load(str(saved))
    plain, padded = model.trace([list("abc")]), model.trace([list("abc")], positions=6)
    assert padded["valid"][0].tolist() == [True] * 4 + [False] * 3
    assert model.decode(padded["logits"], [3]) == model.run([list("abc")])
    for before, after in zip(plain["residuals"], padded["residuals"], strict=True):
        assert after.shape[1] == 7 and torch.allclose(before, after[:, :4], rtol=0, atol=1e-6)
    for scores, pattern in zip(padded["attn_logits"], padded["attention"], strict=True):
        assert scores.shape == pattern.shape and torch.equal(torch.softmax(scores, dim=-1), pattern)
        assert (scores[..., 4:] == torch.finfo(scores.dtype).min).all()
    assert model.trace([list("abc")], positions=1)["residuals"][0].shape[1] == 4  # never cut
    for bad in (9, 0, -1, 5.0, "8", True, None.__class__):
        with pytest.raises(InputError, match=r"positions must be a whole number from 1 to .* \(8\)"):
            model.trace([list("abc")], positions=bad)
    assert model.trace([list("abc")], positions=torch.tensor(5))["valid"].shape == (1, 6)


def test_trace_layers_keeps_only_the_patterns_asked_for(saved: Path) -> None:
    model = RaspModel.load(str(saved))
    ids, lengths = model.encode([list("abca"), list("cb")])
    full_scores: list = []
    kept_scores: list = []
    with torch.no_grad():
        logits, residuals, patterns = model.module(ids, lengths, trace=True, attn_logits=full_scores)
        kept = model.module(ids, lengths, trace=True, attn_logits=kept_scores, trace_layers={1})
    assert torch.equal(kept[0], logits)
    assert all(torch.equal(a, b) for a, b in zip(kept[1], residuals, strict=True))
    assert kept[2][0].shape == (2, 0, 5, 5) and kept_scores[0].shape == (2, 0, 5, 5)
    assert torch.equal(kept[2][1], patterns[1]) and torch.equal(kept_scores[1], full_scores[1])


@CUDA
def test_cuda_outputs_equal_cpu_outputs_bit_for_bit() -> None:
    program = load_program(str(ROOT / "programs" / "sort.rasp"))
    cpu = compile_program(program, list("abcde"), 32)
    gpu = compile_program(program, list("abcde"), 32).to("cuda")
    g = torch.Generator().manual_seed(0)
    xs = [["abcde"[int(i)] for i in torch.randint(0, 5, (int(n),), generator=g)]
          for n in torch.randint(1, 33, (512,), generator=g)]
    want = cpu.forward(xs)
    got = gpu.forward(xs)
    assert got.device.type == "cpu"
    assert cpu.run(xs) == gpu.run(xs)
    assert float((got - want).abs().max()) < 1e-4
    trace = gpu.trace(xs[:4])
    assert all(r.device.type == "cpu" for r in trace["residuals"])


@CUDA
def test_rasp_check_runs_the_model_on_cuda(capsys: pytest.CaptureFixture) -> None:
    code = main(["check", str(ROOT / "programs" / "dyck1.rasp"), "--vocab", "()", "--max-len", "10",
                 "--exhaustive", "--json", "--device", "cuda"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["device"].startswith("cuda")
    assert report["inputs_agreeing"] == report["inputs_checked"] == 2 ** 11 - 2


def test_a_fixed_length_model_refuses_other_lengths(tmp_path: Path) -> None:
    """A categorical model compiled with --fixed-length folds `length` to a constant: at another
    length its outputs mean nothing, so the input is refused (it used to reach the decoder)."""
    model = compile_program(load_program(REVERSE), list("abc"), 6, fixed_length=4)
    model.save(str(tmp_path / "m"))
    loaded = load(str(tmp_path / "m"))
    assert loaded.run(["abca"]) == [list("acba")]
    with pytest.raises(InputError, match="input 0 has 2 tokens; this model was compiled for exactly 4"):
        loaded.run(["ab"])


def test_a_numerical_model_names_an_input_that_is_not_a_list() -> None:
    model = compile_program(load_program(str(ROOT / "programs" / "maxmin.rasp")), None, 4, fixed_length=4,
                            input_range=(-1.0, 1.0))
    with pytest.raises(InputError, match="input 0 is not a list of numbers"):
        model.run([5])
    with pytest.raises(InputError, match=r"position 1 holds True: this model reads finite real numbers"):
        model.run([[0.5, True, 0, 0]])


def test_sublayers_on_their_own_dimensions_match_the_dense_products() -> None:
    """On a CPU each sublayer runs on the residual dimensions its weights touch; with gradients
    wanted it stays dense.  Both give the same logits (to float rounding) and decoded outputs, and a
    weight edited after loading is seen (the dimensions are prepared again)."""
    model = compile_program(load_program(str(ROOT / "programs" / "dyck2.rasp")), list("()[]x"), 12)
    g = torch.Generator().manual_seed(1)
    xs = [["()[]x"[int(i)] for i in torch.randint(0, 5, (int(n),), generator=g)]
          for n in torch.randint(1, 13, (200,), generator=g)]
    ids, lengths, _ = model.encode_inputs(xs)
    mod = model.module

    def both() -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            sparse = mod(ids, lengths)
        for p in mod.parameters():
            p.requires_grad_(True)
        dense = mod(ids, lengths)
        assert dense.requires_grad  # the dense path ran
        for p in mod.parameters():
            p.requires_grad_(False)
        return sparse, dense.detach()

    # layer 0's MLP is large and sparse enough to run on its own dimensions
    assert {e["tensor"]: e["path"] for e in mod.explain()}["layers.0.mlp.W_in"] != "dense"
    sparse, dense = both()
    assert float((sparse - dense).abs().max()) < 1e-5
    assert model.decode(sparse[:, 1:], lengths.tolist()) == model.decode(dense[:, 1:], lengths.tolist())
    w_in = mod.w("layers.0.mlp.W_in")
    # a token dimension that layer 0's MLP did not read, now read by every hidden unit
    unread = ((mod.w("embed.token") != 0).any(dim=0) & (w_in == 0).all(dim=1)).nonzero()[0, 0]
    with torch.no_grad():
        w_in[unread] = 5.0
    edited, edited_dense = both()
    assert float((edited_dense - dense).abs().max()) > 1e-3
    assert float((edited - edited_dense).abs().max()) < 1e-5


def test_mlp_slices_are_small_on_a_cpu_and_whole_chunks_on_a_gpu() -> None:
    """A CPU reuses the memory of small slices; on a GPU every slice is more kernel launches, so
    there an MLP takes as many positions as chunk_elements allows (histogram at 64 ran 10x slower
    on an H200 in slices of 2^18 hidden units)."""
    chunk = 1 << 28
    assert runtime._mlp_slice_rows(200, "cpu", chunk) == runtime.MLP_SLICE_ELEMENTS // 200
    assert runtime._mlp_slice_rows(200, "cuda", chunk) == chunk // 200
    # a wide MLP on a CPU still takes MLP_SLICE_ROWS positions at a time
    assert runtime._mlp_slice_rows(42_310, "cpu", chunk) == runtime.MLP_SLICE_ROWS
    # and chunk_elements bounds both
    assert runtime._mlp_slice_rows(200, "cpu", 1 << 10) == runtime._mlp_slice_rows(200, "cuda", 1 << 10) == 5


# -- what the Python API's users pass by mistake (audit of 1 Dec) -----------------------------------
def test_a_batch_is_a_list_of_inputs_in_every_entry_point() -> None:
    """A bare string was read as one input per character by forward and trace (run refused it), a
    generator was consumed twice by run, and None or an int reached Python's own errors."""
    model = compile_program(load_program(REVERSE), list("ab"), 4)
    for call in (model.run, model.forward, model.trace):
        for bad, words in (("ab", "wrap a single input in a list"), (None, "not NoneType"), (5, "not int")):
            with pytest.raises(InputError, match=words):
                call(bad)
    assert model.run(x for x in ["ab", "abb"]) == [list("ba"), list("bba")]


def test_numpy_inputs_read_as_their_values() -> None:
    np = pytest.importorskip("numpy")
    model = compile_program(program_from_source("tokens_int + 1;"), [1, 2, 3], 4)
    want = [[2, 3], [4, 2]]
    assert model.run([[np.int64(1), np.int64(2)], [3, 1]]) == want
    assert model.run([np.array([1, 2]), np.array([3, 1])]) == want
    assert model.run(np.array([[1, 2], [3, 1]])) == want
    assert compile_program(program_from_source("tokens_int + 1;"), [1, 2, 3], np.int64(4)).max_len == 4


def test_a_program_reading_the_input_as_given_refuses_numbers_for_a_string_vocabulary() -> None:
    """tokens_asis (tracr's tokens) holds 1, not "1": reading 1 as the token "1" answered for
    another input than the interpreter's, silently."""
    from rasp_compiler import pyapi as rasp

    program = rasp.tokens == "1"
    model = rasp.compile_program(program, "12", 3)
    assert model.config["tokens_as_given"] is True
    assert model.run([["1", "2"]]) == [program(["1", "2"])]
    with pytest.raises(InputError, match="token 1 at position 0 of input 0 is not in the vocabulary") as err:
        model.run([[1, 2]])
    assert "reads the input as given" in err.value.hint
    # a .rasp program's tokens are strings: there 1 is read as "1", as the interpreter reads it
    plain = compile_program(program_from_source('tokens == "1";'), list("12"), 3)
    assert "tokens_as_given" not in plain.config
    assert plain.run([[1, 2]]) == [run(program_from_source('tokens == "1";'), [1, 2])] == [[True, False]]


def test_a_whole_float_or_a_bool_for_an_int_token_read_as_given_says_to_pass_the_int() -> None:
    """First use: tracr's make_hist over {1, 2, 3} given [1, 2.0] (or True) was refused with the
    hint "compile again with a --vocab that includes it", though the vocabulary holds 2 (== 2.0)."""
    from rasp_compiler import pyapi as rasp
    from rasp_compiler.pyapi import lib

    model = rasp.compile_program(lib.make_hist(), [1, 2, 3], 4)
    for given, shown in (([1, 2.0], "2.0 is a float, not the int 2"),
                         ([True], "True is a bool, not the int 1")):
        with pytest.raises(InputError, match="is not in the vocabulary") as err:
            model.run([given])
        assert shown in err.value.hint and "compile again" not in err.value.hint
    with pytest.raises(InputError) as err:  # a number the vocabulary lacks keeps the old hint
        model.run([[4.0]])
    assert "compile again" in err.value.hint


def test_decode_refuses_logits_and_lengths_that_forward_does_not_give() -> None:
    model = compile_program(load_program(REVERSE), list("ab"), 4)
    logits = model.forward(["ab", "abb"])
    assert model.decode(logits, [2, 3]) == [list("ba"), list("bba")]
    for read in (model.decode, model.unclean):
        for bad_logits, lengths in ((logits[0], [2]), (logits.numpy(), [2, 3]), (logits[..., :1], [2, 3])):
            with pytest.raises(InputError, match="logits must be \\[batch, positions"):
                read(bad_logits, lengths)
        for lengths in ([2, 3, 4], [2.5, 3], [-1, 3], [0, 3], [2, 9], 3):
            with pytest.raises(InputError, match="lengths must be one per input"):
                read(logits, lengths)


def test_an_output_with_one_value_is_refused_where_the_program_wrote_none() -> None:
    """A dict lookup with one value: the missing key leaves the output's one logit at 0, which an
    argmax over one column decodes as that value; the interpreter raises there."""
    program = program_from_source('x = {"a": 1}[tokens]; x;')
    model = compile_program(program, list("ab"), 3)
    assert len(model.config["output"]["values"]) == 1
    assert model.run(["aa"]) == [run(program, "aa")] == [[1, 1]]
    with pytest.raises(OutputError, match="position 1 of input 0 is ambiguous: its one logit is 0") as err:
        model.run(["ab"])
    assert "no answer on this input" in err.value.hint and "key 'b'" in err.value.hint
    with pytest.raises(Exception, match="key 'b'"):
        run(program, "ab")
    assert model.unclean(model.forward(["ab", "ba"]), [2, 2]) == [[1], [0]]


def test_save_to_the_empty_path_or_a_foreign_directory_says_what_from_python(tmp_path: Path,
                                                                              monkeypatch) -> None:
    """First use: model.save("") said ": cannot write the model there: the directory is not empty"
    (the working directory, named as nothing), and the hint for a foreign directory named only the
    command line's --force."""
    model = compile_program(load_program(REVERSE), list("ab"), 4)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    for call in (lambda: model.save(""), lambda: RaspModel.load("")):
        with pytest.raises(ArtifactError, match="^a model directory is a path, not the empty string"):
            call()
    with pytest.raises(ArtifactError, match="the directory is not empty") as err:
        model.save(str(tmp_path))
    assert "force=True" in err.value.hint


def test_paths_and_devices_that_are_not_paths_or_devices(tmp_path: Path) -> None:
    model = compile_program(load_program(REVERSE), list("ab"), 4)
    for bad in (None, 123, b"out"):
        with pytest.raises(ArtifactError, match="a model directory is a path"):
            model.save(bad)
        with pytest.raises(ArtifactError, match="a model directory is a path"):
            RaspModel.load(bad)
    model.save(tmp_path / "m")
    deep = tmp_path / "m" / "config.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ArtifactError, match="not valid JSON"):
        RaspModel.load(tmp_path / "m")
    with pytest.raises(InputError):
        model.to("cuda:7")


def test_an_ambiguous_output_of_an_input_the_program_leaves_undefined_is_not_called_a_bug() -> None:
    from rasp_compiler import pyapi as rasp
    from rasp_compiler.runtime import ModelOutputError

    t = rasp.tokens
    model = rasp.compile_program(rasp.Aggregate(rasp.Select(t, t, rasp.Comparison.TRUE), t), "ab", 4)
    with pytest.raises(ModelOutputError) as err:
        model.run(["ab"])
    assert "no answer on this input" in err.value.hint and "compiler bug" not in err.value.hint


def test_compile_program_names_arguments_of_the_wrong_kind() -> None:
    from rasp_compiler.errors import UserError

    program = load_program(REVERSE)
    with pytest.raises(UserError, match="takes a Program, not str"):
        compile_program("tokens;", list("ab"), 4)
    with pytest.raises(UserError, match="takes a Program, not NoneType"):
        compile_program(None, list("ab"), 4)
    for kw, words in ((dict(fixed_length=3.0), "fixed_length"), (dict(fixed_length="3"), "fixed_length"),
                      (dict(input_range="ab"), "two numbers")):
        with pytest.raises(UserError, match=words):
            compile_program(program, list("ab"), 4, **kw)


def test_a_numerical_output_past_float32_integers_is_noted() -> None:
    from rasp_compiler import pyapi as rasp

    big = rasp.numerical(rasp.Map(lambda x: x * 1_000_000_000_001 + 1, rasp.numerical(rasp.indices)))
    assert any("past 16,777,216" in n for n in rasp.compile_program(big, "ab", 3).config["notes"])
    assert not any("past" in n for n in rasp.compile_program(big, "ab", 3, dtype="float64").config["notes"])


def test_cli_eval_prints_numerical_outputs_without_float_noise(tmp_path: Path, capsys) -> None:
    """pair_balance printed -0.0 for rounding residue, and its JSON 0.20000000298023224 for the
    float32 0.2; both are that float32 model's output, written plainly."""
    program = str(ROOT / "programs" / "pair_balance.rasp")
    assert cli(["compile", program, "--vocab", "abc()", "--max-len", "8", "-o", str(tmp_path / "m")],
               capsys)[0] == 0
    code, out, _ = cli(["eval", str(tmp_path / "m"), "--input", "a()b(c))", "--json"], capsys)
    got = json.loads(out)["output"]
    want = run(load_program(program), list("a()b(c))"))
    assert code == 0 and got[4] == 0.2 and all(abs(a - b) < 1e-6 for a, b in zip(got, want, strict=True))
    assert "-0.0" not in cli(["eval", str(tmp_path / "m"), "--input", "a()b(c))"], capsys)[1]


def test_digit_characters_reach_a_vocabulary_of_numbers_as_rasp_run_reads_them(tmp_path, capsys) -> None:
    """Found by a walkthrough: `rasp eval --input 123` on a model over [1, 2, 3] that reads
    tokens_int was refused with "compile again with a --vocab that includes it", while `rasp run`
    read the same input."""
    from rasp_compiler import pyapi as rasp
    from rasp_compiler.lang import program_from_source

    program = program_from_source("tokens = tokens_int;\nx = tokens + indices;\n")
    model = compile_program(program, [1, 2, 3], 4)
    assert model.run(["123"]) == [[1, 3, 5]]
    model.save(str(tmp_path / "m"))
    assert main(["eval", str(tmp_path / "m"), "--input", "123"]) == 0
    assert capsys.readouterr().out.strip() == "[1, 3, 5] (ints)"
    # a program that reads its input as given (tracr's tokens) keeps "1" and 1 apart, and says so
    as_given = rasp.compile_program(rasp.Map(lambda x: x + 1, rasp.tokens), {1, 2, 3}, 4)
    with pytest.raises(InputError, match="not in the vocabulary") as err:
        as_given.run(["12"])
    assert "holds the number 1: pass numbers" in err.value.hint


def test_compiler_load_gives_the_plan_summary_and_stats_of_a_saved_model(tmp_path: Path) -> None:
    model = compile_program(load_program(REVERSE), list("abc"), 6)
    model.save(str(tmp_path / "m"))
    loaded = load(str(tmp_path / "m"))
    assert loaded.plan == model.plan and loaded.run(["abca"]) == model.run(["abca"])
    fresh, saved = model.stats(), loaded.stats()
    assert saved.pop("compile_seconds") is None and fresh.pop("compile_seconds") >= 0
    assert saved == fresh
    assert "compile time" not in loaded.summary()
    assert loaded.summary().splitlines()[2:] == model.summary().splitlines()[2:]
