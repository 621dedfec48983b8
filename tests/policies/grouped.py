"""Policies for cells per policy. Each seat's action is a function of its own observation only (the sum
of its token bytes picks an action), so a batched call and per-seat calls give the same game exactly
when every seat gets its own observation and its own action back. Each prints how it was called --
``step_group [ids]``, ``step_batch [ids]`` or ``step id`` -- to its cell's log, which the tests read from
outside; ``Seats`` prints its pid and uid once per seat."""

import os
import time

import numpy as np
from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy


def _choice(policy_env_info, tokens) -> int:
    return int(np.asarray(tokens, dtype=np.int64).sum()) % len(policy_env_info.action_names)


def _action_of(policy_env_info, obs) -> str:
    rows = [token.raw_token for token in obs.tokens]
    return policy_env_info.action_names[_choice(policy_env_info, rows)]


class _Seat(AgentPolicy):
    def __init__(self, policy_env_info, owner, agent_id):
        super().__init__(policy_env_info)
        self.owner = owner
        self.agent_id = agent_id
        self.steps = 0

    def step(self, obs):
        print(f"step {self.agent_id}", flush=True)
        self.steps += 1
        self.owner.before_step(self)
        return _action_of(self.policy_env_info, obs)


class _GroupSeat(_Seat):
    def can_step_group(self, policies):
        return all(isinstance(policy, _GroupSeat) and policy.owner is self.owner for policy in policies)

    def step_group(self, observations):
        print(f"step_group {[agent_id for agent_id, _ in observations]}", flush=True)
        return [_action_of(self.policy_env_info, obs) for _, obs in observations]


class Ungrouped(MultiAgentPolicy):
    """Says nothing of groups: its seats are stepped one after another, ``step()`` each."""

    seat_class = _Seat

    def __init__(self, policy_env_info, fail_seat=-1, fail_at=-1, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        self._fail_seat, self._fail_at = int(fail_seat), int(fail_at)

    def agent_policy(self, agent_id):
        return self.seat_class(self.policy_env_info, self, agent_id)

    def before_step(self, seat):
        """Seat ``fail_seat`` raises at its step ``fail_at``; seat -2 (any seat) exits the cell there."""
        if seat.steps - 1 == self._fail_at and seat.agent_id == self._fail_seat:
            raise RuntimeError(f"seat {seat.agent_id} gave up at step {self._fail_at}")
        if seat.steps - 1 == self._fail_at and self._fail_seat == -2:
            os._exit(3)


class Grouped(Ungrouped):
    """Its seats say ``can_step_group`` for each other: stepped with one ``step_group`` call."""

    seat_class = _GroupSeat


class RawBuffer(Ungrouped):
    """A raw-buffer policy: ``step_batch`` over the whole game's observation array."""

    def step_batch(self, raw_observations, raw_actions):
        seats = [int(seat) for seat in np.flatnonzero(raw_observations.reshape(len(raw_observations), -1).any(axis=1))]
        print(f"step_batch {seats} {raw_observations.shape} {raw_observations.dtype}", flush=True)
        for seat in seats:
            rows = raw_observations[seat]
            count = rows[:, 1].tobytes().find(b"\xff")  # the tokens up to the first empty one, as MettaGrid reads them
            raw_actions[seat] = _choice(self.policy_env_info, rows if count < 0 else rows[:count])


class Seats(Ungrouped):
    """Prints its process and user once per seat it is asked to build."""

    def agent_policy(self, agent_id):
        print(f"seat {agent_id} pid {os.getpid()} uid {os.getuid()}", flush=True)
        return super().agent_policy(agent_id)


class SlowGroup(Grouped):
    """Its batched step takes ``sleep_s``."""

    def __init__(self, policy_env_info, sleep_s=0.0, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        self.sleep_s = float(sleep_s)

    def before_step(self, seat):
        pass


class _SlowSeat(_GroupSeat):
    def step_group(self, observations):
        time.sleep(self.owner.sleep_s)
        return super().step_group(observations)


SlowGroup.seat_class = _SlowSeat


class _RaisingSeat(_GroupSeat):
    def step_group(self, observations):
        if self.steps >= 3:
            raise RuntimeError("the batch gave up: " + "x" * 5000)  # with its traceback, ~8 KB a seat
        self.steps += 1
        return super().step_group(observations)


class RaisingGroup(Grouped):
    """Its batched step raises at its 4th call, with a long message, for every seat at once."""

    seat_class = _RaisingSeat
