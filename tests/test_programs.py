"""Every shipped program (programs/*.rasp, programs/tracr/*.rasp) against an independent reference.

The references below are plain Python / NumPy written from each program's description (the
paper or tracr docstring it cites), not from the RASP code, so a wrong program and a wrong
interpreter both show up as a disagreement.  Each program is run on many random inputs plus the
edge cases: length 1, all-equal tokens, and negative numbers for the numeric programs.

The `# example:` comments of every program are checked twice: against the reference (so the
documentation is right) and through the `rasp run` command line (so users get what they read).
"""

from __future__ import annotations

import functools
import json
import math
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from rasp_compiler import interpreter
from rasp_compiler.lang import load_program

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "programs"
FLOAT_TOL = 1e-9


# ---------------------------------------------------------------- references -----------------

def ref_reverse(s):
    return list(s)[::-1]


def ref_histogram(s):
    counts = Counter(s)
    return [counts[t] for t in s]


def ref_double_histogram(s):
    counts = Counter(s)
    return [sum(1 for u in counts if counts[u] == counts[t]) for t in s]


def ref_sort(s):
    return sorted(s)  # Python's sort is stable: equal tokens keep their order


def ref_sort_by_frequency(s):
    counts = Counter(s)
    order = sorted(range(len(s)), key=lambda i: (-counts[s[i]], i))
    return [s[i] for i in order]


def ref_most_frequent(s):
    counts = Counter(s)
    distinct = list(dict.fromkeys(s))  # first-occurrence order
    distinct.sort(key=lambda t: -counts[t])  # stable: ties stay in first-occurrence order
    return distinct + ["§"] * (len(s) - len(distinct))


def ref_dyck(s, pairs=("()",)):
    """Balanced-so-far per position with a stack: T balanced, P viable prefix, F dead."""
    closer_to_opener = {p[1]: p[0] for p in pairs}
    openers = {p[0] for p in pairs}
    stack, dead, out = [], False, []
    for t in s:
        if not dead:
            if t in openers:
                stack.append(t)
            elif t in closer_to_opener:
                if stack and stack[-1] == closer_to_opener[t]:
                    stack.pop()
                else:
                    dead = True
        out.append("F" if dead else ("T" if not stack else "P"))
    return out


def ref_length(s):
    return [len(s)] * len(s)


def ref_shift(s, offset=1, filler="_"):
    return [s[i - offset] if 0 <= i - offset < len(s) else filler for i in range(len(s))]


def ref_count(s, target="l"):
    return [list(s).count(target)] * len(s)


def ref_frac_prevs(s, target="l"):
    return [list(s[: i + 1]).count(target) / (i + 1) for i in range(len(s))]


def ref_pair_balance(s):
    return [(list(s[: i + 1]).count("(") - list(s[: i + 1]).count(")")) / (i + 1) for i in range(len(s))]


def _find(s, i):
    """Sanford et al.'s find(i) = max{k <= i : k >= 1, s[k-1] == s[i]}, None when empty."""
    if i is None:
        return None
    hits = [k for k in range(1, i + 1) if s[k - 1] == s[i]]
    return max(hits) if hits else None


def ref_induction(s, hops):
    out = []
    for i in range(len(s)):
        j = i
        for _ in range(hops):
            j = _find(s, j)
        out.append("_" if j is None else s[j])
    return out


def ref_parity(s):
    return [list(s).count("1") % 2] * len(s)


def ref_match2(x, p=5):
    n = len(x)
    return [int(any((x[i] + x[j]) % p == 0 for j in range(n) if j != i)) for i in range(n)]


def ref_transpose(x, r=2, c=3):
    return np.asarray(x, dtype=float).reshape(r, c).T.reshape(-1).tolist()


def ref_matmul(x, r=2, k=2, c=3):
    x = np.asarray(x, dtype=float)
    a = x[: r * k].reshape(r, k)
    b = x[r * k: r * k + k * c].reshape(k, c)  # anything after B is padding
    out = np.zeros(len(x))
    out[: r * c] = (a @ b).reshape(-1)
    return out.tolist()


def ref_softmax(x, c=3):
    rows = np.asarray(x, dtype=float).reshape(-1, c)
    z = np.exp(rows - rows.max(axis=1, keepdims=True))
    return (z / z.sum(axis=1, keepdims=True)).reshape(-1).tolist()


def ref_maxmin(x):
    out = list(map(float, x))
    for m in range(0, len(x) - 1, 2):
        a, b = x[m], x[m + 1]
        out[m], out[m + 1] = max(a, b), min(a, b)
    return out


def ref_tracr_frac_prevs(s):
    return ref_frac_prevs(s, "a")


def ref_tracr_pair_balance(s):
    # tracr subtracts two fractions; the classic averages the differences: equal up to rounding
    opens = ref_frac_prevs(s, "(")
    closes = ref_frac_prevs(s, ")")
    return [o - c for o, c in zip(opens, closes, strict=True)]


def ref_shuffle_dyck(s, pairs=("()",)):
    ok = True
    for o, c in pairs:
        depth = 0
        for t in s:
            depth += (t == o) - (t == c)
            ok &= depth >= 0
        ok &= depth == 0
    return [ok] * len(s)


# ---------------------------------------------------------------- input generators -----------

def _strings(alphabet, max_len=12):
    def gen(rng):
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, max_len)))
    return gen


def _ints(lo, hi, max_len=10):
    def gen(rng):
        return [rng.randint(lo, hi) for _ in range(rng.randint(1, max_len))]
    return gen


def _distinct_ints(lo, hi, max_len=8):
    def gen(rng):
        return rng.sample(range(lo, hi + 1), rng.randint(1, max_len))
    return gen


def _floats(n_fn, scale=5.0):
    def gen(rng):
        n = n_fn(rng)
        # mix ties (small integers) and generic floats, negatives included
        return [float(rng.randint(-3, 3)) if rng.random() < 0.3 else rng.uniform(-scale, scale)
                for _ in range(n)]
    return gen


# name -> (reference, random-input generator, edge-case inputs, kind)
# kind: "str" compares exactly, "int" compares exactly and wants Python ints, "bool" wants bools,
# "float" compares within FLOAT_TOL; inputs that are lists go through tokens_* conversion.
SPECS = {
    "reverse": (ref_reverse, _strings("abcde"), ["a", "aaaa", "ab"], "str"),
    "histogram": (ref_histogram, _strings("abcd"), ["a", "bbbbb"], "int"),
    "double_histogram": (ref_double_histogram, _strings("abcd"), ["a", "ccc", "abcabc"], "int"),
    "sort": (ref_sort, _strings("dcba"), ["a", "aaa", "ba"], "str"),
    "sort_by_frequency": (ref_sort_by_frequency, _strings("abcd"), ["a", "zzz", "abab"], "str"),
    "most_frequent": (ref_most_frequent, _strings("abcd"), ["a", "xxxx", "abbccddd"], "str"),
    "dyck1": (lambda s: ref_dyck(s, ("()",)), _strings("()()a", 14), ["(", ")", "((((", "()"], "str"),
    "dyck2": (lambda s: ref_dyck(s, ("()", "{}")), _strings("(){}(){}a", 14),
              ["(", "}", "{{{{", "({)}", "(a{b}c)"], "str"),
    "length": (ref_length, _strings("ab", 20), ["a", "aaaaaaa"], "int"),
    "shift": (ref_shift, _strings("abc"), ["a", "aa"], "str"),
    "count": (ref_count, _strings("hel"), ["l", "h", "llll"], "int"),
    "frac_prevs": (ref_frac_prevs, _strings("hel"), ["l", "h", "lll"], "float"),
    "pair_balance": (ref_pair_balance, _strings("()a"), ["(", ")", "))))"], "float"),
    "induction_1hop": (lambda s: ref_induction(s, 1), _strings("abc"), ["a", "aaaa", "abcd"], "str"),
    "induction_2hop": (lambda s: ref_induction(s, 2), _strings("abc"), ["a", "aaaa", "abab"], "str"),
    "parity": (ref_parity, _strings("01"), ["1", "0", "1111", "111"], "int"),
    "match2": (ref_match2, _ints(-12, 12), [[0], [5], [0, 0], [0, 5, -5, 7], [1, -1], [3, 3, 3]], "int"),
    "transpose": (ref_transpose, _floats(lambda rng: 6), [[1.0] * 6, [-1, -2, -3, -4, -5, -6]], "float"),
    "matmul": (ref_matmul, _floats(lambda rng: 10), [[0.0] * 10, [-1.0] * 10], "float"),
    "softmax": (ref_softmax, _floats(lambda rng: 3 * rng.randint(1, 3), 50.0),
                [[0.0, 0.0, 0.0], [1000.0, 1000.0, -1000.0], [-800.0, -801.0, -802.0], [7.0] * 6],
                "float"),
    "maxmin": (ref_maxmin, _floats(lambda rng: rng.randint(1, 9)),
               [[1.0], [-1.0, -2.0], [-2.0, -1.0], [-3.0] * 4, [0.0, -0.5, 2.0]], "float"),
    "tracr/length": (ref_length, _strings("ab", 20), ["a"], "int"),
    "tracr/reverse": (ref_reverse, _strings("abcde"), ["a", "aaa"], "str"),
    "tracr/hist": (ref_histogram, _strings("abcd"), ["a", "bbbb"], "int"),
    "tracr/sort_unique": (ref_sort, _distinct_ints(-9, 9), [[1], [3, -3], [-1, -2, -3]], "int"),
    "tracr/sort": (ref_sort, _ints(-4, 4), [[1], [2, 2, 2], [-1, -1, -5]], "int"),
    "tracr/sort_freq": (ref_sort_by_frequency, _strings("abcd"), ["a", "aaa", "abab"], "str"),
    "tracr/frac_prevs": (ref_tracr_frac_prevs, _strings("abc"), ["a", "b", "aaa"], "float"),
    "tracr/pair_balance": (ref_tracr_pair_balance, _strings("()a"), ["(", ")", "(((("], "float"),
    "tracr/shuffle_dyck1": (lambda s: ref_shuffle_dyck(s, ("()",)), _strings("()()a", 10),
                            ["(", ")", "()", ")(", "(())"], "bool"),
    "tracr/shuffle_dyck2": (lambda s: ref_shuffle_dyck(s, ("()", "{}")), _strings("(){}a", 10),
                            ["(", "}", "({)}", "{}", "(){)}"], "bool"),
}

N_RANDOM = 40  # random inputs per program; all programs together stay within a few seconds


def all_program_names():
    names = sorted(p.stem for p in PROGRAMS.glob("*.rasp"))
    names += sorted(f"tracr/{p.stem}" for p in (PROGRAMS / "tracr").glob("*.rasp"))
    return names


@functools.lru_cache(maxsize=None)
def program(name):
    return load_program(str(PROGRAMS / f"{name}.rasp"))


def run(name, inputs):
    return interpreter.run(program(name), list(inputs))


def assert_matches(got, want, kind, context):
    assert len(got) == len(want), f"{context}: length {len(got)} != {len(want)}"
    if kind == "float":
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert isinstance(g, (int, float)) and not isinstance(g, bool), f"{context}[{i}]: {g!r}"
            assert math.isclose(g, w, rel_tol=FLOAT_TOL, abs_tol=FLOAT_TOL), \
                f"{context}[{i}]: got {g!r}, want {w!r}\n got {got}\nwant {want}"
        return
    assert list(got) == list(want), f"{context}: got {got}, want {want}"
    if kind == "int":  # 2 and 2.0 compare equal but print differently: counts must be ints
        assert all(type(v) is int for v in got), f"{context}: not all ints: {got}"
    if kind == "bool":
        assert all(type(v) is bool for v in got), f"{context}: not all bools: {got}"


def test_every_program_has_a_spec():
    """A program added to programs/ without a reference here would go untested."""
    assert sorted(SPECS) == sorted(all_program_names())


@pytest.mark.parametrize("name", sorted(SPECS))
def test_program_against_reference(name):
    ref, gen, edges, kind = SPECS[name]
    rng = random.Random(f"programs:{name}")  # deterministic, different per program
    cases = list(edges) + [gen(rng) for _ in range(N_RANDOM)]
    for inp in cases:
        got = run(name, inp)
        assert_matches(got, ref(inp), kind, f"{name}({inp!r})")


@pytest.mark.parametrize("name", ["reverse", "histogram", "sort", "dyck1", "dyck2", "parity",
                                  "tracr/sort_freq"])
def test_all_equal_tokens_every_length(name):
    ref, _, _, kind = SPECS[name]
    for n in range(1, 13):
        for tok in "a()1":
            inp = tok * n
            assert_matches(run(name, inp), ref(inp), kind, f"{name}({inp!r})")


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_dyck2_exhaustive_small(n):
    """Every string over ( ) { } of length 1..5: the matching logic has no gap."""
    import itertools
    for chars in itertools.product("(){}", repeat=n):
        s = "".join(chars)
        assert run("dyck2", s) == ref_dyck(s, ("()", "{}")), s


def test_dyck1_exhaustive_small():
    import itertools
    for n in range(1, 9):
        for chars in itertools.product("()", repeat=n):
            s = "".join(chars)
            assert run("dyck1", s) == ref_dyck(s), s


def test_softmax_large_entries_do_not_overflow():
    """The published listing exponentiates raw entries: e^1000 overflows. Rows must sum to 1."""
    x = [1000.0, 999.0, 998.0, -1000.0, -1001.0, 5.0]
    got = run("softmax", x)
    assert all(math.isfinite(v) for v in got)
    assert math.isclose(sum(got[:3]), 1.0, rel_tol=1e-12)
    assert math.isclose(sum(got[3:]), 1.0, rel_tol=1e-12)
    assert_matches(got, ref_softmax(x), "float", "softmax")


def test_maxmin_negative_odd_entries():
    """The published listing compares odd positions with the default 0: [-2, -1] came out wrong."""
    assert run("maxmin", [-2.0, -1.0]) == [-1.0, -2.0]
    assert run("maxmin", [-1.0, -2.0]) == [-1.0, -2.0]


def test_match2_published_bugs_fixed():
    # both partners of residue 0; tokens that average to 0; a lone 0 does not match itself
    assert run("match2", [0, 10]) == [1, 1]
    assert run("match2", [3, -3]) == [1, 1]
    assert run("match2", [0]) == [0]
    assert run("match2", [5, 1]) == [0, 0]


def test_tracr_sort_unique_rejects_nothing_on_unique_keys():
    # unique keys: every place receives exactly one token
    assert run("tracr/sort_unique", [2, 4, 3, 1]) == [1, 2, 3, 4]


def test_tracr_programs_shadow_length():
    """tracr/length defines its own `length`: the shadowing must not break the library's users."""
    assert run("tracr/length", "abcdefg") == [7] * 7
    assert run("reverse", "abc") == ["c", "b", "a"]


# ---------------------------------------------------------------- example comments -----------

EXAMPLE_RE = re.compile(r"^#\s*example(-json)?:\s*(.*?)\s*->\s*(.*?)\s*$")


def parse_examples(path):
    """`# example: hello -> olleh` (string in, characters out, or a JSON list out);
    `# example-json: [..] -> [..]` (JSON list in and out)."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        m = EXAMPLE_RE.match(line)
        if not m:
            continue
        is_json, lhs, rhs = m.groups()
        inp = json.loads(lhs) if is_json else lhs
        want = json.loads(rhs) if rhs.startswith("[") else list(rhs)
        out.append((inp, want, bool(is_json)))
    return out


def _close(got, want):
    if isinstance(want, float) or isinstance(got, float):
        return (isinstance(got, (int, float)) and not isinstance(got, bool)
                and math.isclose(got, want, rel_tol=FLOAT_TOL, abs_tol=FLOAT_TOL))
    return got == want and type(got) is type(want)


@pytest.mark.parametrize("name", all_program_names())
def test_program_has_examples_that_match_reference(name):
    """Each program documents at least one example, and the example is what the reference says."""
    path = PROGRAMS / f"{name}.rasp"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("#"), f"{name}: must open with a comment saying what it computes"
    examples = parse_examples(path)
    assert examples, f"{name}: no '# example:' comment"
    ref, _, _, kind = SPECS[name]
    for inp, want, _ in examples:
        expected = ref(inp)
        if kind == "float":
            assert all(_close(float(g), float(w)) for g, w in zip(want, expected, strict=False)) and \
                len(want) == len(expected), f"{name}: example {inp!r} -> {want}, reference {expected}"
        else:
            assert want == expected, f"{name}: example {inp!r} -> {want}, reference {expected}"
    # a bare final expression statement makes `out` the result
    statements = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*;", statements[-1].strip()), statements[-1]


def _cli_output(capsys, args):
    """`rasp run ARGS` in-process through the run command's own parser, so that a sibling
    command that fails to import cannot mask what `rasp run` does (the real process is
    checked once below)."""
    import argparse

    from rasp_compiler.commands import run as run_command
    parser = argparse.ArgumentParser(prog="rasp")
    run_command.register(parser.add_subparsers(dest="command"))
    parsed = parser.parse_args(args)
    rc = parsed.func(parsed)
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    return json.loads(captured.out)["output"]


@pytest.mark.parametrize("name", all_program_names())
def test_examples_through_rasp_run(name, capsys):
    """`rasp run FILE --input X --json` (in-process) gives what each example comment promises."""
    path = str(PROGRAMS / f"{name}.rasp")
    for inp, want, is_json in parse_examples(path):
        flag = ["--input-json", json.dumps(inp)] if is_json else ["--input", inp]
        got = _cli_output(capsys, ["run", path, *flag, "--json"])
        assert len(got) == len(want), f"{name} {inp!r}: {got} vs {want}"
        for g, w in zip(got, want, strict=True):
            if isinstance(w, (int, float)) and not isinstance(w, bool):
                assert isinstance(g, (int, float)) and not isinstance(g, bool), (name, got, want)
                assert math.isclose(g, w, rel_tol=FLOAT_TOL, abs_tol=FLOAT_TOL), (name, got, want)
            else:
                assert g == w and type(g) is type(w), (name, inp, got, want)


def test_rasp_console_script_runs_an_example():
    """One real process: the installed `rasp` entry point, plain (non-JSON) and JSON output."""
    exe = Path(sys.executable).with_name("rasp")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "rasp_compiler.cli"]
    path = str(PROGRAMS / "reverse.rasp")
    res = subprocess.run(cmd + ["run", path, "--input", "hello", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"output": list("olleh")}


def test_dyck2_long_input_needs_exact_depth():
    """The paper's Dyck-2 listing computes depth as (i+1) * mean without rounding; on this input
    (from the original REPL's own test file) the float error makes it answer F from position 26
    on, though the prefix is fine until position 55.  The shipped program rounds."""
    s = "{{({(){}()})}({}){}{}}{(({}(){}))}{}(){}({}(){()(){}}){)()}"
    want = ref_dyck(s, ("()", "{}"))
    assert want[26] == "P" and want[55] == "F"
    assert run("dyck2", s) == want


def _with_shape(name, **consts):
    """The program's source with its shape constants (`r = 2;` lines at the top) replaced."""
    from rasp_compiler.lang import program_from_source
    text = (PROGRAMS / f"{name}.rasp").read_text(encoding="utf-8")
    for key, value in consts.items():
        text, count = re.subn(rf"(?m)^{key} = \d+;", f"{key} = {value};", text)
        assert count == 1, f"{name}: no single '{key} = ...;' constant"
    return program_from_source(text, file=f"{name}.rasp")


@pytest.mark.parametrize("r, k, c", [(1, 1, 1), (1, 3, 2), (3, 1, 2), (2, 3, 4), (4, 2, 1), (3, 3, 3)])
def test_matrix_programs_at_other_shapes(r, k, c):
    """The shapes are constants at the top; every size must work, not only the shipped one
    (the published listings are hand-unrolled for 3x3 and use A's stride for B)."""
    rng = np.random.default_rng(r * 100 + k * 10 + c)
    x = rng.normal(scale=3.0, size=r * c).round(3).tolist()
    got = interpreter.run(_with_shape("transpose", r=r, c=c), x)
    assert_matches(got, ref_transpose(x, r, c), "float", f"transpose {r}x{c}")

    # when the product is longer than both operands (r*c > r*k + k*c), zeros pad the input
    x = rng.normal(scale=3.0, size=r * k + k * c).round(3).tolist()
    x += [0.0] * max(0, r * c - len(x))
    got = interpreter.run(_with_shape("matmul", r=r, k=k, c=c), x)
    assert_matches(got, ref_matmul(x, r, k, c), "float", f"matmul {r}x{k} {k}x{c}")

    x = (rng.normal(scale=30.0, size=r * c)).tolist()
    got = interpreter.run(_with_shape("softmax", r=r, c=c), x)
    assert_matches(got, ref_softmax(x, c), "float", f"softmax {r}x{c}")
