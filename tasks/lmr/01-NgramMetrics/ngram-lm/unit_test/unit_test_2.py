"""The unit test of implementation 2 (bits per character), in LMR-Bench's shape: run from the
repository's folder, it logs "Test Passed" or "Test Failed" to unit_test/logs/."""

import logging
import math
import os
import sys
import unittest
from pathlib import Path

sys.path.append(os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

from lm.metrics import bits_per_char  # noqa: E402

LOG_DIR = Path(__file__).resolve().parent / "logs"
LOG_DIR.mkdir(parents=True, exist_ok=True)
logging.basicConfig(filename=LOG_DIR / "unit_test_2.log", filemode="w", level=logging.INFO)


class TestBitsPerChar(unittest.TestCase):
    def test_values(self):
        try:
            lp = [math.log(0.5), math.log(0.25), math.log(0.125)]
            self.assertAlmostEqual(bits_per_char(lp), 2.0, places=9)
            self.assertAlmostEqual(bits_per_char([math.log(1 / 256)] * 3), 8.0, places=9)
            self.assertAlmostEqual(bits_per_char([0.0]), 0.0, places=12)
            with self.assertRaises(ValueError):
                bits_per_char([])
            logging.info("Test Passed")
        except AssertionError as exc:
            logging.info(f"Test Failed: {exc}")
            raise


if __name__ == "__main__":
    unittest.main()
