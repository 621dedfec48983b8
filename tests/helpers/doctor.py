"""Skipping a test whose sandbox layer this machine lacks, as ``policybox doctor`` diagnoses it."""

from __future__ import annotations

import pytest

from policybox.host.diagnosis import diagnose
from policybox.sandbox import Layer


def needs(*layers: Layer) -> None:
    for check in diagnose():
        if check.layer in layers and not check.works:
            pytest.skip(f"doctor: layer {check.layer} unavailable here: {check.detail}")
