"""Public alias of the fixed-point side of the emit passes (``from treegen.emit.quantize import ...``).

The float -> integer tree and the fixed-point soft vote live in :mod:`treegen.emit.lower_fixed`
(with the scaling and overflow behaviour of the integer trees), the Python model of the generated
C in :mod:`treegen.emit.check`, and how float32 inputs meet the Q15 grid in
:mod:`treegen.emit.lower_f32`.
"""

from __future__ import annotations

from treegen.emit.check import predict_model_q15, predict_q15, proba_q15, soft_sums
from treegen.emit.lower_f32 import f32_below_above, grid_matches_raw, q15_of_raw
from treegen.emit.lower_fixed import (ACC32_LIMIT, INT16_MAX, PROBA_BITS, PROBA_ONE, Q15_MAX, Q15_ONE_FR,
                                      QuantizedTree, SoftVote, quantize_model, quantize_tree, quantize_trees,
                                      soft_vote)

__all__ = ["ACC32_LIMIT", "INT16_MAX", "PROBA_BITS", "PROBA_ONE", "Q15_MAX", "Q15_ONE_FR", "QuantizedTree",
           "SoftVote", "f32_below_above", "grid_matches_raw", "predict_model_q15", "predict_q15", "proba_q15",
           "q15_of_raw", "quantize_model", "quantize_tree", "quantize_trees", "soft_sums", "soft_vote"]
