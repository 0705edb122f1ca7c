"""Hardware in the loop as a pytest plugin: fixtures for a device running a treegen model, and the
bundled checks (``pytest --pyargs treegen.hil --treegen-target T --treegen-model M``).

The layer above :mod:`treegen.device` (beside :mod:`treegen.cli`): :mod:`~treegen.hil.plugin` is the
plugin (entry point ``pytest11``: options ``--treegen-*``, fixtures ``treegen_device``,
``treegen_model``, ...), :mod:`~treegen.hil.devices` builds, starts and connects to devices for
tests, :mod:`~treegen.hil.cases` pairs a model with the rows sent to the device, and ``test_*.py``
are the checks. Nothing here is imported by ``import treegen``; pytest loads the plugin, which
imports the rest of treegen only when a test asks for a treegen fixture.
"""
