"""TEMPORARY stand-in until the versions branch lands (not committed)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from policybox.errors import SpecError
from policybox.league.packing import pack, relocate, unpack
from policybox.spec import PolicySpec, parse_policy_arg

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")


@dataclass(frozen=True)
class Stored:
    spec: PolicySpec
    digest: str
    files: Path | None


def check_name(name: str) -> str:
    if not NAME_PATTERN.match(name):
        raise SpecError(f"name {name!r}: a name is [a-z0-9][a-z0-9_-]{{0,39}}")
    return name


def store(source: str, root: Path, base_dir: Path | None = None) -> Stored:
    spec = parse_policy_arg(source, base_dir)
    bundle = pack(spec)
    if bundle is None:
        return Stored(spec, hashlib.sha256(spec.model_dump_json().encode()).hexdigest(), None)
    folder = unpack(bundle, root)
    return Stored(relocate(spec, bundle, folder), bundle.digest, folder)
