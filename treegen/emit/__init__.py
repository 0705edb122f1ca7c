"""emit — turning a model into something else: fixed-point integers, C, text.

The C exporter (:mod:`~treegen.emit.export`) is a sequence of passes with one product each:
options checked (:mod:`~treegen.emit.options`) -> lowered to a per-dtype description
(:mod:`~treegen.emit.lower`, with :mod:`~treegen.emit.lower_fixed` and :mod:`~treegen.emit.lower_f32`)
-> checked by the Python predictors the C must equal (:mod:`~treegen.emit.check`) -> a template
context (:mod:`~treegen.emit.contexts`) -> library files (:mod:`~treegen.emit.library`) -> sizes
(:mod:`~treegen.emit.size`) -> a report (:mod:`~treegen.emit.report`). :mod:`~treegen.emit.quantize`
is the public alias of the fixed-point side. Also: text/Graphviz views (:mod:`~treegen.emit.show`,
:mod:`~treegen.emit.plot`).

Imports only :mod:`treegen.core`; a peer of :mod:`treegen.learn` and :mod:`treegen.importers` (the two
ways a model comes into being; none of the three imports another).
"""
