"""core — what every layer stands on.

The one tree representation (:mod:`~treegen.core.tree`), the model file (:mod:`~treegen.core.model`),
input scaling to the Q15 grid, CSV reading, the PCG32 generator, metrics, errors, progress bars,
output-file helpers, and the two things several layers share: the Jinja environment
(:mod:`~treegen.core.codegen`; the native EFTI engine and the exporters both render templates) and
the target descriptions (:mod:`~treegen.core.targets`; read by export, firmware and HIL), and the
loader of host-compiled C kernels (:mod:`~treegen.core.native`: render, compile with the strict flags,
cache, load; every native engine declares its kernel with it).

Imports nothing from the other layers (learn, emit, device, cli).
"""
