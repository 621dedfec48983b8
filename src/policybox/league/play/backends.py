"""Which runner plays a leaderboard's episodes: ``local`` worker processes, or ``ray`` tasks on a cluster."""

from __future__ import annotations

import os
from typing import Any

from policybox.envs import ConfigError
from policybox.errors import install_command
from policybox.host.budget import Budget, host_budget
from policybox.league.choices import Backend
from policybox.league.play.runner import EpisodeRunner
from policybox.league.play.worker_pool import local_workers
from policybox.sandbox import SandboxLevel
from policybox.settings import EpisodeSettings


def open_runner(
    backend: Backend, workers: int | None, ray_address: str | None, settings: EpisodeSettings, most: int | None = None
) -> EpisodeRunner:
    """``workers`` episodes at once (at most ``most``): on this machine (default: one per core, their
    cells sharing one memory budget), or on the Ray cluster at ``ray_address`` (or a Ray started for
    the run; default: one per CPU of the cluster)."""
    if backend == "ray":
        ray_backend()  # Ray is installed, or a ConfigError says how to install it
        from policybox.league.play.ray_backend import RayEpisodes

        return RayEpisodes(workers if most is None else min(workers or most, most), ray_address)
    if ray_address is not None:
        raise ConfigError("--ray-address is for --backend ray")
    count = max(1, min(workers or os.cpu_count() or 1, most or workers or os.cpu_count() or 1))
    return local_workers(count, shared_budget(settings, count))


def shared_budget(settings: EpisodeSettings, workers: int) -> Budget | None:
    """The memory budget every worker's cells share: this process's, or a part of it for each worker
    where it can only be divided (None: the cells have no memory limit)."""
    if settings.mode != "process" or settings.sandbox == SandboxLevel.OFF:
        return None
    return host_budget(settings.limits.memory_budget_mb).split(workers)


def ray_backend() -> Any:
    """``policybox.league.play.ray_backend``, imported on demand: Ray is an optional dependency."""
    try:
        import ray  # noqa: F401
    except ModuleNotFoundError:
        raise ConfigError(f"--backend ray needs Ray: {install_command('ray')}") from None
    import policybox.league.play.ray_backend

    return policybox.league.play.ray_backend
