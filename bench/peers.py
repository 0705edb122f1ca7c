"""What the peer benchmarks share (bench/codegen_vs_peers.py, bench/import_exactness.py): the C of
the peer code generators (emlearn, m2cgen, micromlgen) for one scikit-learn model behind the bench
driver's ``TG_PREDICT`` interface, C literals of input rows, and tool versions."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

#: C type of the bench driver's input rows, per input kind
C_TYPES = {"q15": "int16_t", "int16": "int16_t", "float": "float", "double": "double"}


def peer_c(impl: str, est, name: str, n_features: int, out: Path) -> tuple[list[Path], str, list[str]]:
    """Write a peer's C for ``est`` into ``out``; return (sources, bench_config.h text, extra cflags).
    ``impl``: ``emlearn-int16``, ``emlearn-float``, ``m2cgen-double`` or ``micromlgen-float``."""
    if impl.startswith("emlearn"):
        import emlearn

        dtype = "int16_t" if impl == "emlearn-int16" else "float"
        code = emlearn.convert(est, method="inline", dtype=dtype).save(name=f"eml_{name}", include_proba=False)
        (out / "eml_model.c").write_text(code)
        config = (f"#include <stdint.h>\n#define TG_INPUT_T {dtype}\n#define TG_N_FEATURES {n_features}\n"
                  f"int32_t eml_{name}_predict(const {dtype} *features, int32_t features_length);\n"
                  f"#define TG_PREDICT(x) eml_{name}_predict((x), TG_N_FEATURES)\n")
        return [out / "eml_model.c"], config, []
    if impl == "m2cgen-double":
        import m2cgen

        n_classes = len(est.classes_)
        code = m2cgen.export_to_c(est)
        wrapper = (
            "\n/* bench wrapper: class index = argmax of m2cgen's class probabilities (ties -> lowest) */\n"
            "int m2c_predict(const double *x)\n{\n"
            f"    double out[{n_classes}];\n    int best = 0;\n"
            "    score((double *)x, out);\n"
            f"    for (int i = 1; i < {n_classes}; i++)\n        if (out[i] > out[best])\n            best = i;\n"
            "    return best;\n}\n")
        (out / "m2c_model.c").write_text(code + wrapper)
        config = (f"#define TG_INPUT_T double\n#define TG_N_FEATURES {n_features}\n"
                  "int m2c_predict(const double *x);\n#define TG_PREDICT(x) m2c_predict(x)\n")
        return [out / "m2c_model.c"], config, []
    if impl == "micromlgen-float":
        from micromlgen import port

        # <cstdarg> (unused by the code) is not shipped for arm-none-eabi here (no C++ runtime): <stdarg.h>
        code = port(est).replace("#include <cstdarg>", "#include <stdarg.h>")
        cls = "RandomForest" if hasattr(est, "estimators_") else "DecisionTree"
        (out / "mm_model.cpp").write_text(
            "#include <stdint.h>\n" + code +
            f"\nstatic Eloquent::ML::Port::{cls} mm_clf;\n"
            'extern "C" int mm_predict(const float *x) { return mm_clf.predict(const_cast<float *>(x)); }\n')
        config = (f"#define TG_INPUT_T float\n#define TG_N_FEATURES {n_features}\n"
                  "int mm_predict(const float *x);\n#define TG_PREDICT(x) mm_predict(x)\n")
        return [out / "mm_model.cpp"], config, ["-fno-exceptions", "-fno-rtti", "-w"]
    raise ValueError(impl)


def c_literal(v, kind: str) -> str:
    """One input value as a C literal of the driver's input type (exact: hex floats)."""
    if kind in ("q15", "int16"):
        return str(int(v))
    if kind == "float":
        return float(np.float32(v)).hex() + "f"
    return float(v).hex()


def tool_version(cmd: list[str]) -> str:
    """First line of a tool's ``--version`` output ('?' when it cannot be run)."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0].strip()
    except (OSError, IndexError):
        return "?"


def git_commit(repo: Path) -> str:
    """The commit of the checkout at ``repo`` that produced a result (``<hash>+uncommitted`` when its
    tracked files differ from that commit; '?' outside a git checkout)."""
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return (head + ("+uncommitted" if dirty else "")) if head else "?"
