"""The universal simulator U of one attention layer (Dutta et al.): generated, compiled, checked.

    from rasp_compiler.simulator import build_simulator, SequenceLayout
    sim = build_simulator(n=4, d=4, heads=2, dtype="float64")
    T = sim(A, V, X)                   # A, V: [H, d, d]; X: [n, d]  ->  [n, H*d]
    seq = sim.layout.build(A, V, X)    # U's input sequence (see layout.py)
    print(sim.source)                  # U's RASP program
"""

from rasp_compiler.simulator.build import Simulator, build_simulator, load_simulator
from rasp_compiler.simulator.check import check_simulator
from rasp_compiler.simulator.layout import SequenceLayout
from rasp_compiler.simulator.reference import attention_layer, softmax_rows
from rasp_compiler.simulator.source import generate_source

__all__ = ["SequenceLayout", "Simulator", "attention_layer", "build_simulator", "check_simulator",
           "generate_source", "load_simulator", "softmax_rows"]
