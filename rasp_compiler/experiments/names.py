"""The experiment grid's vocabulary: backbones and architectures (no torch, so the CLI stays light)."""

BACKBONES = ("sparse", "random", "trained")
ARCHES = ("attn", "attn-res-ln", "attn-res-ln-mlp")
SPARSE_CONSTRUCTIONS = ("auto", "A", "C", "paths")   # auto: A for attn, C otherwise
PRECISIONS = ("fp32", "bf16")     # of the training matmuls (bf16: autocast, fp32 weights)
CHECKPOINT_MINUTES = 5.0     # a run's resume state is saved at least this often (wall time)
