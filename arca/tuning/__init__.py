"""``lira tune-translator``: GRPO tuning of a pool translator on Arca's reward (beyond the paper).

``config`` (``tune_translator.*``), ``translators`` (which translator is tuned, the tuned one's
pool entry), ``reward`` (Arca's composite reward for a translation), ``grpo`` (TRL wiring) and
``engine`` (the run). Its evaluation is :mod:`evaluators.translators`.
"""
