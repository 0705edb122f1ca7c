"""JSON-native values: numpy scalars and arrays inside metadata and reports made plain Python, without
importing numpy (a command that never imported it holds no numpy value), so that writing a JSON
report costs no numerical import."""

from __future__ import annotations

import math
import sys


def plain(obj):
    """Convert numpy scalars/arrays inside metadata to JSON-native values."""
    np = sys.modules.get("numpy")
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if np is not None:
        if isinstance(obj, np.ndarray):
            return plain(obj.tolist())
        if isinstance(obj, np.integer):
            return int(obj)
        if isinstance(obj, np.floating):
            obj = float(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
