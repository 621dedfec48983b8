"""Knocks on every datagram socket it inherited: were one of them a control socket of the zygote it was
forked from (the host's, or a worker's channel), this would ask the zygote for a cell of its own -- one
that reads its SETUP, sandbox plan included, from this policy -- and send it garbage. Then plays noop,
slowly enough to be watched."""

import json
import os
import socket
import time

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy


def knock() -> int:
    knocked = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue  # not a socket
        with sock:
            if sock.type != socket.SOCK_SEQPACKET:
                continue
            ours, theirs = socket.socketpair()
            read, write = os.pipe()
            try:
                socket.send_fds(sock, [json.dumps({"env": {}, "cwd": None}).encode()], [theirs.fileno(), write])
                sock.send(b"{not json")
                knocked += 1
            except OSError:
                pass
    return knocked


class _Agent(AgentPolicy):
    def step(self, obs):
        time.sleep(0.05)
        return "noop"


class Knocker(MultiAgentPolicy):
    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        print(f"knocked on {knock()} sockets", flush=True)

    def agent_policy(self, agent_id):
        return _Agent(self.policy_env_info)
