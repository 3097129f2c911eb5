"""Baseline losses from the four comparison papers, one file per paper.

- :mod:`~lira.baselines.infonce`: InfoNCE / multiple-negatives ranking (common baseline).
- :mod:`~lira.baselines.clear`: CLEAR reverse training (paper 000).
- :mod:`~lira.baselines.composition` + :mod:`~lira.baselines.merging`: D(l1 l2 l3) language
  compositions, GIST guided loss and weight-averaged merging (paper 001).
- :mod:`~lira.baselines.lancer`: LANCER language-concept erasure (paper 002).
- :mod:`~lira.baselines.jsd`: JSD alignment + reversed InfoNCE (paper 003).
- :mod:`~lira.baselines.trainer`: the one contrastive trainer (a :class:`lira.training.Trainer`)
  and the ``lira baseline`` engine; :mod:`~lira.baselines.data` its training rows, mined
  negatives and recipes; :mod:`~lira.baselines.export` the saved, loadable baseline folders.
- :mod:`~lira.baselines.method` + :mod:`~lira.baselines.registry`: what a method is (recipe,
  data, batches, loss; each paper's file defines its ``METHOD`` and its recipe dataclass) and
  the name -> method table.
- :mod:`~lira.baselines.config`: ``baselines.*`` (the shared budget) and the recipe sections
  ``baselines.<method>.*`` it finds in the registry. Adding a baseline, recipe included, is one
  new file plus one line in ``registry.METHODS``.
"""
