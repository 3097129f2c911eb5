"""``lira tune-translator``: GRPO tuning of a pool translator on Arca's reward (beyond the paper).

``config`` (``tune_translator.*``), ``reward`` (Arca's composite reward for a translation),
``grpo`` (TRL wiring) and ``engine`` (the run). Which translator is tuned and the tuned one's
pool entry are :mod:`lira.translation.tuning`'s, in the core, as the evaluation of a tuned
translator (:mod:`evaluators.translators`) reads them and imports no Arca.
"""
