"""A misspelled keyword is named as one: `dfe f(x) {…}`, `fro x in …`, `retrun x;` lex as names, so the
parser would trip over them with "missing ';'"; the error says "did you mean 'def'?" instead, as
unknown names already do for the grammar's calls (`aggregat(` → 'aggregate')."""

from __future__ import annotations

import pytest

from rasp_compiler.errors import RaspError
from rasp_compiler.interpreter import run
from rasp_compiler.lang import parse_source, program_from_source
from rasp_compiler.lang.syntax_errors import keywords

# One correct program per keyword, the keyword written as {kw} (each parses and runs as it is).
USES = {
    "def": "{kw} f(x) {{ return x + 1; }}\nf(indices);\n",
    "for": "s = 0;\n{kw} x in [1, 2] {{ s = s + x; }}\nindices + s;\n",
    "in": "indices + [y for y {kw} [1, 2]][0];\n",
    "return": "def f(x) {{ {kw} x + 1; }}\nf(indices);\n",
    "load": '{kw} "lib.rasp";\nindices;\n',
    "if": "1 {kw} tokens == \"a\" else 2;\n",
    "else": "1 if tokens == \"a\" {kw} 2;\n",
    "and": "tokens == \"a\" {kw} indices > 1;\n",
    "or": "tokens == \"a\" {kw} indices > 1;\n",
    "not": "{kw} tokens == \"a\";\n",
    "draw": "{kw}(tokens);\ntokens;\n",
    "select": "aggregate({kw}(indices, indices, ==), tokens);\n",
    "aggregate": "{kw}(select(indices, indices, ==), tokens);\n",
    "round": "{kw}(indices / 2);\n",
    "indicator": "{kw}(tokens == \"a\");\n",
}


def _typos(word: str) -> list[str]:
    """Swapped neighbours, a doubled letter, and (for words of 3+ letters) a dropped one; a dropped
    letter of `in` or `or` leaves one letter that is as close to other keywords."""
    out = {word[:i] + word[i + 1] + word[i] + word[i + 2:] for i in range(len(word) - 1)}
    out |= {word[:i] + word[i] + word[i:] for i in range(len(word))}
    if len(word) >= 3:
        out |= {word[:i] + word[i + 1:] for i in range(len(word))}
    return sorted(t for t in out if t != word and t not in keywords())


def _error(src: str) -> RaspError:
    with pytest.raises(RaspError) as info:
        run(program_from_source(src, "prog.rasp"), "abc")
    return info.value


def test_every_keyword_of_the_grammar_has_a_use_here() -> None:
    assert set(keywords()) == set(USES)


@pytest.mark.parametrize("src, typo, keyword, line, col", [
    ("dfe f(x) { return x; }\n", "dfe", "def", 1, 1),
    ("fro x in [1, 2] { y = x; }\n", "fro", "for", 1, 1),
    ("retrun x;\n", "retrun", "return", 1, 1),
    ("def f(x) {\n  retrun x + 1;\n}\n", "retrun", "return", 2, 3),
    ("x = [y fro y in tokens];\n", "fro", "for", 1, 8),
    ("x = 1 if tokens esle 2;\n", "esle", "else", 1, 17),
    ("x = 1 fi tokens else 2;\n", "fi", "if", 1, 7),
    ('lod "lib.rasp";\n', "lod", "load", 1, 1),
    ("retrun x\n", "retrun", "return", 1, 1),  # and the ';' missing too: the keyword comes first
])
def test_the_issues_examples_name_the_keyword_at_the_typo(src, typo, keyword, line, col) -> None:
    with pytest.raises(RaspError) as info:
        parse_source(src, "prog.rasp")
    err = info.value
    assert err.hint == f"did you mean '{keyword}'?"
    assert f"'{typo}'" in err.message and "missing ';'" not in err.message
    assert (err.line, err.col) == (line, col)
    assert err.render().startswith(f"prog.rasp:{line}:{col}: error: ")


@pytest.mark.parametrize("keyword, typo", [(kw, t) for kw in sorted(USES) for t in _typos(kw)])
def test_every_typo_of_every_keyword_suggests_it(keyword: str, typo: str, tmp_path, monkeypatch) -> None:
    (tmp_path / "lib.rasp").write_text("z = 1;\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    correct = USES[keyword].format(kw=keyword)
    run(program_from_source(correct, "prog.rasp"), "abc")  # the use is right as written
    err = _error(USES[keyword].format(kw=typo))
    assert err.hint == f"did you mean '{keyword}'?", (typo, err.message, err.hint)
    if keyword == "select":  # `selct(a, b, ==)` is a call until its bare operator, where it is shown
        assert f"a call of '{typo}'" in err.message
        return
    at = USES[keyword].format(kw="\0").index("\0")
    assert (err.line, err.col) == (USES[keyword].count("\n", 0, at) + 1,
                                    at - USES[keyword].rfind("\n", 0, at)), err.render()


def test_names_that_look_like_keywords_still_work() -> None:
    """Only an error gets a suggestion: a program whose variables are near-keywords (`fore`, `iff`,
    `retrun`…) runs as the same program with plain names does."""
    template = ("{a} = indices + 1;\n{b} = tokens == \"a\";\ndef {c}(x) {{ return x * 2; }}\n"
                "{d} = [{e} for {e} in [1, 2]];\n{f} = {c}({a}) if {b} else {d}[1];\n{f};\n")
    near = dict(a="fore", b="iff", c="retrun", d="inn", e="ands", f="nott")
    plain = dict(a="v1", b="v2", c="v3", d="v4", e="v5", f="v6")
    for word in near.values():
        assert word not in keywords()
    got = run(program_from_source(template.format(**near), "near.rasp"), "abca")
    assert got == run(program_from_source(template.format(**plain), "plain.rasp"), "abca")


def test_a_missing_semicolon_before_a_near_keyword_name_is_still_a_missing_semicolon() -> None:
    """`fore` after a missing ';' could be read as `or` (`tokens or = 1` fails at once): no hint."""
    with pytest.raises(RaspError) as info:
        parse_source("x = tokens\nfore = 1;\n", "prog.rasp")
    assert info.value.message == "missing ';' at the end of the statement"
    assert (info.value.line, info.value.col) == (1, 11)


def test_a_word_that_merely_contains_a_keyword_is_not_suggested_as_it() -> None:
    """`bogus command` said "'command' is not a RASP keyword ... did you mean 'and'?": difflib finds
    'and' in 'command', but a typo changes a word's length by a letter or two, not four."""
    err = _error("x = 1;\nbogus command\n")
    assert "did you mean 'and'" not in str(err) and "'command' is not a RASP keyword" not in err.message
