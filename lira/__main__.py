"""``python -m lira`` = the ``lira`` command, whose code is the entry floor :mod:`pipeline.cli`."""

from pipeline.cli import main  # the one import up a floor (tests/test_layering.py)

if __name__ == "__main__":
    raise SystemExit(main())
