"""The lookup universal transformer: one fixed backbone per size class runs every compiled RASP
program of the class, MLPs included; the program enters only as input embeddings and program
tokens placed before the input (docs/universal.md, "Programs with MLPs: the lookup UT").

    from rasp_compiler.universal.lookup import (analyse, build_backbone, encode_program, logits,
                                                smallest_holding)
    analysed = analyse(model)                       # a model compiled in this process, in float64
    size = smallest_holding(analysed.needs)         # a ladder class (small, medium, large) or fitted
    backbone = build_backbone(size)                 # depends on the class only
    enc = encode_program(model, size, backbone.sha256, analysed)
    y = logits(backbone, enc, ids)     # ids = model.encode(batch)[0]; BOS first; == the model's

Modules, one job each: ``size_class`` (the classes and which holds a program), ``layout`` (the
stream's columns), ``backbone`` (the fixed weights, their files), ``parts`` (a compiled model as
sources and consumers), ``tables`` (head codes and lookup tables), ``encoding`` (the program's
embeddings and tokens, their files), ``run`` (checking against the compiled model and the
interpreter), ``batch`` (several programs through one backbone: what the command line runs).
"""

from rasp_compiler.universal.lookup.backbone import LookupBackbone, build_backbone
from rasp_compiler.universal.lookup.encoding import ProgramEncoding, analyse, encode_program
from rasp_compiler.universal.lookup.run import ProgramRun, logits, run_program
from rasp_compiler.universal.lookup.size_class import LADDER, SizeClass, fitted, parse_class, smallest_holding

__all__ = ["LADDER", "LookupBackbone", "ProgramEncoding", "ProgramRun", "SizeClass", "analyse",
           "build_backbone", "encode_program", "fitted", "logits", "parse_class", "run_program",
           "smallest_holding"]
