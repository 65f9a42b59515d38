"""python -m amanda: the amanda command (amanda.cli), for when the script is not on PATH."""

import sys

from amanda.cli import main

if __name__ == "__main__":  # importing this module (doctest collection) runs nothing
    sys.exit(main())
