"""``python -m treegen``: the same command line as the ``treegen`` console script."""

import sys

from treegen.cli import main

if __name__ == "__main__":
    sys.exit(main())
