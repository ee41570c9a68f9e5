"""The unit test of implementation 1 (LabelSmoothingLoss.forward), in LMR-Bench's shape: run from
the repository's folder, it logs "Test Passed" or "Test Failed" to unit_test/logs/."""

import logging
import math
import os
import sys
import unittest
from pathlib import Path

sys.path.append(os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

from losses import CrossEntropyLoss, LabelSmoothingLoss  # noqa: E402

LOG_DIR = Path(__file__).resolve().parent / "logs"
LOG_DIR.mkdir(parents=True, exist_ok=True)
logging.basicConfig(filename=LOG_DIR / "unit_test_1.log", filemode="w", level=logging.INFO)

LOG_PROBS = [
    [math.log(0.7), math.log(0.2), math.log(0.1)],
    [math.log(0.25), math.log(0.25), math.log(0.5)],
]
TARGETS = [0, 2]


class TestLabelSmoothingLoss(unittest.TestCase):
    def test_smoothed_loss(self):
        try:
            # -(0.9 ln 0.7 + 0.1 (ln 0.7 + ln 0.2 + ln 0.1) / 3), the same for row 2, averaged
            loss = LabelSmoothingLoss(0.1).forward(LOG_PROBS, TARGETS)
            self.assertAlmostEqual(loss, 0.6013271868938483, places=9)
            plain = CrossEntropyLoss().forward(LOG_PROBS, TARGETS)
            self.assertAlmostEqual(LabelSmoothingLoss(0.0).forward(LOG_PROBS, TARGETS), plain, 12)
            logging.info("Test Passed")
        except AssertionError as exc:
            logging.info(f"Test Failed: {exc}")
            raise


if __name__ == "__main__":
    unittest.main()
