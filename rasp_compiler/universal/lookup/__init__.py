"""The lookup universal transformer: one fixed backbone per size class runs every compiled RASP
program of the class, MLPs included; the program enters only as input embeddings and program
tokens placed before the input (docs/universal.md, "Programs with MLPs").

    parts, codes, tables, needs = analyse(model)          # a model compiled in this process
    size = smallest_holding(needs)
    backbone = build_backbone(size)                       # depends on the class only
    enc = encode_program(model, size, backbone.sha256, (parts, codes, tables, needs))
    logits = backbone(enc.program_tokens, enc.embed(ids))

Modules, one job each: ``size_class`` (the classes and which holds a program), ``layout`` (the
stream's columns), ``backbone`` (the fixed weights, their files), ``parts`` (a compiled model as
sources and consumers), ``tables`` (the lookup tables), ``encoding`` (the program's embeddings and
tokens, their files), ``run`` (checking against the compiled model and the interpreter).
"""
