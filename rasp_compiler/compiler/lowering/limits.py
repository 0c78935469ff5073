"""Size limits of the lowering: past each, a map, a head or a selector side takes another form.

The code reads them as ``limits.NAME`` at call time, so that a test can lower one on this module
to reach the past-the-limit path on a small input.
"""

from __future__ import annotations

# A quadratic score block's largest score over its lead of 1, times the dtype's epsilon, above
# which it is not used (``Lowering._quadratic``): the rounding of a score is a few epsilons of its
# size, and it must stay under a quarter of the lead.  Measured in float32: keys i^2 and i^3 first
# picked a wrong key at 2.5 (squares at N = 68, cubes at N = 18), ten times this.
QUADRATIC_ROUNDING = 1 / 4
# Most hidden units one fused map may use before it falls back to reading its direct inputs.
UNIT_CAP = 40_000
# ... and in the compiler's plan with a wider domain cap (analysis.limits.WIDE_DOMAIN_CAP), tried
# only where a map past DOMAIN_CAP lies on the critical path: the paper's Dyck-2 at max_len 64
# fuses `delay_closer` over its two means, the index and the token in 42,118 units (4 layers).
WIDE_UNIT_CAP = 80_000
# Fusing a function of several numerical inputs is tried first over this many joint assignments,
MULTI_NUMERIC_CAP = 6_000
# and, when nothing else avoids reading the direct inputs (which costs a layer), over this many
# (the analysis has tabulated them already, up to its DOMAIN_CAP).  The original paper's Dyck-1,
# with separate means of openers and closers, has 87,000 at max_len 64: fused, it keeps 2 layers
# (127,657 parameters); unfused, its balance and sign cost three more layers (12.3M parameters).
MULTI_NUMERIC_LAST_CAP = 120_000
# ... and over at most this many where the frontier holds opaque maps, whose fused tables may
# still find no separating projection after they are built: tracr's shuffle-Dyck-2 at max_len 40
# built 91,880 rows to no avail, 2.3 s of a compile that takes 0.5 s with this cap, in the same
# 4 layers (102,131 parameters against 79,899).
OPAQUE_FRONTIER_CAP = 40_000
# Rows of a map tabulated on a split width's part heads and its other inputs (``_through_parts``):
# (N+1)^2/2 splits times the other inputs' values, e.g. 137k at N = 64 with the index; the step
# MLP merges the index values that share a table, so the units stay O(N).
THROUGH_PARTS_CAP = 480_000
# A selector side with at least this many values is read through its classes of values that
# select alike, when there are at most half as many (``Lowering._quotient``).
QUOTIENT_MIN = 16
# Most values a joint (tuple) one-hot read by a selector may have.
MAX_TUPLE = 1 << 14
# Largest query x key score table of one selector block (a bool matrix, then W_Q / W_K).
MAX_BLOCK = 1 << 26
# Most rows a map fused over the product of its inputs' value sets may have (``_product_inputs``).
PRODUCT_CAP = 4_096
