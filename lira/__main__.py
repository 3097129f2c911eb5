"""``python -m lira`` = the ``lira`` command."""

from lira.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
