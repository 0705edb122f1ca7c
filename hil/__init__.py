"""treegen's hardware-in-the-loop test suite (pytest, marker ``hil``); see hil/README.md.

A package so that ``hil/conftest.py`` does not clash with ``tests/conftest.py`` (pytest gives
conftest files outside packages the same module name ``conftest``).
"""
