"""Baseline losses from the four comparison papers, one file per paper.

- :mod:`~lira.baselines.infonce`: InfoNCE / multiple-negatives ranking (common baseline).
- :mod:`~lira.baselines.clear`: CLEAR reverse training (paper 000).
- :mod:`~lira.baselines.composition` + :mod:`~lira.baselines.merging`: D(l1 l2 l3) language
  compositions, GIST guided loss and weight-averaged merging (paper 001).
- :mod:`~lira.baselines.lancer`: LANCER language-concept erasure (paper 002).
- :mod:`~lira.baselines.jsd`: JSD alignment + reversed InfoNCE (paper 003).
- :mod:`~lira.baselines.contrastive`: the one contrastive trainer (a :class:`lira.training.Trainer`);
  :mod:`~lira.baselines.engine` the ``lira baseline`` engine; :mod:`~lira.baselines.data` its training rows, mined
  negatives and recipes; :mod:`~lira.baselines.export` the saved, loadable baseline folders
  and their run fingerprint.
- :mod:`~lira.baselines.method` + :mod:`~lira.baselines.registry`: what a method is (recipe,
  data, batches, loss; each paper's file defines its ``METHOD``) and the name -> method table
  (:mod:`~lira.baselines.names`, which imports nothing).
- :mod:`~lira.baselines.recipes`: each paper's recipe dataclass (no torch: a config loads
  without the methods); :mod:`~lira.baselines.config`: ``baselines.*`` (the shared budget) and
  the recipe sections ``baselines.<method>.*``. Adding a baseline is one new file plus one line
  in ``names.METHODS`` (and its recipe, if any, in ``recipes.RECIPES``).

The methods (``baselines.methods``; ``lira baseline CONFIG [--methods ...]`` trains each):

- ``infonce`` (CLEAR's baseline, paper 000 §4.2): target query -> English gold sentence,
  in-batch + the same hard negatives as CLEAR, CLEAR's recipe.
- ``clear``: CLEAR's loss with 5 hard negatives sampled from ranks 30-100 of the initial
  model's retrieval, for passages and target-language queries.
- ``lancer`` (paper 002): English InfoNCE + λ·L_C on a multilingual batch of non-parallel
  sentences per language.
- ``jsd`` (paper 003): L_JSD(p_en, p_tgt) + L_NCE(anchor p_tgt, positive q_en, in-batch
  English queries).
- ``merging`` (paper 001): the D(l en en) fine-tune (GIST loss, App. B.2 negatives)
  weight-averaged with the base model or a D(en en en) fine-tune.

Departures, where a paper's setting cannot be had here or is not stated: the retriever that
mines negatives and paper 001's GIST guide are the initial backbone (the papers use each
model itself for CLEAR, NV-Embed-v2 and bge-m3 for paper 001, not available offline); paper
001's sixth, LLM-generated negative has no counterpart; one model is trained on all training
languages with every question in each (CLEAR's multilingual expansion uses non-overlapping
questions per language); LANCER scores with cosine / τ (its retrievers score unnormalised
dot products, ours output unit vectors); paper 003's learning rate is per backbone (App. C),
the default is its mE5-large value; the maximum length is ``models.backbone_max_length`` for
every method (CLEAR: 512).
"""
