"""Which pynvml is loaded: NVIDIA's nvidia-ml-py, or the unofficial pynvml shadowing it."""

from __future__ import annotations

import logging
import types

import pynvml
import pytest

from agents.bindings import _owning_distributions, check_bindings
from agents.gpu import GpuSampler

from .gpu_helpers import Clock, fake


def _module(path: str, *, field_values: bool = True) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.__file__ = path
    if field_values:
        m.nvmlDeviceGetFieldValues = lambda handle, ids: None
    return m


def test_installed_bindings_are_the_official_ones() -> None:
    owners = _owning_distributions(pynvml.__file__, "pynvml")
    assert [name.lower() for name, _ in owners] == ["nvidia-ml-py"]
    check = check_bindings(pynvml)
    assert check.official and not check.problems and not check.fake
    assert check.distribution.lower() == "nvidia-ml-py" and check.has_field_values
    assert "official" in check.summary()


def test_official_layout_from_metadata() -> None:
    m = _module("/venv/lib/python3.11/site-packages/pynvml.py")
    check = check_bindings(m, owners=lambda f, top: [("nvidia-ml-py", "12.560.30")])
    assert check.official and check.version == "12.560.30"


def test_unofficial_pynvml_distribution_is_a_loud_problem() -> None:
    m = _module("/venv/lib/python3.11/site-packages/pynvml/__init__.py")
    check = check_bindings(m, owners=lambda f, top: [("pynvml", "11.5.0")])
    assert not check.official
    (problem,) = check.problems
    assert "unofficial 'pynvml'" in problem and "11.5.0" in problem
    assert "pip uninstall pynvml" in problem and "nvidia-ml-py" in problem
    assert "NOT OK" in check.summary()


def test_stray_copy_and_old_bindings_are_problems() -> None:
    stray = check_bindings(_module("/home/u/pynvml.py", field_values=False),
                           owners=lambda f, top: [])
    assert not stray.official and not stray.has_field_values
    assert any("no installed distribution" in p for p in stray.problems)
    assert any("nvmlDeviceGetFieldValues" in p for p in stray.problems)
    wrong_file = check_bindings(_module("/venv/site-packages/pynvml/__init__.py"),
                                owners=lambda f, top: [("nvidia-ml-py", "12.0")])
    assert not wrong_file.official and "single pynvml.py" in wrong_file.problems[0]


def test_sampler_warns_at_start_about_unofficial_bindings(
        caplog: pytest.LogCaptureFixture) -> None:
    f = fake("1xV100", Clock())
    unofficial = check_bindings(_module("/x/pynvml/__init__.py"),
                                owners=lambda f, top: [("pynvml", "11.4.1")])
    with caplog.at_level(logging.WARNING, logger="agents.gpu"):
        s = GpuSampler(f, check=lambda nvml: unofficial)
        s.start()
    assert "NVML BINDINGS PROBLEM" in caplog.text and "unofficial" in caplog.text
    assert s.bindings is unofficial


def test_fake_is_reported_as_fake(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agents.gpu"):
        s = GpuSampler(fake("1xV100", Clock()))
        s.start()
    assert s.bindings.fake and "FAKE NVML" in caplog.text
