"""Test-run settings shared by every module."""

import torch

# One intra-op thread: the tests run many small models, where extra threads only spin (on a
# machine with many cores they tripled the run's CPU time), and the engineers' runs share the cores.
# Several modules set this at import too; here it holds for any subset of the suite.
torch.set_num_threads(1)
