"""Size limits of the analysis: past each, a cheaper and coarser path is taken.

The code reads them as ``limits.NAME`` at call time, so that a test can lower one on this module
to reach the past-the-limit path on a small input.
"""

from __future__ import annotations

# The largest joint domain enumerated for one s-op; beyond it the s-op becomes a base of its own.
DOMAIN_CAP = 120_000
# The domain cap of the "wide tables" strategy (``compiler.plans``), built where such a base
# holds a layer of its own on the best plan's critical path.
WIDE_DOMAIN_CAP = 400_000
# A categorical map of independent inputs tabulated over more joint assignments than this makes
# the compiler build the "large tables opaque" strategy (``compiler.plans``) ...
LARGE_TABLE = 4_096
# ... when the best plan has an MLP of more hidden units than this ...
LARGE_MLP = 2_048
# ... or, at a small max_len, of more than this many hidden units per position.
LARGE_MLP_PER_POSITION = 128
# A map of independent inputs over more joint assignments than this is kept opaque in the first
# plan (the "deferred" strategy of ``compiler.plans``); None turns it off.
# docs/compiler.md ("MLPs", "How the plan is chosen") gives the measurements behind these five.
DEFER_FROM: int | None = 4_096
# A numerical map over more joint assignments than this keeps only its per-position value sets
# (a categorical one from DOMAIN_CAP on, see ``map_info``).
REBASE_SIZE = 40_000
# A map over two or more numerical maps that are bases (opaque) is tabulated up to this many joint
# assignments only, the most the lowering fuses a frontier of several numbers holding maps over
# (the larger of its MULTI_NUMERIC_CAP and OPAQUE_FRONTIER_CAP; a test keeps them in step): past it
# the table serves only a reader fused through the map's own inputs, and building it made the plan
# search build a plain plan that was no shallower.  docs/compiler.md, "How the plan is chosen",
# gives the measurements, what was checked and the one loss found.
OPAQUE_NUMBERS_CAP = 40_000
# The most evaluations of one map on the twins (0 <-> False, 1 <-> True) of its inputs' values
# (``_propagate_bool_number``); past it the map is taken to pass the clash on.
TWIN_CAP = 20_000
# The most evaluations of one map over the per-position value sets of independent inputs
# (``maps._independent_map``): past it the map is refused as too large.  Each product of two
# integer s-ops multiplies their value counts, so a 3 x 3 determinant over -9..9 reaches 10^10.
MOST_MAP_EVALUATIONS = 4_000_000
# The most values the conditional value sets of one mean may list in all (one set per context:
# position and length, each as long as the means its selector's width allows).  Past it the mean
# is taken as unbounded (``aggregates._mean_info``): fine as an output or a mean's value, refused
# (at once, with a located error) where a map or a select reads it.  dyck2 at max_len 2,048 would
# list ~10^9 (minutes of CPU and GB of memory before); see docs/robustness.md.
MAX_CONDITIONAL_VALUES = 20_000_000
