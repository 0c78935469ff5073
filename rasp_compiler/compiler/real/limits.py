"""Tolerances and limits of numerical compilation: the error a piecewise-linear map aims for, the
rounding an exact unit may carry, and how far rounded softmax scores may move weights.  (The score
gap of hard attention is the categorical compiler's, ``assemble.GAP``.)

The modules that use them import them by name: a test that changes one patches the module that
reads it.
"""

from __future__ import annotations

# interpolation error a piecewise-linear map aims for, relative to max(1, |f|): finer knots would
# cost more units than the dtype's own rounding of their sum gives back
APPROX_TARGET = {"float32": 1e-5, "float64": 1e-6}
# most segments of a piecewise-linear unit: where these do not reach APPROX_TARGET, the stated
# bound is larger instead
MAX_SEGMENTS = 4096
# Rounding allowance of an "exact" unit, relative to max(1, |value|): a few ulps of a few operations.
EXACT_TOL = {"float32": 1e-5, "float64": 1e-10}
# The unit roundoff u of each dtype. A head averaging n values rounds like a float sum of n terms,
# whose error bound is about n·u of the largest; the check allows ROUNDING_PER_TERM·n·u on top of
# EXACT_TOL (a product after the mean doubles its relative error: float32 means over 512 values
# were 1.5e-5 off, over the fixed 1e-5)
UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float64": 2.0 ** -53}
ROUNDING_PER_TERM = 4
# A softmax head's scores are rounded to the dtype, and the rounding moves its weights by up to
# e^(2 * drift): past this factor - 1 the model no longer computes the program's softmax at all.
MAX_WEIGHT_DRIFT = 0.01
# An input of a model compiled with a grid (``--input-grid``, integer tokens) may sit this many
# units of roundoff (of the larger of its size and the step) off its grid point: a decimal such as
# 0.37 is no binary fraction, and rounded to float32 it moves by up to half an ulp.
GRID_SLACK_ULPS = 4
# Grids whose step needs a larger denominator than this are taken as no grid (a coefficient such as
# 1/3 rounded to a float makes every later step a huge fraction that no margin can use).
MAX_GRID_DENOMINATOR = 10 ** 12
# A reciprocal (``reciprocal``) aims for this relative error: 16 units of roundoff.
RECIP_TARGET = {"float32": 2.0 ** -20, "float64": 2.0 ** -49}
# ... with at most this many knots for its first guess; past them it takes one more Newton step.
MAX_RECIP_KNOTS = 512
# ... and weighs a Newton step's two layers as this many hidden units when it chooses between
# fewer knots and more steps (float64 over [0.25, 4,374]: 3 steps and 80 knots, not 2 and 993).
RECIP_LAYER_UNITS = 64
