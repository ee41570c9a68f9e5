"""`python -m pytest_super.cli`: the `pytest-super` command."""

import sys

from pytest_super.cli import main

if __name__ == "__main__":
    sys.exit(main())
