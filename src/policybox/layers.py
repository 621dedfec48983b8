"""An environment's layer as a built spec carries it: the folder of packages (``SITE``) beside its
locked pins (``LOCK``), the last of the spec's import roots; and the rule that one process holds
one layer.

Below the episode and the files that build layers (``policybox.files.environments``): the episode
checks an inline episode's specs with it, the builder names its folders with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from policybox.errors import SpecError

if TYPE_CHECKING:
    from policybox.spec import PolicySpec

LOCK = "lock.txt"  # a layer's locked pins: what the host lacked of its requirements' resolved set
SITE = "site"  # a layer's packages, beside its lock


def environment_of(spec: PolicySpec) -> str | None:
    """The layer a built spec imports from (``with_environment``), if any."""
    return next((p for p in spec.python_path if Path(p).name == SITE and (Path(p).parent / LOCK).is_file()), None)


def check_one_process(specs: Sequence[PolicySpec]) -> None:
    """Refuse, for inline mode, specs built in different environments: every policy then imports in this
    one process, which holds one version of a package -- the first imported -- for all of them."""
    layers = {layer for spec in specs if (layer := environment_of(spec))}
    if len(layers) > 1:
        raise SpecError(
            f"inline mode plays every policy in this process, which cannot hold {len(layers)} environments' "
            "packages at once: play these policies in process mode"
        )
