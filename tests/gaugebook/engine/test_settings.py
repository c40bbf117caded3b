import pytest
import torch

import gaugebook
import gaugekit
from gaugebook.engine import settings as config


def test_package_imports_with_version():
    assert gaugekit.__version__ == "0.1.0"


def test_scale_defaults_to_quick(monkeypatch):
    monkeypatch.delenv(config.SCALE_ENV, raising=False)
    assert config.get_scale() == "quick"


@pytest.mark.parametrize("raw, expected", [("paper", "paper"), (" QUICK ", "quick")])
def test_scale_reads_environment(monkeypatch, raw, expected):
    monkeypatch.setenv(config.SCALE_ENV, raw)
    assert config.get_scale() == expected


def test_explicit_scale_wins_over_environment(monkeypatch):
    monkeypatch.setenv(config.SCALE_ENV, "paper")
    assert config.get_scale("quick") == "quick"


def test_bad_scale_names_the_setting(monkeypatch):
    monkeypatch.setenv(config.SCALE_ENV, "huge")
    with pytest.raises(ValueError, match="GAUGEKIT_SCALE"):
        config.get_scale()


def test_device_default_and_override(monkeypatch):
    monkeypatch.delenv(config.DEVICE_ENV, raising=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert config.get_device().type == expected
    monkeypatch.setenv(config.DEVICE_ENV, "cpu")
    assert config.get_device() == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_cuda_request_without_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(config.DEVICE_ENV, "cuda")
    with pytest.raises(ValueError, match="GAUGEKIT_DEVICE=cpu"):
        config.get_device()


def test_data_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(config.DATA_ENV, str(tmp_path))
    assert config.get_data_dir() == tmp_path
    monkeypatch.delenv(config.DATA_ENV)
    assert config.get_data_dir().name == "gaugekit"


def test_describe_reports_resolved_settings(monkeypatch):
    monkeypatch.setenv(config.SCALE_ENV, "paper")
    monkeypatch.setenv(config.DEVICE_ENV, "cpu")
    info = gaugebook.describe()
    assert info["scale"] == "paper" and info["device"] == "cpu"
