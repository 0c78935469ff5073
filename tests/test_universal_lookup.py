"""Issue 46: the lookup UT, one fixed backbone per size class running compiled programs with MLPs.

References are independent of the construction: decoded outputs against the reference interpreter
and logits against the compiled model's own forward pass (float64).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import json
import re
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from universal_helpers import single_thread  # noqa: F401  (autouse fixture)

from rasp_compiler.cli import main
from rasp_compiler.errors import ArtifactError, UserError
from rasp_compiler.interpreter import run as interpret
from rasp_compiler.universal.lookup.backbone import LookupBackbone, build_backbone
from rasp_compiler.universal.lookup.batch import compile_for_lookup
from rasp_compiler.universal.lookup.encoding import ClassTooSmall, ProgramEncoding, analyse, encode_program
from rasp_compiler.universal.lookup.parts import ProgramOutsideConstruction
from rasp_compiler.universal.lookup.run import run_program
from rasp_compiler.universal.lookup.size_class import LADDER, fitted, parse_class, smallest_holding

ROOT = Path(__file__).resolve().parent.parent


def _all_inputs(vocab, max_len):
    return [list(t) for n in range(1, max_len + 1) for t in itertools.product(vocab, repeat=n)]


def _encoded(path: str, vocab, max_len: int, size=None, causal: bool = False):
    program, model = compile_for_lookup(str(ROOT / path), vocab, max_len, None, causal)
    analysed = analyse(model)
    size = size or fitted(analysed.needs)
    backbone = build_backbone(size)
    return program, model, backbone, encode_program(model, size, backbone.sha256, analysed)


def _digest(tensors: dict) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(tensors[name].contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


# ----- exactness -----------------------------------------------------------------------------
@pytest.mark.parametrize("path, vocab, max_len, causal", [
    ("programs/reverse.rasp", "abc", 5, False),        # a numerical MLP input (length's BOS weight)
    ("programs/sort.rasp", "abc", 5, False),           # two heads, a width decoded by an MLP
    ("programs/histogram.rasp", "abc", 5, False),
    ("programs/tracr/pair_balance.rasp", "()x", 5, True),   # a folded (linear) MLP, causal
    ("docs/examples/shift_twice.rasp", "abc", 4, False),    # an aggregate of an aggregate, no MLP
])
def test_programs_run_exactly_through_their_fitted_class(path, vocab, max_len, causal):
    program, model, backbone, enc = _encoded(path, list(vocab), max_len, causal=causal)
    inputs = _all_inputs(list(vocab), max_len)
    res = run_program(backbone, enc, model, inputs, program)
    assert res.inputs_checked == len(inputs)
    assert res.agree_interpreter == res.agree_compiled == res.inputs_agreeing == len(inputs)
    assert res.max_abs_logit_error <= 1e-6


def test_decoded_outputs_are_the_interpreters_on_a_ladder_class():
    """reverse in the small class: padded heads, tables and widths add exactly nothing."""
    program, model, backbone, enc = _encoded("programs/reverse.rasp", list("abc"), 6, size=LADDER[0])
    assert backbone.size.name == "small" and backbone.size.width > analyse(model).needs.width
    ids, lengths = model.encode([list("abcab")])
    with torch.no_grad():
        logits = backbone(enc.program_tokens, enc.embed(ids))[..., :3]
    assert model.decode(logits[:, 1:], [5])[0] == list(interpret(program, list("abcab"))) == list("bacba")


def test_program_tokens_never_change_so_the_fixed_prefix_forward_is_the_plain_transformer():
    _, model, backbone, enc = _encoded("programs/sort.rasp", list("abc"), 5)
    ids, _ = model.encode([list("cabca"), list("bbaca")])
    x = enc.embed(ids)
    seq = torch.cat([enc.program_tokens.expand(2, -1, -1), x], dim=1)
    with torch.no_grad():
        full = backbone.run_all(seq)
        fast = backbone(enc.program_tokens, x)
    r = enc.program_tokens.shape[0]
    assert torch.equal(full[:, :r], seq[:, :r])                 # no layer wrote a program token
    assert torch.allclose(full[:, r:] @ backbone.tensors["U"], fast, rtol=0, atol=1e-9)


# ----- the backbone depends on the class alone ----------------------------------------------
def test_backbone_built_twice_is_byte_identical(tmp_path):
    size = parse_class("medium")
    a, b = build_backbone(size).save(tmp_path / "a"), build_backbone(size).save(tmp_path / "b")
    assert (a / "backbone.safetensors").read_bytes() == (b / "backbone.safetensors").read_bytes()
    loaded = LookupBackbone.load(a)
    assert loaded.sha256 == build_backbone(size).sha256
    assert build_backbone(parse_class("small")).sha256 != loaded.sha256


def test_encoding_and_running_programs_never_touch_the_backbone():
    backbone = build_backbone(parse_class("medium"))
    before = _digest(backbone.tensors)
    for path, vocab in (("programs/sort.rasp", "abc"), ("programs/dyck1.rasp", "()x")):
        program, model = compile_for_lookup(str(ROOT / path), list(vocab), 5, None, False)
        enc = encode_program(model, backbone.size, backbone.sha256)
        run_program(backbone, enc, model, _all_inputs(list(vocab), 3), program)
    assert _digest(backbone.tensors) == before


# ----- refusals ------------------------------------------------------------------------------
def test_a_class_too_small_is_refused_with_the_size_and_the_class_that_holds_it():
    _, model = compile_for_lookup(str(ROOT / "programs/sort.rasp"), list("abc"), 8, None, False)
    with pytest.raises(ClassTooSmall) as err:
        encode_program(model, parse_class("small"), "0" * 64)
    assert "attention heads per layer: the program needs 2, the class holds 1" in err.value.message
    assert "--class medium" in err.value.hint
    needs = analyse(model).needs
    assert smallest_holding(needs).name == "medium"


def test_a_tampered_encoding_is_refused(tmp_path):
    _, model, backbone, enc = _encoded("programs/reverse.rasp", list("abc"), 4)
    path = enc.save(tmp_path / "reverse.safetensors")
    assert torch.equal(ProgramEncoding.load(path).program_tokens, enc.program_tokens)
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    tensors = load_file(str(path))
    tensors["program_tokens"][3, 7] += 1.0        # one entry of one table row
    save_file(tensors, str(path), metadata=meta)
    with pytest.raises(ArtifactError, match="do not match the SHA-256"):
        ProgramEncoding.load(path)


def test_an_encoding_for_another_backbone_is_refused():
    _, model, backbone, enc = _encoded("programs/reverse.rasp", list("abc"), 4, size=LADDER[0])
    other = build_backbone(parse_class("medium"))
    with pytest.raises(UserError, match="made for another backbone"):
        run_program(other, enc, model, [list("ab")])



def test_logits_refuses_another_backbone_and_ids_it_cannot_embed():
    """``logits``, the documented Python call, ran an encoding on a backbone of another class and
    ended in torch's "einsum(): subscript m has size 93 ..." (an IndexError for an id past the
    token table, a size mismatch for too many tokens)."""
    from rasp_compiler.universal.lookup import logits

    _, model, backbone, enc = _encoded("programs/reverse.rasp", list("abc"), 4, size=LADDER[0])
    ids = model.encode([list("abc")])[0]
    assert torch.equal(logits(backbone, enc, ids)[:, 1:], model.module(ids, torch.tensor([3]))[:, 1:])
    with pytest.raises(UserError, match="made for another backbone"):
        logits(build_backbone(parse_class("medium")), enc, ids)
    with pytest.raises(UserError, match=r"ids must be between 0 and 4 .*got 0\.\.99"):
        logits(backbone, enc, torch.tensor([[3, 0, 99]]))
    with pytest.raises(UserError, match="ids hold 5 tokens after BOS, more than the 4"):
        logits(backbone, enc, torch.zeros(1, 6, dtype=torch.long))
    with pytest.raises(UserError, match="2-D integer tensor"):
        logits(backbone, enc, ids[0])


def test_the_python_entry_points_name_a_wrong_argument():
    """A class name, a path or a None in the wrong place ended in AttributeErrors ("'str' object
    has no attribute 'validate'"); a None SHA-256 was recorded in the encoding; no inputs at all
    counted as an exact run."""
    from rasp_compiler.universal.lookup import logits

    program, model, backbone, enc = _encoded("programs/reverse.rasp", list("abc"), 4, size=LADDER[0])
    assert build_backbone("small").sha256 == backbone.sha256  # a class name is taken as --class takes it
    by_name = encode_program(model, "small", backbone.sha256)
    assert torch.equal(by_name.program_tokens, enc.program_tokens)
    cases = [
        (lambda: build_backbone(3), "build_backbone takes a size class .* got int"),
        (lambda: encode_program(model, None, backbone.sha256), "encode_program takes a size class"),
        (lambda: encode_program(model, "small", None), "backbone_sha256 must be the backbone's SHA-256"),
        (lambda: encode_program("programs/reverse.rasp", "small", backbone.sha256),
         "encode_program takes a compiled model, got str"),
        (lambda: analyse("programs/reverse.rasp"), "analyse takes a compiled model, got str"),
        (lambda: smallest_holding("small"), "smallest_holding takes a program's needs"),
        (lambda: parse_class(3), "parse_class takes a class name or sizes as text, got int"),
        (lambda: run_program(None, enc, model, [list("ab")]),
         "backbone must be a LookupBackbone, got NoneType"),
        (lambda: run_program(enc, backbone, model, [list("ab")]), "backbone must be a LookupBackbone"),
        (lambda: run_program(backbone, enc, "model", [list("ab")]), "run_program takes a compiled model"),
        (lambda: run_program(backbone, enc, model, []), "run_program got no inputs"),
        (lambda: run_program(backbone, enc, model, "ab"), "inputs must be a list of inputs"),
        (lambda: logits(backbone, None, model.encode([list("ab")])[0]), "encoding must be a ProgramEncoding"),
    ]
    for call, words in cases:
        with pytest.raises(UserError, match=words):
            call()
    assert run_program(backbone, enc, model, [list("ab")], program).exact


def test_run_program_refuses_a_program_that_is_not_parsed():
    """A file name given as ``program`` reached the interpreter inside a catch-all: every input
    then counted as disagreeing with the interpreter, with no word of why."""
    program, model, backbone, enc = _encoded("programs/reverse.rasp", list("abc"), 4)
    with pytest.raises(UserError, match="must be a parsed Program, got str"):
        run_program(backbone, enc, model, [list("ab")], "programs/reverse.rasp")
    assert run_program(backbone, enc, model, [list("ab")], program).inputs_agreeing == 1

PREV_TOKEN = 'prev = aggregate(select(indices, indices - 1, ==), tokens, "x");\nprev;\n'


def test_a_causal_and_a_bidirectional_backbone_are_two_identities():
    """The two have the same tensors (the mask is no tensor) and had the same SHA-256, so an
    encoding made for one ran on the other: a bidirectional program's encoding on the causal
    backbone gave wrong outputs with nothing refused."""
    plain, causal = parse_class("small"), parse_class("small", True)
    a, b = build_backbone(plain), build_backbone(causal)
    assert a.tensors_sha256 == b.tensors_sha256 and a.sha256 != b.sha256
    assert a.sha256 == a.tensors_sha256  # a bidirectional backbone's digest is unchanged
    _, model, _, enc = _encoded("programs/reverse.rasp", list("abc"), 4, size=plain)
    with pytest.raises(UserError, match="made for a bidirectional .not causal. backbone, and this "
                                        "backbone is causal"):
        run_program(b, enc, model, [list("ab")])


def test_a_saved_encoding_runs_only_on_a_backbone_and_a_compile_of_its_mask(tmp_path):
    prog = tmp_path / "prev.rasp"
    prog.write_text(PREV_TOKEN)
    base = ["universal", "--program", str(prog), "--vocab", "abc", "--max-len", "4", "--with-mlps"]
    plain, causal, enc = tmp_path / "plain", tmp_path / "causal", tmp_path / "enc.safetensors"
    assert _cli(*base, "--class", "small", "--save-backbone", str(plain))[0] == 0
    assert _cli(*base, "--causal", "--class", "small", "--save-backbone", str(causal),
                "--save-encoding", str(enc))[0] == 0
    code, _, err = _cli(*base, "--causal", "--backbone", str(plain), "--encoding", str(enc), "--check")
    assert code == 1 and "made for a causal backbone, and this backbone is bidirectional" in err, err
    code, _, err = _cli(*base, "--backbone", str(causal), "--encoding", str(enc), "--check")
    assert code == 1 and "compiled with --causal, and this run compiles it without" in err, err
    code, out, _ = _cli(*base, "--causal", "--backbone", str(causal), "--encoding", str(enc), "--check")
    assert code == 0 and "all 120 inputs up to length 4" in out, out


def test_a_causal_backbone_and_encoding_saved_before_the_mask_counted_still_load(tmp_path):
    """Files saved before the causal mask entered the identity record the tensors' digest."""
    _, model, backbone, enc = _encoded("programs/tracr/pair_balance.rasp", list("()x"), 4, causal=True)
    assert backbone.size.causal
    directory = backbone.save(tmp_path / "bb")
    path = directory / "backbone.safetensors"
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    header = json.loads(meta["config"])
    header["sha256"] = backbone.tensors_sha256
    save_file(load_file(str(path)), str(path), metadata={**meta, "config": json.dumps(header)})
    (directory / "backbone.json").write_text(json.dumps(header))
    loaded = LookupBackbone.load(directory)
    enc.backbone_sha256 = backbone.tensors_sha256
    ids = model.encode([list("(x)")])[0]
    from rasp_compiler.universal.lookup import logits
    assert torch.equal(logits(loaded, enc, ids)[:, 1:], model.module(ids, torch.tensor([3]))[:, 1:])


def test_a_tampered_backbone_is_refused(tmp_path):
    directory = build_backbone(parse_class("small")).save(tmp_path / "bb")
    path = directory / "backbone.safetensors"
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    tensors = load_file(str(path))
    tensors["layers.0.R_Q"][0, 5, 0] = 1.0
    save_file(tensors, str(path), metadata=meta)
    with pytest.raises(ArtifactError, match="not those of the class"):
        LookupBackbone.load(directory)


def test_a_real_valued_model_is_refused_cleanly():
    from rasp_compiler.compiler import compile_program
    from rasp_compiler.lang import load_program

    model = compile_program(load_program(str(ROOT / "programs/maxmin.rasp")), ["<number>"], 4,
                            dtype="float64", input_range=(-1.5, 1.5), fixed_length=4)
    with pytest.raises(ProgramOutsideConstruction, match="reads real numbers"):
        analyse(model)


def test_parse_class_names_what_it_cannot_read():
    assert parse_class("L=2,H=1,T=1,k=4,o=3,c=1,vocab=3,len=5,rows=40").width == 4 + 3 + 2 * (12 + 4)
    with pytest.raises(UserError, match="does not give"):
        parse_class("L=2,H=1")
    with pytest.raises(UserError, match="cannot read"):
        parse_class("huge")



def test_parse_class_refuses_a_size_given_twice_and_a_number_of_thousands_of_digits():
    """L=2,...,L=3 built an L=3 class (the last won); L=<5,000 nines> was a ValueError traceback
    from int()."""
    sizes = "L=2,H=1,T=1,k=4,o=3,c=1,vocab=3,len=5,rows=40"
    with pytest.raises(UserError, match="gives L twice"):
        parse_class(sizes + ",L=3")
    huge = sizes.replace("L=2", "L=" + "9" * 5000)
    with pytest.raises(UserError, match=r"L=99999999… \(5,000 digits\) is far above") as err:
        parse_class(huge)
    assert len(err.value.message) < 300  # the text is cut short, not shown whole
    assert parse_class(sizes.replace("L=2", "L=0002")) == parse_class(sizes)
    code, _, text = _cli("universal", "--program", "programs/histogram.rasp", "--vocab", "abc", "--with-mlps",
                         "--class", huge)
    assert code == 1 and text.count("error:") == 1 and "Traceback" not in text


# ----- the command line ----------------------------------------------------------------------
def _cli(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_cli_batch_runs_every_program_through_one_backbone():
    code, out, _ = _cli("universal", "--programs", "programs/reverse.rasp", "programs/sort.rasp",
                        "programs/softmax.rasp", "--vocab", "abc", "--max-len", "4", "--with-mlps",
                        "--check", "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 1                                   # softmax reads real numbers: refused
    rev, srt, soft, total = lines
    assert soft["program"].endswith("softmax.rasp") and "float" in soft["refused"]
    for line in (rev, srt):
        assert line["inputs_checked"] == line["inputs_agreeing"] == 120
        assert line["max_abs_logit_error"] <= 1e-6
        assert set(line["seconds_per_input"]) == {"ut", "compiled"}
        assert line["backbone_params"] > 0 and line["program_params"] > 0
    assert rev["backbone_sha256"] == srt["backbone_sha256"] == total["total"]["backbone_sha256"]
    assert rev["class"]["name"] == "medium"             # the smallest holding both (sort: 2 heads)
    assert total["total"]["exact"] == 2 and total["total"]["refused"] == 1


def test_cli_refuses_a_class_too_small_and_a_tampered_encoding(tmp_path):
    code, _, err = _cli("universal", "--program", "programs/sort.rasp", "--vocab", "abc", "--max-len", "4",
                        "--with-mlps", "--class", "small", "--check")
    assert code == 1 and "the program needs 2, the class holds 1" in err and "--class medium" in err
    enc = tmp_path / "rev.safetensors"
    code, _, _ = _cli("universal", "--program", "programs/reverse.rasp", "--vocab", "abc", "--max-len", "4",
                      "--with-mlps", "--save-encoding", str(enc))
    assert code == 0
    tensors = load_file(str(enc))
    with safe_open(str(enc), framework="pt") as f:
        meta = f.metadata()
    tensors["token_embed"][0, 4] = 3.0
    save_file(tensors, str(enc), metadata=meta)
    code, out, err = _cli("universal", "--program", "programs/reverse.rasp", "--vocab", "abc", "--max-len",
                          "4", "--with-mlps", "--encoding", str(enc), "--check")
    assert code == 1 and "SHA-256" in err and out == ""
    good = tmp_path / "good.safetensors"
    code, out, _ = _cli("universal", "--program", "programs/reverse.rasp", "--vocab", "abc", "--max-len", "4",
                        "--with-mlps", "--save-encoding", str(good))
    assert code == 0 and f"  saved      {good}\n" in out   # it said where the backbone went, not this
    code, _, err = _cli("universal", "--program", "programs/tracr/reverse.rasp", "--vocab", "abc",
                        "--max-len", "4", "--with-mlps", "--encoding", str(good), "--check")
    assert code == 1 and "the saved encoding is of another program" in err


def test_save_encoding_never_replaces_another_artifact_without_force(tmp_path):
    """`--save-encoding DIR/backbone.safetensors` wrote the encoding over a saved backbone's weights
    (and over a target, or any file) without a word; directories refuse foreign contents."""
    bb = tmp_path / "bb"
    args = ("universal", "--program", "programs/reverse.rasp", "--vocab", "abc", "--max-len", "4",
            "--with-mlps")
    assert _cli(*args, "--save-backbone", str(bb))[0] == 0
    weights = (bb / "backbone.safetensors").read_bytes()
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    for victim, words in ((bb / "backbone.safetensors", "format 'rasp-lookup-ut-backbone/1'"),
                          (notes, "not a safetensors file")):
        code, out, err = _cli(*args, "--save-encoding", str(victim))
        assert code == 1 and f"{victim} exists and is not a program encoding ({words})" in err
        assert "--force" in err and err.count("error:") == 1
    assert (bb / "backbone.safetensors").read_bytes() == weights and notes.read_text() == "mine"
    enc = tmp_path / "e.safetensors"                     # an encoding is replaced as before
    assert _cli(*args, "--save-encoding", str(enc))[0] == 0
    assert _cli(*args, "--save-encoding", str(enc))[0] == 0
    assert _cli(*args, "--save-encoding", str(notes), "--force")[0] == 0
    assert ProgramEncoding.load(notes).meta["vocab"] == ["a", "b", "c"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_long_universal_checks_show_progress_on_a_terminal(monkeypatch):
    """Issue 47: `rasp universal --program docs/examples/shift_twice.rasp` ran two minutes without a
    word.  Its checks (attention-only and --with-mlps) show the check's bar on a terminal."""
    from rasp_compiler.commands.check import CheckProgress

    now = [0.0]

    def clock() -> float:
        now[0] += 1.0          # every input seems to take a second
        return now[0]
    monkeypatch.setattr(CheckProgress, "clock", staticmethod(clock))
    for extra in ((), ("--with-mlps", "--check")):
        err = _Terminal()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            assert main(["universal", "--program", "docs/examples/shift_twice.rasp", "--vocab", "abc",
                         "--max-len", "3", *extra]) == 0
        assert "checking" in err.getvalue() and "/39" in err.getvalue()


def test_run_program_reports_progress_per_batch():
    program, model, backbone, enc = _encoded("programs/reverse.rasp", list("abc"), 4)
    heard = []
    run_program(backbone, enc, model, _all_inputs(list("abc"), 4), program, progress=heard.append)
    assert sum(heard) == 120 and len(heard) == 4       # one batch per length


# ----- the whole shipped set -----------------------------------------------------------------
@pytest.mark.slow
def test_every_shipped_categorical_program_runs_exactly_through_a_ladder_class():
    """Issue 46's bar: every shipped categorical program (bench/shipped.py, its three-token
    vocabulary; Dyck-2's has four) at max length 8, all inputs up to length 5 and 500 random ones
    of lengths 6..8, through one backbone per class, three classes in all."""
    import random
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from shipped import PROGRAMS

    backbones = {c.name: build_backbone(c) for c in LADDER}
    used = set()
    for shipped in PROGRAMS:
        vocab = list(shipped.vocab3)
        program, model = compile_for_lookup(str(shipped.file), vocab, 8, None, False)
        analysed = analyse(model)
        size = smallest_holding(analysed.needs)
        assert size.name in backbones, (shipped.name, analysed.needs.describe())
        used.add(size.name)
        backbone = backbones[size.name]
        enc = encode_program(model, size, backbone.sha256, analysed)
        rng = random.Random(0)
        inputs = _all_inputs(vocab, 5) + [[rng.choice(vocab) for _ in range(rng.randint(6, 8))]
                                          for _ in range(500)]
        res = run_program(backbone, enc, model, inputs, program)
        assert res.inputs_agreeing == len(inputs), (shipped.name, res.first_disagreement)
        assert res.max_abs_logit_error <= 1e-6, shipped.name
    assert used == {"small", "medium", "large"}


def test_the_documented_lookup_commands_print_what_the_docs_show():
    """docs/universal.md's lookup-UT transcripts are re-run; lines match but for the times (and
    the batch transcript's elided middle)."""
    import re
    import shlex

    doc = (ROOT / "docs" / "universal.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Programs with MLPs"):]
    blocks = re.findall(r"```\n(.*?)```", section, flags=re.S)
    ran = 0
    for block in blocks:
        lines = block.splitlines()
        if not lines or not lines[0].startswith("$ rasp universal") or "--with-mlps" not in lines[0]:
            continue
        code, out, err = _cli(*shlex.split(lines[0][len("$ rasp "):]))
        shown = [ln for ln in lines[1:] if ln.strip() != "..."]
        actual = (out + err).splitlines()

        def masked(text: str) -> str:
            return re.sub(r"\d+\.\d+ ms", "T ms", text)
        got = {masked(a) for a in actual}
        for line in shown:
            assert masked(line) in got, line
        ran += 1
    assert ran >= 3


def test_a_program_stating_its_input_length_runs_at_that_length_only():
    """matmul.rasp states '# fixed-length: 10' (rasp run refuses other lengths, rasp compile builds
    a model of that length); the UT commands compiled a model for every length and counted inputs
    of 1 to 10 tokens as agreeing, and at the default --max-len 5 checked no input of length 10."""
    from rasp_compiler.universal.lookup.batch import check_programs
    from rasp_compiler.universal.lookup.run import inputs_for

    report = check_programs([str(ROOT / "programs/matmul.rasp")], [1, 2], 10, max_inputs=20,
                            keep_going=False)
    rep = report.programs[0]
    assert rep.model.config["fixed_length"] == 10
    assert rep.run.inputs_checked == rep.run.inputs_agreeing == 20
    inputs, exhaustive = inputs_for([1, 2], 10, 20, 0, fixed_length=10)
    assert not exhaustive and {len(x) for x in inputs} == {10}
    assert inputs_for([1, 2], 10, 5000, 0, fixed_length=10) == (
        [list(t) for t in itertools.product([1, 2], repeat=10)], True)
    for extra in ([], ["--with-mlps", "--check"]):
        code, _, err = _cli("universal", "--program", "programs/matmul.rasp", "--vocab", "[1,2]", *extra)
        assert code == 1 and "states '# fixed-length: 10'" in err and "--max-len 10" in err, err
    code, out, _ = _cli("universal", "--program", "programs/matmul.rasp", "--vocab", "[1,2]",
                        "--max-len", "10", "--attention-layer", "0", "--max-inputs", "8")
    assert code == 0 and "8 inputs (random of length 10)" in out


@pytest.mark.parametrize("spec, words", [
    ("L=0,H=1,T=1,k=16,o=9,c=1,vocab=8,len=8,rows=64", ": L=0 is below the least size"),
    ("L=1,H=0,T=0,k=0,o=9,c=1,vocab=8,len=8,rows=64", ": H=0, k=0 are below the least size"),
])
def test_a_class_size_below_its_least_is_named_as_written(spec, words):
    """L=0 was reported as "size class field layers = 0 is not valid": a name the option never uses."""
    with pytest.raises(UserError, match=re.escape(f"--class {spec!r}{words}")) as err:
        parse_class(spec)
    assert "T may be 0" in err.value.hint
    assert parse_class("L=1,H=1,T=0,k=1,o=1,c=1,vocab=1,len=1,rows=1").tables == 0


def test_without_check_the_lookup_ut_says_nothing_was_run():
    """Without --check the lookup UT printed the encoding and stopped, as if it were the result; the
    fixed UT says "(add --check ...)" in that case."""
    args = ("universal", "--program", "programs/reverse.rasp", "--vocab", "ab", "--max-len", "3",
            "--with-mlps")
    code, out, _ = _cli(*args)
    assert code == 0 and "(add --check to run the inputs through the backbone and compare)" in out
    code, out, _ = _cli(*args, "--check")
    assert code == 0 and "add --check" not in out and "decoded outputs equal" in out
