"""Lark's parse errors, said in words: "missing ';'", "unclosed '('", "select needs a comparison
operator …" — never the list of thirty token names Lark would print.

Everything here works from the source text and the failing token, so it stays correct when the
grammar grows: brackets are matched by a small scan that skips strings and comments.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from functools import lru_cache

from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr

from rasp_compiler.errors import RaspError

OPENERS = {"(": ")", "[": "]", "{": "}"}
CLOSERS = {v: k for k, v in OPENERS.items()}
CLOSER_TERMINALS = {"RPAR": ")", "RSQB": "]", "RBRACE": "}"}

# Terminals that can start an expression / continue one; used to summarise `expected` sets.
EXPR_START = {"NAME", "INT", "FLOAT", "STRING", "LPAR", "LSQB", "LBRACE", "NOT", "ADD_OP", "SELECT",
              "AGGREGATE", "ROUND", "INDICATOR"}
OPERATORS = {"ADD_OP", "MUL_OP", "MOD_OP", "POW_OP", "CMP_OP", "AND", "OR", "IF", "IN", "LSQB", "LPAR"}
WORDS = {
    "SEMICOLON": "';'", "COMMA": "','", "RPAR": "')'", "RSQB": "']'", "RBRACE": "'}'",
    "LPAR": "'('", "LBRACE": "'{'", "COLON": "':'", "EQUAL": "'='", "ELSE": "'else'", "IN": "'in'",
    "NAME": "a name", "STRING": "a string", "CMP_OP": "a comparison operator", "FOR": "'for'",
}


@dataclass
class Bracket:
    char: str
    line: int
    col: int


def scan_brackets(text: str, stop: int | None = None) -> tuple[list[Bracket], Bracket | None]:
    """Open brackets still unclosed at ``stop`` (outermost first), and the first closer that
    matches nothing or the wrong opener (if any)."""
    stack: list[Bracket] = []
    line, col, i = 1, 1, 0
    end = len(text) if stop is None else stop
    while i < end:
        c = text[i]
        if c == "#":
            while i < end and text[i] != "\n":
                i += 1
                col += 1
            continue
        if c == '"':
            i += 1
            col += 1
            while i < end and text[i] not in '"\n':
                if text[i] == "\\":
                    i += 1
                    col += 1
                i += 1
                col += 1
            if i < end and text[i] == '"':
                i += 1
                col += 1
            continue
        if c in OPENERS:
            stack.append(Bracket(c, line, col))
        elif c in CLOSERS:
            if not stack or stack[-1].char != CLOSERS[c]:
                return stack, Bracket(c, line, col)
            stack.pop()
        if c == "\n":
            line, col = line + 1, 1
        else:
            col += 1
        i += 1
    return stack, None


def _describe(token) -> str:
    if token.type == "$END":
        return "end of input"
    if token.type == "NAME":
        return f"name '{token.value}'"
    if token.type in ("INT", "FLOAT"):
        return f"number {token.value}"
    if token.type == "STRING":
        return f"string {token.value}"
    return f"'{token.value}'"


STATEMENT_START = {"DEF", "FOR", "LOAD", "RETURN", "DRAW", "RBRACE"}


def _summarise(expected: set[str]) -> str:
    parts: list[str] = []
    rest = set(expected)
    if {"DEF", "FOR", "LOAD"} <= rest:
        parts.append("a statement")
        rest -= EXPR_START | STATEMENT_START
    if len(rest & EXPR_START) >= 4:
        parts.append("an expression")
        rest -= EXPR_START
    if len(rest & OPERATORS) >= 3:
        parts.append("an operator")
        rest -= OPERATORS
    for name in ("SEMICOLON", "COMMA", "RPAR", "RSQB", "RBRACE", "COLON", "EQUAL", "ELSE", "IN", "FOR",
                 "LBRACE", "LPAR", "NAME", "STRING", "CMP_OP"):
        if name in rest:
            parts.append(WORDS[name])
            rest.discard(name)
    parts += sorted(f"'{t.lower()}'" for t in rest if t.isalpha() and t.isupper() and len(t) <= 10
                    and t not in ("INT", "FLOAT", "ADD_OP"))[:2]
    if not parts:
        return "something else"
    return ", ".join(parts[:-1]) + (" or " if len(parts) > 1 else "") + parts[-1]


def _previous_token_end(text: str, pos: int) -> tuple[int, int]:
    """1-based (line, col) just after the last token before ``pos`` (skipping blanks and comments)."""
    i = pos - 1
    while i >= 0:
        # skip a comment that ends the line we are on
        line_start = text.rfind("\n", 0, i + 1) + 1
        hash_at = _comment_start(text[line_start:i + 1])
        if hash_at is not None:
            i = line_start + hash_at - 1
            continue
        if text[i].isspace():
            i -= 1
            continue
        break
    if i < 0:
        return 1, 1
    line = text.count("\n", 0, i + 1) + 1
    col = i - (text.rfind("\n", 0, i + 1) + 1) + 2
    return line, col


def _comment_start(line: str) -> int | None:
    in_string = False
    for k, c in enumerate(line):
        if c == '"':
            in_string = not in_string
        elif c == "#" and not in_string:
            return k
    return None


def _word_before(text: str, pos: int) -> tuple[str, int]:
    """The identifier that ends just before ``pos`` (blanks skipped) and where it starts."""
    i = pos
    while i > 0 and text[i - 1].isspace():
        i -= 1
    j = i
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] == "_"):
        j -= 1
    return text[j:i], j


def _position(text: str, start: int) -> tuple[int, int]:
    """1-based (line, col) of the character at offset ``start``."""
    return text.count("\n", 0, start) + 1, start - (text.rfind("\n", 0, start) + 1) + 1


def _draw_is_reserved(text: str, file: str, start: int) -> RaspError:
    line, col = _position(text, start)
    return RaspError("'draw' is reserved: draw(sop[, example]); is a statement of its own, so 'draw' "
                     "cannot be a name or part of an expression", file, line, col, text, width=4)


# the calls the grammar spells out, with what each takes (their extra arguments are syntax errors)
_KEYWORD_CALLS = {
    "select": "3 arguments: select(keys, queries, comparison)",
    "aggregate": "2 or 3 arguments: aggregate(selector, sop) or aggregate(selector, sop, default)",
    "round": "1 argument: round(x)",
    "indicator": "1 argument: indicator(x)",
}


def _innermost_call_keyword(text: str, pos: int) -> str | None:
    """The word just before the innermost unclosed '(' before ``pos`` ("select", "f", …)."""
    stack, _ = scan_brackets(text, pos)
    if not stack or stack[-1].char != "(":
        return None
    lines = text.split("\n")
    before = lines[stack[-1].line - 1][:stack[-1].col - 1].rstrip()
    word = ""
    for c in reversed(before):
        if c.isalnum() or c == "_":
            word = c + word
        else:
            break
    return word or None


@lru_cache(maxsize=1)
def keywords() -> tuple[str, ...]:
    """The grammar's reserved words (``def``, ``for``, ``return``, ``select``…), read from the
    grammar itself so that a keyword added to grammars/rasp.lark is suggested too."""
    from rasp_compiler.lang.parser import grammar

    return tuple(sorted({t.pattern.value for t in grammar().terminals
                         if isinstance(t.pattern, PatternStr) and t.pattern.value.isalpha()}))


def _failure_offset(text: str, err: UnexpectedInput) -> int:
    if isinstance(err, UnexpectedToken):
        return len(text) if err.token.type == "$END" else err.token.start_pos
    return getattr(err, "pos_in_stream", None) or 0


def _parse_reach(text: str) -> float:
    """How far ``text`` parses: the offset of the token it fails at, or infinity if it parses."""
    from rasp_compiler.lang.parser import grammar

    try:
        grammar().parse(text)
    except UnexpectedInput as err:
        return _failure_offset(text, err)
    return math.inf


def _token_end_after(text: str, offset: int) -> int:
    """The end of the token that starts at the first non-blank at or after ``offset``."""
    i = offset
    while i < len(text) and text[i].isspace():
        i += 1
    j = i
    while j < len(text) and (text[j].isalnum() or text[j] == "_"):
        j += 1
    return max(j, i + 1) if i < len(text) else len(text)


def _misspelled_keyword(err: UnexpectedToken, text: str, file: str) -> RaspError | None:
    """``dfe f(x) {``, ``fro x in …``, ``retrun x;``, ``a if c esle b``: a keyword's typo lexes as a
    name, so the parser trips on it or on the token after it and would report a missing ';'.
    The failing name and the name before it are tried: each keyword close to one is put in its
    place, and one is suggested only if the parse then gets past the failing token and the token
    after it (the keyword that parses furthest wins).  So a variable that merely looks like a
    keyword (`fore = 1;` after a missing ';') is not "corrected" into a parse that fails at once."""
    tok = err.token
    at_end = tok.type == "$END"
    failing = len(text) if at_end else tok.start_pos
    candidates: list[tuple[str, int]] = []
    if tok.type == "NAME":
        candidates.append((str(tok.value), tok.start_pos))
    word, start = _word_before(text, failing)
    if word and not word[0].isdigit():
        candidates.append((word, start))
    reserved = keywords()
    best: tuple[float, str, str, int] | None = None
    for name, at in candidates:
        if name in reserved:
            continue
        for kw in difflib.get_close_matches(name, reserved, n=3, cutoff=0.5):
            shift = len(kw) - len(name)
            if abs(shift) > 2:  # no typo: `bogus command` is not `bogus and` ('and' is in 'command')
                continue
            fixed = text[:at] + kw + text[at + len(name):]
            reach = _parse_reach(fixed)
            # past the failing token and the one after it (or to the end of the input)
            failing_fixed = failing + shift if at < failing else failing
            needed = _token_end_after(fixed, _token_end_after(fixed, failing_fixed))
            if reach < len(fixed) and reach < needed or at_end and reach < math.inf:
                continue
            reach -= shift  # back in the original text's offsets, to compare candidates
            if best is None or reach > best[0]:
                best = (reach, name, kw, at)
    if best is None:
        return None
    _, name, kw, at = best
    line, col = _position(text, at)
    hint = f"did you mean '{kw}'?"
    if name == "is":  # Python's `x is 1`: RASP compares values ('in' was suggested)
        hint = "RASP compares values: write '==' (or 'in' to test membership in a list)"
    return RaspError(f"'{name}' is not a RASP keyword, and as a name it cannot stand here",
                     file, line, col, text, width=len(name), hint=hint)


def translate(err: UnexpectedInput, text: str, file: str) -> RaspError:
    """A RaspError in words for a Lark parse error."""
    if isinstance(err, UnexpectedCharacters):
        return _unexpected_character(err, text, file)
    if isinstance(err, UnexpectedToken):
        return _unexpected_token(err, text, file)
    return RaspError("syntax error", file, getattr(err, "line", None), getattr(err, "column", None), text)


def _unexpected_character(err: UnexpectedCharacters, text: str, file: str) -> RaspError:
    c = err.char
    line, col = err.line, err.column
    if c == '"':
        return RaspError("string is not closed on this line (missing '\"')", file, line, col, text)
    nxt = text[err.pos_in_stream + 1:err.pos_in_stream + 2]
    if c == "!":
        return RaspError("'!' on its own is not an operator", file, line, col, text,
                         hint="use '!=' for 'not equal' or 'not' for negation")
    if c in "&|":
        word = "and" if c == "&" else "or"
        return RaspError(f"'{c}{nxt if nxt == c else ''}' is not a RASP operator", file, line, col, text,
                         hint=f"write '{word}'")
    if c == "'":
        return RaspError("strings use double quotes in RASP", file, line, col, text,
                         hint="write \"...\" instead of '...'")
    if c == "~":  # tracr's selector/boolean negation
        return RaspError("'~' is not a RASP operator", file, line, col, text, hint="write 'not'")
    shown = repr(c) if not c.isprintable() or c == " " else f"'{c}'"
    hint = None
    before = text[:err.pos_in_stream].rstrip()
    if c == "." and before[-1:].isidentifier():  # `Comparison.EQ`, `rasp.tokens`: tracr's Python
        hint = _attribute_hint(before, text[err.pos_in_stream + 1:])
    elif c.isidentifier():  # e.g. `café`: the original's names are ASCII too (grammar: [a-zA-Z_])
        hint = "names use only ASCII letters, digits and '_'; other characters may go in \"strings\""
    elif c == "\ufeff":
        hint = "a byte-order mark in the middle of the text: delete it"
    elif c == "?":  # C's `c ? a : b`
        hint = "RASP's conditional is `a if condition else b`"
    return RaspError(f"unexpected character {shown}", file, line, col, text, hint=hint)


# Python statements a tracr user may type, each said in RASP's words (the parser saw a missing ';')
_PYTHON_STATEMENTS = {
    word: (f"RASP has no {word} statement: this looks like Python",
           "load \"name\"; runs a RASP file (name.rasp); tracr-style Python is built with "
           "rasp_compiler.pyapi (docs/python-api.md)") for word in ("import", "from")}
_PYTHON_STATEMENTS["while"] = ("RASP has no while loop",
                               "loop over a list: for i in range(n) { ... } (n known when the line runs)")

# keywords that read as names (`round = 3;`); `and`, `or`, `in`, … fail before the '='
_ASSIGNABLE_LOOKING_KEYWORDS = {"round", "indicator", "select", "aggregate", "def", "return", "for", "load",
                                "not"}

# tracr's Comparison members, as select's bare operator
_COMPARISONS = {"EQ": "==", "NEQ": "!=", "LT": "<", "LEQ": "<=", "GT": ">", "GEQ": ">=",
                "TRUE": "TRUE", "FALSE": "FALSE"}


_WORDS_BEFORE_A_DICT = {"return", "in", "else", "if", "and", "or", "not"}


def _is_block_brace(text: str, b: Bracket) -> bool:
    """Whether the open '{' ``b`` starts a def/for body (`def f(x) {`, `for x in L {`), not a dict.

    A body's '{' follows a finished expression or argument list (')', ']', '}', a string, a name
    or number); a dict's follows an operator, an opener, ',', ':' or a keyword such as `return`."""
    if b.char != "{":
        return False
    start = sum(len(line) + 1 for line in text.split("\n")[:b.line - 1]) + b.col - 1
    before = "\n".join(line.split("#", 1)[0] if '"' not in line else line
                        for line in text[:start].split("\n")).rstrip()  # comments dropped
    if not before:
        return False
    last = before[-1]
    if last in ')]}"':
        return True
    if last.isalnum() or last == "_":
        word = before.split()[-1] if before.split() else ""
        i = len(word)
        while i > 0 and (word[i - 1].isalnum() or word[i - 1] == "_"):
            i -= 1
        return word[i:] not in _WORDS_BEFORE_A_DICT
    return False


def _in_dict_key(text: str, b: Bracket, pos: int) -> bool:
    """Whether ``pos``, inside the dict opened at ``b``, is in a key (no ':' since the last ',')."""
    start = sum(len(line) + 1 for line in text.split("\n")[:b.line - 1]) + b.col
    depth, last, quoted = 0, ",", False
    for c in text[start:pos]:
        if quoted:
            quoted = c != '"'
        elif c == '"':
            quoted = True
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and c in ",:":
            last = c
    return last == ","


def _attribute_hint(before: str, after: str) -> str:
    """What to write instead of a Python attribute (`Comparison.LT`, `rasp.tokens`)."""
    owner = before.split()[-1].split("(")[-1].split(",")[-1]
    member = after.split("(")[0].split(",")[0].split(")")[0].split(";")[0].strip()
    if owner == "Comparison" and member in _COMPARISONS:
        op = _COMPARISONS[member]
        return (f"RASP has no attributes: tracr's Comparison.{member} is select's bare {op}: "
                f"select(keys, queries, {op})")
    return ("RASP has no attributes ('.' only starts a number such as .5); tracr-style Python "
            "is built with rasp_compiler.pyapi (docs/python-api.md)")


def _unexpected_token(err: UnexpectedToken, text: str, file: str) -> RaspError:
    tok = err.token
    expected = set(err.expected or ())
    at_end = tok.type == "$END"
    pos = len(text) if at_end else tok.start_pos
    stack, _ = scan_brackets(text, pos)

    if at_end:
        if stack:
            b = stack[-1]
            return RaspError(f"unclosed '{b.char}': the input ends before its '{OPENERS[b.char]}'",
                             file, b.line, b.col, text)
        line, col = _previous_token_end(text, pos)
        if "SEMICOLON" in expected:
            return RaspError("missing ';' at the end of the statement", file, line, col, text)
        return RaspError(f"the input ends in the middle of a statement; expected {_summarise(expected)}",
                         file, line, col, text)

    line, col = tok.line, tok.column
    width = len(str(tok.value))
    before_text = text[:pos]
    if "COMMA" in expected and {"RPAR", "IN"} <= expected <= {"COMMA", "RPAR", "IN"}:
        # def parameters and for names share one rule: say only what this one can take
        if re.search(r"\bdef\s+\w+\s*\([\w\s,]*$", before_text):
            expected = expected - {"IN"}
        elif re.search(r"\bfor\s+[\w\s,]*$", before_text):
            expected = expected - {"RPAR"}

    if tok.value == "/" and before_text.endswith("/"):  # `a // b`: Python's floor division
        return RaspError("'//' is not a RASP operator", file, line, col - 1, text, width=2,
                         hint="RASP's '/' is true division; for the whole part of a / b write "
                              "(a - a % b) / b")

    if tok.value == "*" and before_text.endswith("*"):  # `a ** b`: Python's power
        return RaspError("'**' is not a RASP operator", file, line, col - 1, text, width=2,
                         hint="RASP writes a power as a ^ b (left-associative: 2 ^ 3 ^ 2 is 64)")

    if expected == {"CMP_OP", "NAME"}:
        return RaspError("select needs a comparison operator (==, !=, <, >, <=, >=, or TRUE / FALSE to "
                         "select every key / none) as its 3rd argument", file, line, col, text, width=width,
                         hint="write it bare, e.g. select(indices, indices, <=)")

    if tok.type == "CMP_OP" and expected & EXPR_START:
        call = _innermost_call_keyword(text, pos)
        if call and call != "select" and difflib.get_close_matches(call, ["select"], n=1, cutoff=0.6):
            # `selct(tokens, tokens, ==)`: a typo of select parses as a call of a function
            # `selector_width(a, b, ==)`: select's arguments given to a function of a selector
            hint = ("did you mean 'select'?" if not call.startswith("select") or len(call) < 9 else
                    f"build the selector first: {call}(select(keys, queries, {tok.value}))")
            return RaspError(f"a bare comparison operator is only select's 3rd argument, and this is "
                             f"a call of '{call}'", file, line, col, text, width=width, hint=hint)

    misspelled = _misspelled_keyword(err, text, file)
    if misspelled is not None:
        return misspelled

    word, start = _word_before(text, pos)
    if expected == {"LPAR"} and word in _KEYWORD_CALLS and tok.type != "EQUAL":  # `select;`: not a value
        wline, wcol = _position(text, start)
        usage = _KEYWORD_CALLS[word].split(": ", 1)[-1]
        return RaspError(f"'{word}' is a RASP keyword, not a value: it is only called, as {usage}", file,
                         wline, wcol, text, width=len(word),
                         hint="to pass it to a function, wrap it in a def of your own that calls it")
    if tok.type in CLOSER_TERMINALS:
        closer = CLOSER_TERMINALS[tok.type]
        if not stack:
            return RaspError(f"unmatched '{closer}': there is no '{CLOSERS[closer]}' for it to close",
                             file, line, col, text)
        opener = stack[-1]
        want = OPENERS[opener.char]
        if closer != want:
            return RaspError(f"'{closer}' does not match the '{opener.char}' opened at line {opener.line}, "
                             f"column {opener.col} (expected '{want}')", file, line, col, text)
        if "SEMICOLON" in expected and closer == "}":
            pline, pcol = _previous_token_end(text, pos)
            return RaspError("missing ';' at the end of the statement", file, pline, pcol, text,
                             hint="every statement in a { … } block ends with ';'")
        if tok.type == "RPAR" and _innermost_call_keyword(text, pos) == "select" and "COMMA" in expected:
            return RaspError("select needs three arguments: select(keys, queries, comparison)",
                             file, line, col, text)
        if tok.type == "RPAR" and _innermost_call_keyword(text, pos) == "aggregate" and "COMMA" in expected:
            return RaspError("aggregate needs a selector and an s-op: aggregate(selector, sop) or "
                             "aggregate(selector, sop, default)", file, line, col, text)
        if expected & EXPR_START and not (expected & {"RPAR", "RSQB", "RBRACE"}):
            return RaspError(f"expected an expression before '{closer}'", file, line, col, text)

    word, start = _word_before(text, pos)
    if word == "lambda" and "\n" not in text[start:pos]:  # tracr-style Python pasted into a .rasp file
        line, col = _position(text, start)
        return RaspError("RASP has no lambda: this looks like tracr-style Python", file, line, col, text,
                         width=len(word), hint="in RASP a map is an expression on the s-op (`tokens == "
                         "\"a\"`, `indices + 1`); Python with lambdas is built with rasp_compiler.pyapi "
                         "(docs/python-api.md)")
    head = text[max(text.rfind(c, 0, start) for c in "\n;}") + 1:start]  # the statement before `word`
    if word in _PYTHON_STATEMENTS and "SEMICOLON" in expected and tok.type == "NAME" \
            and not head.strip() and "\n" not in text[start:pos]:
        # `import foo;`, `from tracr.rasp import rasp`, `while x < 3 {`: Python at a statement's head
        line, col = _position(text, start)
        message, hint = _PYTHON_STATEMENTS[word]
        return RaspError(message, file, line, col, text, width=len(word), hint=hint)
    if "SEMICOLON" in expected:
        pline, pcol = _previous_token_end(text, pos)
        new_line = pline < line
        starts_statement = tok.type in ("NAME", "DEF", "FOR", "LOAD", "RETURN", "DRAW") or new_line
        # at top level, or directly in a def/for body (`r = 3` then `c = length / r;` in a def)
        if starts_statement and (not stack or _is_block_brace(text, stack[-1])):
            return RaspError("missing ';' at the end of the statement", file, pline, pcol, text,
                             hint=f"a statement ends with ';' (the next one starts with {_describe(tok)})")
    if tok.type == "DRAW" and not {"DEF", "FOR", "LOAD"} <= expected:
        return _draw_is_reserved(text, file, tok.start_pos)
    if expected == {"LPAR"} and word == "draw":  # `draw = 1;`, `draw;`
        return _draw_is_reserved(text, file, start)
    if tok.type == "SEMICOLON" and {"DEF", "FOR", "LOAD"} <= expected:
        return RaspError("stray ';': there is no statement for it to end", file, line, col, text)
    if tok.type == "EQUAL" and "EQUAL" not in expected:
        if stack and stack[-1].char == "(" and word:  # `aggregate(s, v, default="-")`
            return RaspError(f"unexpected '=' here: RASP has no keyword arguments (`{word}=`)", file, line,
                             col, text, hint="give the arguments in order, e.g. the default as "
                                             "aggregate's third: aggregate(sel, sop, \"-\")")
        if word in _ASSIGNABLE_LOOKING_KEYWORDS:  # `round = 3;`: not an assignment in the wrong place
            line, col = _position(text, start)
            return RaspError(f"'{word}' is a RASP keyword, so it cannot be assigned", file, line, col, text,
                             width=len(word), hint=f"choose another name, e.g. '{word}_'")
        op = text[pos - 1:pos]
        if op and op in "+-*/%^":  # `x += 1;` ("to compare, write '=='" misled)
            name = _word_before(text, pos - 1)[0] or "x"
            return RaspError(f"RASP has no '{op}=': write the assignment out", file, line, col - 1, text,
                             width=2, hint=f"{name} = {name} {op} ...;")
        return RaspError("unexpected '=' here: assignment is a statement of its own (`name = value;`)",
                         file, line, col, text, hint="to compare, write '=='")
    if tok.type == "COMMA" and "COMMA" not in expected:
        call = _innermost_call_keyword(text, pos)
        if call in _KEYWORD_CALLS:  # `aggregate(s, v, 0, 1)`: "expected ')' or 'in'" did not say it
            return RaspError(f"too many arguments: {call} takes {_KEYWORD_CALLS[call]}", file, line, col,
                             text)
    if tok.type == "SEMICOLON" and stack and not _is_block_brace(text, stack[-1]):
        # a ';' inside a def/for body's '{' is in its place: the statement before it is unfinished
        b = stack[-1]
        return RaspError(f"unclosed '{b.char}' (opened at line {b.line}, column {b.col}) before ';'",
                         file, line, col, text)
    hint = None
    only_else = "ELSE" in expected and not expected & {"SEMICOLON", "COMMA", "RPAR", "RSQB", "RBRACE"}
    if tok.type in ("NAME", "INT", "FLOAT", "STRING") and stack and (
            "COMMA" in expected or "COLON" in expected):
        # two values side by side inside brackets: `def f(a b)`, `[1 2]`, `{"a" 1}`
        if stack[-1].char == "{" and "COLON" in expected and not _is_block_brace(text, stack[-1]) \
                and _in_dict_key(text, stack[-1], pos):
            hint = f"a ':' missing between the key and its value, before {_describe(tok)}?"
        elif "COMMA" in expected:
            hint = f"a ',' missing before {_describe(tok)}?"
    elif tok.type == "IF" and {"DEF", "FOR", "LOAD"} <= expected:  # `if c { … }` as a statement
        hint = "RASP has no if statement: choose a value with `x = a if condition else b;`"
    elif tok.type == "IF" and expected & EXPR_START:  # `x = if c then a else b`
        hint = "RASP's conditional puts the value first: `a if condition else b`"
    elif only_else and re.search(r"\[[^\[\]]*\bfor\b[^\[\]]*\bif\b[^\[\]]*$", before_text):
        hint = ("a comprehension has no `if` filter in RASP (nor in the original): here `if` starts a "
                "conditional, `a if c else b`, which needs its `else`")
    elif only_else:
        hint = "a conditional needs both values: `a if condition else b`"
    elif tok.type == "SEMICOLON" and len(expected & EXPR_START) >= 4:
        before = text[:pos].rstrip()
        word, _ = _word_before(text, pos)
        last = word if word else before[-1:]
        if last:  # `x = tokens +;`, `return a *;`
            hint = f"'{last}' needs a value after it: finish the expression before the ';'"
    return RaspError(f"unexpected {_describe(tok)}; expected {_summarise(expected)}", file, line, col, text,
                     width=width, hint=hint)
