"""Kernel surface through the real engine: a policy tries new namespaces, packet and netfilter sockets,
keyrings and userfaultfd in a cell with seccomp on. Every attempt must be refused by the filter, and
the test checks from outside the cell that nothing got through: no key it made is visible in
/proc/keys, no process it made is left, and the other agent played on."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from conftest import descendants, policy

from policybox.host.diagnosis import diagnose
from policybox.results import AgentStatus
from policybox.sandbox import Layer

VICTIM = policy("escapes.py:Diarist")

# attempt -> the errno the seccomp filter answers with (another layer refusing first would show another)
EXPECTED = {
    "unshare(CLONE_NEWUSER)": "EPERM",
    "clone(CLONE_NEWUSER|CLONE_NEWNET)": "EPERM",
    "clone3": "ENOSYS",
    "socket(AF_PACKET)": "EAFNOSUPPORT",
    "socket(AF_NETLINK, NETLINK_NETFILTER)": "EAFNOSUPPORT",
    "add_key": "EPERM",
    "keyctl": "EPERM",
    "userfaultfd": "EPERM",
}


def test_kernel_surface_is_refused(play):
    seccomp_check = next(check for check in diagnose() if check.layer == Layer.SECCOMP)
    if not seccomp_check.works:
        pytest.skip(f"doctor: layer seccomp unavailable here: {seccomp_check.detail}")
    description = f"policybox-kernel-surface-{uuid.uuid4().hex}"  # ours alone, even on a shared machine
    attacker, victim = play(
        [policy("kernel_surface.py:Attack", **{"kw.key_description": f'"{description}"'}), VICTIM],
        agents=2,
        steps=10,
    ).agents

    assert attacker.sandbox["seccomp"].startswith("active"), attacker.sandbox
    lines = dict(re.findall(r"^(.+?): (refused \w+|succeeded)$", Path(attacker.log_path).read_text(), re.M))
    assert lines == {name: f"refused {err}" for name, err in EXPECTED.items()}
    # From outside: the attacker made its key readable by everyone (keyctl) had add_key worked; root sees none.
    assert description not in Path("/proc/keys").read_text()
    assert not descendants()  # no cloned child outlived the cell
    assert attacker.status == victim.status == AgentStatus.OK
    assert victim.latency.count == 10
