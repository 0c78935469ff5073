"""The RASP language front end: parsing, syntax errors in words, elaboration to a program graph."""

from rasp_compiler.interpreter import evaluate, run
from rasp_compiler.lang.elaborator import Session, load_program, program_from_source
from rasp_compiler.lang.parser import parse_source

__all__ = ["Session", "evaluate", "load_program", "parse_source", "program_from_source", "run"]
