"""The trainers' shared accelerate setup: trackers from ``report_to`` and a clear error."""

from __future__ import annotations

import importlib.util

import pytest
from accelerate import Accelerator
from accelerate.tracking import GeneralTracker

from lira.config import ConfigError
from lira.training import log_metrics, make_accelerator


class Recorder(GeneralTracker):
    """An in-memory accelerate tracker."""

    name = "recorder"
    requires_logging_directory = False

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[dict, int]] = []

    @property
    def tracker(self) -> Recorder:
        return self

    def store_init_configuration(self, values: dict) -> None:
        pass

    def log(self, values: dict, step: int | None = None, **kwargs) -> None:
        self.rows.append((values, step))


def test_log_metrics_sends_the_numeric_terms_to_the_trackers():
    rec = Recorder()
    acc = Accelerator(cpu=True, log_with=[rec])
    acc.init_trackers("test")
    log_metrics(acc, {"loss": 0.5, "step": 3, "selection": {"a": 1.0}, "note": "x"}, 3)
    assert rec.rows == [({"loss": 0.5, "step": 3.0}, 3)]


def test_no_tracker_by_default(tmp_path):
    acc = make_accelerator("lasr", "none", tmp_path)
    assert not acc.trackers
    log_metrics(acc, {"loss": 1.0}, 1)  # a no-op, no error


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is not None, reason="installed")
def test_a_missing_tracker_package_is_a_config_error_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"lasr\.report_to.*pip install tensorboard"):
        make_accelerator("lasr", "tensorboard", tmp_path)
