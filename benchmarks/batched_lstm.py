"""MettaGrid's LSTM policy, stepped as one batch per group of agents.

``BatchedLSTMPolicy`` is ``mettagrid.policy.lstm.LSTMPolicy`` (same network, constructor and checkpoint
format) whose agent policies can also be stepped together: when MettaGrid's ``Rollout`` (with
``policy_group_keys``) or a policybox cell asks ``can_step_group`` of agents of one such policy, it gets
True, and ``step_group`` runs all their observations through ONE ``forward_eval`` (batch = the group's
size) and ONE ``Categorical`` sample, instead of one batch-1 forward and one sample per agent. It exists
for benchmarks/bench_nn.py's case of one policy controlling 24 agents: what batching that policy's
agents wins. Use it by class path: ``benchmarks/batched_lstm.py:BatchedLSTMPolicy``.

An agent policy's ``step()`` is LSTMPolicy's own (same state handling and sampling; with the same torch
seed, the same actions).

``step_group`` computes the same thing in another floating-point order: a batch-24 matmul may sum
differently from batch 1, so logits and LSTM states can differ in the last bits, and a sampled action
could then differ where a random draw falls on a probability boundary. Measured (make_arena, 24 agents,
a seed-0 checkpoint made as bench_nn makes it, one thread): max abs logit difference 6e-8 to 8e-8, hidden
states within 5e-7 after 30 batched steps, argmax always equal; one ``Categorical`` sample over 24 rows
drew the same actions as 24 batch-1 samples from the same seed (1200/1200; torch's CPU multinomial draws
row by row: observed, not promised), and a 100-step grouped ``Rollout`` played exactly LSTMPolicy's
episode. ``forward_eval`` divides by 255 when the batch's largest value exceeds 1 (batch 1: the agent's
own); real observations always hold such values (the empty marker 255), so that never differs in practice.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from mettagrid.policy.lstm import LSTMPolicy
from mettagrid.policy.policy import AgentPolicy, StatefulAgentPolicy
from mettagrid.policy.policy_env_interface import PolicyEnvInterface
from mettagrid.policy.utils import LSTMState
from mettagrid.simulator import Action, AgentObservation

EMPTY_TOKEN = (255, 0, 0)  # what obs_to_obs_tensor fills the buffer's unused rows with


class BatchedLSTMAgentPolicy(StatefulAgentPolicy[LSTMState]):
    """One agent of a ``BatchedLSTMPolicy``: ``step()`` is LSTMPolicy's; agents of the same policy can
    be stepped together by ``step_group``. Each keeps its own LSTM state either way."""

    def __init__(self, owner: BatchedLSTMPolicy, agent_id: int) -> None:
        super().__init__(owner._agent_policy, owner.policy_env_info, agent_id=agent_id)
        self.owner = owner
        self.agent_id = agent_id

    def can_step_group(self, policies: Sequence[AgentPolicy]) -> bool:
        """True iff every policy is an agent policy of this agent's own ``BatchedLSTMPolicy``."""
        return all(isinstance(p, BatchedLSTMAgentPolicy) and p.owner is self.owner for p in policies)

    def step_group(self, observations: list[tuple[int, AgentObservation]]) -> list[Action]:
        """``(agent id, observation)`` pairs -> their actions, in order, from one batched forward pass."""
        return self.owner.step_agents(observations)

    def current_state(self) -> LSTMState:
        """This agent's LSTM state (the initial one before its first step or after ``reset()``)."""
        if not self._state_initialized:
            self._initialize_state(self._simulation)
        assert self._state is not None
        return self._state

    def set_state(self, state: LSTMState) -> None:
        """Store the state a batched step left this agent in, as ``step()`` does."""
        self._state = state
        self._agent_states[self.agent_id] = state
        self._infos = {}


class BatchedLSTMPolicy(LSTMPolicy):
    """``LSTMPolicy`` whose agent policies can be stepped as one batch (see the module's docstring)."""

    short_names = None  # type: ignore[assignment]  # unregistered: "lstm" stays LSTMPolicy's; use the class path

    def __init__(self, policy_env_info: PolicyEnvInterface, device: str = "cpu") -> None:
        super().__init__(policy_env_info, device=device)
        self._agents: dict[int, BatchedLSTMAgentPolicy] = {}

    def agent_policy(self, agent_id: int) -> BatchedLSTMAgentPolicy:
        """Agent ``agent_id``'s policy; ``step_group`` finds agents by this id (the latest one made)."""
        agent = BatchedLSTMAgentPolicy(self, agent_id)
        self._agents[agent_id] = agent
        return agent

    def step_agents(self, observations: list[tuple[int, AgentObservation]]) -> list[Action]:
        """Step the agents with these ids in one ``forward_eval`` and one sample; update their states."""
        agents = [self._agents[agent_id] for agent_id, _ in observations]
        batch = self.token_batch([obs for _, obs in observations])
        states = [agent.current_state() for agent in agents]
        layers, size = self._layers(), self._net.hidden_size
        state = {
            "lstm_h": torch.stack([s.hidden.reshape(layers, size) for s in states]),  # (batch, layers, hidden)
            "lstm_c": torch.stack([s.cell.reshape(layers, size) for s in states]),
        }
        self._net.eval()
        with torch.no_grad():
            logits, _ = self._net.forward_eval(batch, state)
            sampled = torch.distributions.Categorical(logits=logits).sample().tolist()
        hidden, cell = state["lstm_h"], state["lstm_c"]
        for row, agent in enumerate(agents):
            agent.set_state(LSTMState.from_tuple((hidden[row : row + 1], cell[row : row + 1]), layers))
        names = self._policy_env_info.action_names
        return [Action(name=names[index]) for index in sampled]

    def token_batch(self, observations: Sequence[AgentObservation]) -> torch.Tensor:
        """The observations' token buffers, stacked: equal to ``obs_to_obs_tensor`` of each, concatenated.
        From their raw buffers where the observations carry them (policybox's ``raw_tokens``), else from
        their tokens."""
        if all(hasattr(obs, "raw_tokens") for obs in observations):
            return self._raw_batch(observations)
        shape = self._policy_env_info.observation_space.shape
        buffer = np.empty((len(observations), *shape), dtype=np.uint8)
        buffer[...] = EMPTY_TOKEN
        for row, obs in enumerate(observations):
            tokens = [token.raw_token for token in obs.tokens[: shape[0]]]
            if tokens:
                buffer[row, : len(tokens)] = tokens
        return torch.from_numpy(buffer).to(self._device)

    def _raw_batch(self, observations: Sequence[AgentObservation]) -> torch.Tensor:
        """``token_batch`` from raw buffers: each agent's rows from its first empty one on become
        ``EMPTY_TOKEN``, as ``obs_to_obs_tensor`` leaves every row past the agent's tokens."""
        raw = np.stack([obs.raw_tokens for obs in observations])  # type: ignore[attr-defined]
        past_tokens = np.maximum.accumulate(raw[:, :, 1] == EMPTY_TOKEN[0], axis=1)
        raw[past_tokens] = EMPTY_TOKEN
        return torch.from_numpy(raw).to(self._device)

    def _layers(self) -> int:
        """The LSTM's layers times directions, as LSTMAgentPolicy counts them."""
        rnn = self._net._rnn
        return rnn.num_layers * (2 if rnn.bidirectional else 1)
