"""Entry point: `python runner.py COMMAND ...` (see `python runner.py --help`)."""

import sys

from engine.commands import main

if __name__ == "__main__":
    sys.exit(main())
