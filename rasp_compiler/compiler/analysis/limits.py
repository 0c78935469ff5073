"""Size limits of the analysis: past each, a cheaper and coarser path is taken.

The code reads them as ``limits.NAME`` at call time, so that a test can lower one on this module
to reach the past-the-limit path on a small input.
"""

from __future__ import annotations

# The largest joint domain enumerated for one s-op; beyond it the s-op becomes a base of its own.
DOMAIN_CAP = 120_000
# Where such a base lies on the first plan's critical path, the compiler builds a second plan that
# enumerates joint domains up to this size and keeps it if it has fewer layers (``compiler.
# _weights``): the paper's Dyck-2 at max_len 64, whose `delay_closer` has 374,656 assignments,
# has 4 layers (59.0M parameters, a 14 s compile) instead of 5 (53.4M, 7 s).
WIDE_DOMAIN_CAP = 400_000
# A categorical map of independent inputs tabulated over more joint assignments than this makes
# the compiler weigh a second plan, with such maps opaque (``compiler._weights``): the table fuses
# into its readers and may save a layer, or cost a thousand times the parameters for none.
LARGE_TABLE = 4_096
# ... when the first plan has an MLP of more hidden units than this (the shipped classics stay
# below it up to max_len 64: dyck2's widest is 1,666), so that their compile time is not doubled.
LARGE_MLP = 2_048
# ... or, at a small max_len, of more than this many hidden units per position: shuffle-Dyck-2
# written with booleans fuses its large table into 1,865 units at max_len 8 (926,901 parameters,
# against 12,328 with the table opaque), under LARGE_MLP once its two means are stepped along
# their difference first (``numeric.projection``).
LARGE_MLP_PER_POSITION = 128
# A map of independent inputs over more joint assignments than this is kept opaque in the first
# plan, and tabulated (up to DOMAIN_CAP) in a second one only where the first has more layers than
# its heads need (``compiler._plan``): a table this large costs most of a compile, and where no
# layer is saved it only widens the MLPs that read it (dyck2 at max_len 16 to 56).
# None turns it off.  At 4,096 it changes dyck2 at max_len 16-56 and the paper's Dyck-2 at 8-24,
# all smaller at 4 layers (weights_fingerprint: 6 of 270 shipped cells, 3 of 40 paper cells); at
# 40,000 only dyck2 at 40-56 and the paper's Dyck-2 at 24 (docs/compiler.md, MLPs, "Deferred
# tables").
DEFER_FROM: int | None = 4_096
# A numerical map over more joint assignments than this keeps only its per-position value sets
# (a categorical one from DOMAIN_CAP on, see ``map_info``).
REBASE_SIZE = 40_000
# The most evaluations of one map on the twins (0 <-> False, 1 <-> True) of its inputs' values
# (``_propagate_bool_number``); past it the map is taken to pass the clash on.
TWIN_CAP = 20_000
# The most evaluations of one map over the per-position value sets of independent inputs
# (``maps._independent_map``): past it the map is refused as too large.  Each product of two
# integer s-ops multiplies their value counts, so a 3 x 3 determinant over -9..9 reaches 10^10.
MOST_MAP_EVALUATIONS = 4_000_000
