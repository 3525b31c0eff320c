"""The suite writes nothing into the checkout: what the test tools it runs with would keep
there goes elsewhere (docs snippets and examples are checked where they run)."""

from __future__ import annotations

from pathlib import Path

import hypothesis.configuration
import pytest

from tests.checkout import ROOT


def test_hypothesis_keeps_what_it_learns_outside_the_checkout() -> None:
    """Hypothesis writes its examples and the constants it found into its home folder, by
    default ``.hypothesis`` in the working directory, even with no database."""
    home = Path(hypothesis.configuration.storage_directory(intent_to_write=False).path).resolve()
    assert not home.is_relative_to(ROOT.resolve()), home


def test_no_benchmark_plugin_makes_its_folder(request: pytest.FixtureRequest) -> None:
    """pytest-benchmark, where it is installed, makes ``.benchmarks`` in the working
    directory on every run: the suite keeps it out (it times nothing)."""
    assert not request.config.pluginmanager.has_plugin("benchmark")
