"""emit — turning a model into something else: fixed-point integers, C, text.

Quantisation and the Python model of the generated C (:mod:`~treegen.emit.quantize`), the C exporter
(:mod:`~treegen.emit.export`), importers of other libraries' trees (:mod:`~treegen.emit.importers`)
and text/Graphviz views (:mod:`~treegen.emit.show`).

Imports only :mod:`treegen.core`; a peer of :mod:`treegen.learn` (neither imports the other).
"""
