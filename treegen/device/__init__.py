"""device — everything that builds for, runs on or talks to a microcontroller.

Offline PlatformIO projects (:mod:`~treegen.device.platformio`), QEMU boards
(:mod:`~treegen.device.emulator`), the firmware harness (:mod:`~treegen.device.firmware`), the serial
protocol client (:mod:`~treegen.device.protocol`), hardware-in-the-loop checks
(:mod:`~treegen.device.hil`) and on-device training (:mod:`~treegen.device.train_firmware`: the
engine generated for a device; :mod:`~treegen.device.train_hil`: training there, checked against
the host).

Imports :mod:`treegen.core`, :mod:`treegen.learn` and :mod:`treegen.emit`; never :mod:`treegen.cli`.
Nothing here prints for humans or decides exit codes.
"""
