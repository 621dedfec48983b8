"""A match's stamp: what it was played with, so that playing it again can say what changed.

Each played match stores (``matches.stamp``, JSON): the version of policybox and of the game's
packages (``importlib.metadata``), the sha256 of the game's configuration, its seed, and the digest
of what every version it seated plays with (``played_digest``, kept when the version qualified: its
files, what its setup script made, its environment's lock). The configuration is, for a MettaGrid game, its resolved
``MettaGridConfig`` as JSON (the map seeded as the match's is); for a PettingZoo game, its
``module:factory``, its ``env_kwargs``, the game file's content when it is one, and the packages'
versions. A match stored before stamps were kept has none (``None``).

``policybox run --ladder DIR --match ID`` plays a match again and compares (``differences``) its
stamp with the one of now -- the same digests of the versions as their files are on disk now.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from policybox.envs import split_env
from policybox.files.environments import as_locked
from policybox.files.version_files import digest_now
from policybox.settings import EpisodeSettings
from policybox.spec import PolicySpec

UNKNOWN = "not installed"


def match_stamp(settings: EpisodeSettings, agents: int, seed: int, digests: Mapping[str, str]) -> dict[str, Any]:
    """The stamp of a match of ``agents`` seats played under ``settings`` with ``seed``, its versions
    (``NAME@vN``) of these digests."""
    packages, config = _game(settings.model_dump_json(), agents, seed)
    return {
        "policybox": package_version("policybox"),
        "packages": packages,
        "config_sha256": config,
        "seed": seed,
        "versions": dict(sorted(digests.items())),
    }


def played_digest(spec: PolicySpec, versions: Path) -> str:
    """The digest of what a kept version plays with (``spec``: the spec its cells are given, its files
    under ``versions``): its files -- what its setup script made, where it has one -- and its
    environment by the lock it was built from, not by the environment's own files (the same lock builds
    the same environment, and a built layer is not the version's to change). A version neither set up
    nor built has the digest it was submitted with."""
    return digest_now(as_locked(spec), versions)


def differences(then: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """What differs between a match's stored stamp and the one of now, one sentence each."""
    found = []
    if then["policybox"] != now["policybox"]:
        found.append(f"policybox was {then['policybox']}, is {now['policybox']}")
    for package in sorted(set(then["packages"]) | set(now["packages"])):
        was, is_ = then["packages"].get(package, UNKNOWN), now["packages"].get(package, UNKNOWN)
        if was != is_:
            found.append(f"the game's package {package} was {was}, is {is_}")
    if then["config_sha256"] != now["config_sha256"]:
        found.append(
            f"the game's configuration changed (sha256 {then['config_sha256'][:12]}…, now {now['config_sha256'][:12]}…)"
        )
    if then["seed"] != now["seed"]:
        found.append(f"the seed was {then['seed']}, is {now['seed']}")
    for version, digest in then["versions"].items():
        current = now["versions"].get(version)
        if current != digest:
            found.append(f"{version}'s files changed on disk (digest {digest[:12]}…, now {str(current)[:12]}…)")
    return found


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN


@functools.lru_cache(maxsize=64)
def _game(settings_json: str, agents: int, seed: int) -> tuple[dict[str, str], str]:
    """(package: version, sha256 of the configuration) of a game: the same for every match of a ladder
    but a MettaGrid map's seed, so kept for the run's next matches."""
    settings = EpisodeSettings.model_validate_json(settings_json)
    family, target = split_env(settings.env)
    if family == "pettingzoo":
        return _pettingzoo(target, settings.env_kwargs)
    if family == "kaggle":
        packages = {"kaggle-environments": package_version("kaggle-environments")}
        described = {"game": target, "env_kwargs": settings.env_kwargs, "steps": settings.steps, "packages": packages}
        return packages, _sha256(json.dumps(described, sort_keys=True))
    from policybox.envs.mettagrid import make_config

    config = make_config(target, agents, settings.steps, seed)
    return {"mettagrid": package_version("mettagrid")}, _sha256(config.model_dump_json())


def _pettingzoo(target: str, kwargs: dict[str, Any]) -> tuple[dict[str, str], str]:
    module = target.rpartition(":")[0]
    packages = {"pettingzoo": package_version("pettingzoo")}
    described: dict[str, Any] = {"game": target, "env_kwargs": kwargs}
    if module.endswith(".py"):
        path = Path(module)
        described["file_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    else:
        for distribution in _distributions().get(module.split(".")[0], []):
            packages[distribution] = package_version(distribution)
    described["packages"] = packages
    return packages, _sha256(json.dumps(described, sort_keys=True))


@functools.cache
def _distributions() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
