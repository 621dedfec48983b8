"""The conformance check every environment adapter must pass (as PettingZoo's ``parallel_api_test``
is for its envs): ``check_adapter("pettingzoo:mpe2.simple_spread_v3:parallel_env")``.

It drives the adapter's host and cell halves directly, without cells or policies, and raises an
AssertionError naming the first rule broken:

- seats: ``agent_names`` unique, as many as the game's fixed number (when it has one);
- turns: the acting agents are live, the live agents only ever leave, the step counter counts;
- observations: every acting agent's bytes decode in its cell half, and are the same bytes when the
  game is replayed from the same seed with the same actions (a reproducible game);
- actions: the fallback action is accepted for every acting agent; an action the cell half encodes
  for the family's ``random`` shorthand is accepted; hostile bytes raise ``InvalidAction`` and
  nothing else, and leave the game playable;
- the end: the game is done within its step limit; rewards, stats and ``describe()`` have the
  promised shapes and are JSON.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import numpy

from policybox.envs import GameRequest, InvalidAction, family, split_env
from policybox.spec import PolicySpec

HOSTILE_PAYLOADS = (b"", b"\x00", b"\xff" * 3, b"\x7f" * 64, b"\x00" * 4096)


def check_adapter(
    env: str, env_kwargs: dict[str, Any] | None = None, agents: int | None = None, steps: int = 40, seed: int = 3
) -> None:
    """Play the game ``env`` twice from ``seed`` through its adapter, checking every rule above."""
    kwargs = env_kwargs or {}
    adapter, target = family(split_env(env)[0]), split_env(env)[1]
    fixed = adapter.fixed_agents(target, kwargs)
    count = fixed if fixed is not None else agents or 2
    first = _play(adapter, target, kwargs, count, steps, seed)
    second = _play(adapter, target, kwargs, count, steps, seed)
    assert first == second, f"{env}: two plays from seed {seed} with the same actions differ"


def _play(adapter: Any, target: str, kwargs: dict[str, Any], count: int, steps: int, seed: int) -> str:
    """One play with the ``random`` shorthand's actions on even seats, the fallback on odd ones and
    one hostile payload a step; a digest of every observation."""
    host = adapter.open_host(GameRequest(target, kwargs, count, steps, seed))
    digest = hashlib.sha256()
    try:
        names = host.agent_names
        assert len(names) == count and len(set(names)) == count, f"agent_names {names} for {count} seats"
        cells = [adapter.cell_half(json.loads(json.dumps(host.cell_setup(i)))) for i in range(count)]
        actors = [_random_actor(adapter, cell, seed, i) for i, cell in enumerate(cells)]
        live = set(host.live())
        while not host.done:
            step = host.current_step
            acting = list(host.acting())
            assert set(acting) <= live, f"step {step}: acting agents {acting} are not all live ({sorted(live)})"
            for seat in acting:
                payload = bytes(host.observation(seat))
                digest.update(payload)
                observation = cells[seat].decode_observation(seat, payload)
                _refuse_hostile(host, seat, step)
                if seat % 2:
                    host.apply_fallback(seat)
                else:
                    host.apply_action(seat, cells[seat].encode_action(actors[seat](observation)))
            host.step()
            assert host.current_step == step + 1, f"step {step}: the step counter went to {host.current_step}"
            now = set(host.live())
            assert now <= live, f"step {step}: agents {sorted(now - live)} came back"
            live = now
        assert host.current_step <= steps, f"the game went on past its step limit of {steps}"
        _check_end(host, count)
    finally:
        host.close()
    return digest.hexdigest()


def _random_actor(adapter: Any, cell: Any, seed: int, seat: int) -> Any:
    random.seed(f"{seed}-{seat}")  # as the cell's AgentState seeds them: the random policy replays
    numpy.random.seed(seed * 1000 + seat)
    policy_class = _import(adapter.resolve_shorthand("random"))
    spec = PolicySpec(class_path="random")
    act, _ = cell.build_agent(cell.build_policy(policy_class, spec), spec, seat)
    return act


def _import(class_path: str) -> Any:
    import importlib

    module, _, name = class_path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _refuse_hostile(host: Any, seat: int, step: int) -> None:
    for payload in HOSTILE_PAYLOADS:
        try:
            host.apply_action(seat, payload)
        except InvalidAction:
            continue
        except Exception as exc:  # anything else would be the host's failure, not the policy's
            raise AssertionError(f"step {step}: {payload!r} raised {type(exc).__name__}, not InvalidAction") from exc


def _check_end(host: Any, count: int) -> None:
    rewards = host.rewards()
    assert len(rewards) == count and all(isinstance(r, float) for r in rewards), f"rewards {rewards}"
    game_stats, agent_stats = host.episode_stats()
    assert isinstance(game_stats, dict) and len(agent_stats) == count, "episode_stats: (game, one per agent)"
    described = json.loads(json.dumps(host.describe()))
    assert described.get("family") == host.family, f"describe() names family {described.get('family')!r}"
