"""Which compile notes concern the answers, and how the Python API shows them.

The compiler writes its notes into the config (``config["notes"]``), and ``rasp compile`` prints
them in its summary.  A Python caller of ``compile_program`` saw them only by printing
``summary()``, so a float32 output past 2^24 (answers that may differ from the interpreter's)
passed in silence.  The notes that say a model's answer may differ from the interpreter's, or
that some inputs have no answer, are now also raised as ``CompileWarning``s; the others (how a
mean is kept, which plan integer tokens took) stay in the summary.

The phrases below are written into those notes by their producers (``assemble``,
``analysis/aggregates``), so that the text of a note and the rule that picks it cannot drift apart.
"""

from __future__ import annotations

import os
import sys
import warnings

from rasp_compiler.errors import CompileWarning

# a numerical output past the integers the dtype holds: outputs may differ from the interpreter
PAST_EXACT_INTEGERS = "stops holding every integer"
# a map or select that raises on some values, or lengths at which the output has no value
NO_ANSWER = "have no answer"
MORE_RAISING = "more maps or selects that raise on some values"
# a categorical aggregate that may average several (non-numeric) values
SEVERAL_KEYS = "the interpreter rejects such inputs"

ANSWER_PHRASES = (PAST_EXACT_INTEGERS, NO_ANSWER, MORE_RAISING, SEVERAL_KEYS)

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def answer_notes(notes: list[str]) -> list[str]:
    """The notes (of ``config["notes"]``) that concern the model's answers."""
    return [note for note in notes if any(phrase in note for phrase in ANSWER_PHRASES)]


def warn_about_answers(notes: list[str]) -> None:
    """One ``CompileWarning`` per note that concerns the answers, attributed to the first caller
    outside this package (the user's ``compile_program`` line, also through ``pyapi``)."""
    chosen = answer_notes(notes)
    if not chosen:
        return
    level = _first_outside_package()
    for note in chosen:
        warnings.warn(f"compile note: {note}", CompileWarning, stacklevel=level)


def _first_outside_package() -> int:
    """The ``stacklevel`` of ``warn_about_answers``'s nearest caller outside ``rasp_compiler``."""
    frame, level = sys._getframe(1), 2  # level 2: the caller of warn_about_answers
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level - 1
