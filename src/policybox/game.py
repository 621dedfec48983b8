"""The settings' game for an episode: its shorthands checked before any cell starts, and the game
opened for the episode's seats (its family's adapter: ``EpisodeSettings.game``)."""

from __future__ import annotations

from collections.abc import Sequence

from policybox.envs import ConfigError, EnvHost, GameRequest
from policybox.errors import PolicyboxError, SpecError
from policybox.settings import EpisodeSettings
from policybox.spec import PolicySpec


def check_shorthands(specs: Sequence[PolicySpec], settings: EpisodeSettings) -> None:
    """Fail fast on a misspelt shorthand, before any cell starts (the family's registry, not policy code)."""
    for spec in specs:
        if spec.is_shorthand:
            try:
                settings.game.adapter.resolve_shorthand(spec.class_path)
            except LookupError as exc:
                raise SpecError(str(exc)) from None


def open_env(settings: EpisodeSettings, agents: int, names: Sequence[str] = ()) -> EnvHost:
    """The settings' game, started for ``agents`` seats; ``names`` are the seats' policies."""
    game = settings.game
    request = GameRequest(
        game.target, settings.env_kwargs, agents, settings.steps, settings.seed, settings.replay, names, settings.limits
    )
    try:
        host = game.adapter.open_host(request)
    except PolicyboxError:
        raise
    except Exception as exc:  # the game itself broke before anyone played: the game is the user's to fix
        raise ConfigError(
            f"the game {settings.env} could not be started with seed {settings.seed}: {type(exc).__name__}: {exc}"
        ) from exc
    if len(host.agent_names) != agents:
        host.close()
        raise ConfigError(f"{settings.env} is a game for {len(host.agent_names)} agents, not {agents}")
    return host
