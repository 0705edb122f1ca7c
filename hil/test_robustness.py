"""The bundled robustness checks (:mod:`treegen.hil.test_robustness`: garbage, bad CRC, unknown
command, oversized LEN, bad payloads, a truncated frame -> the documented ERROR frames and the device
keeps answering; a wrong model -> one clear error), run here once per target (first model case)."""

from __future__ import annotations

import pytest

from treegen.hil.test_robustness import (test_bad_crc_gives_error_bad_crc,  # noqa: F401
                                         test_garbage_is_skipped_and_the_next_frame_answered,
                                         test_inconsistent_payloads_give_error_bad_payload,
                                         test_oversized_len_gives_error_bad_length_at_once,
                                         test_truncated_frame_is_flushed_and_the_device_recovers,
                                         test_unknown_command_gives_error_unknown_type,
                                         test_wrong_model_on_the_device_is_one_clear_error)

pytestmark = [pytest.mark.hil, pytest.mark.hil_only(first_case=True)]
