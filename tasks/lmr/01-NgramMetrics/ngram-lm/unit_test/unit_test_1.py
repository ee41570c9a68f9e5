"""The unit test of implementation 1 (perplexity), in LMR-Bench's shape: run from the
repository's folder, it logs "Test Passed" or "Test Failed" to unit_test/logs/."""

import logging
import math
import os
import sys
import unittest
from pathlib import Path

sys.path.append(os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

from lm.metrics import perplexity  # noqa: E402

LOG_DIR = Path(__file__).resolve().parent / "logs"
LOG_DIR.mkdir(parents=True, exist_ok=True)
logging.basicConfig(filename=LOG_DIR / "unit_test_1.log", filemode="w", level=logging.INFO)


class TestPerplexity(unittest.TestCase):
    def test_values(self):
        try:
            lp = [math.log(0.5), math.log(0.25), math.log(0.125)]
            self.assertAlmostEqual(perplexity(lp), 4.0, places=9)
            self.assertAlmostEqual(perplexity([math.log(1 / 27)] * 5), 27.0, places=9)
            self.assertAlmostEqual(perplexity([0.0, 0.0]), 1.0, places=12)
            with self.assertRaises(ValueError):
                perplexity([])
            logging.info("Test Passed")
        except AssertionError as exc:
            logging.info(f"Test Failed: {exc}")
            raise


if __name__ == "__main__":
    unittest.main()
