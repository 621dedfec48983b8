"""Episodes side by side: threads sharing one zygote get the results they would get alone, and no two
live cells on the machine ever share a uid (uids are leased machine-wide, see host/uids.py)."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import threading

import pytest
from conftest import policy
from policybox.settings import EpisodeSettings

from policybox.episode import run_episode
from policybox.host.uids import LOCK_DIR_NAME, UID_BASE, UID_COUNT, lease_uid, lease_uids
from policybox.host.zygote import Zygote
from policybox.results import AgentStatus, EpisodeResult
from policybox.spec import parse_policy_arg

SEEDS = (11, 12, 13)
AGENTS = 4


def outcome(result: EpisodeResult) -> list[tuple]:
    return [(a.status, a.action_digest, a.reward) for a in result.agents]


def cell_uid(agent) -> int | None:
    match = re.search(r"uid (\d+)", agent.sandbox.get("uid", ""))
    return int(match.group(1)) if match else None


def test_two_threads_sharing_a_zygote_get_the_results_of_one_after_the_other(tmp_path):
    specs = [parse_policy_arg(policy("seeded_random.py:SeededRandom"))] * AGENTS
    with Zygote() as zygote:

        def play(seed: int, folder: str) -> EpisodeResult:
            return run_episode(specs, EpisodeSettings(steps=40, seed=seed), tmp_path / folder, zygote=zygote)

        alone = {seed: play(seed, f"alone-{seed}") for seed in SEEDS}
        together: dict[int, EpisodeResult] = {}
        errors: list[BaseException] = []

        def run(seed: int) -> None:
            try:
                together[seed] = play(seed, f"together-{seed}")
            except BaseException as exc:
                errors.append(exc)

        # Daemon threads joined with a time limit: an unlocked zygote makes threads steal each
        # other's "forked" replies and wait for ones that never come -- that must fail, not hang.
        threads = [threading.Thread(target=run, args=(seed,), daemon=True) for seed in SEEDS]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not any(thread.is_alive() for thread in threads), "episodes sharing the zygote hung"
    assert errors == []
    for seed in SEEDS:
        assert [a.status for a in together[seed].agents] == [AgentStatus.OK] * AGENTS
        assert outcome(together[seed]) == outcome(alone[seed])
    assert outcome(alone[SEEDS[0]]) != outcome(alone[SEEDS[1]])  # the comparison tells episodes apart
    if os.geteuid() == 0:  # cells of both episodes lived at the same time: all their uids differ
        uids = [cell_uid(agent) for seed in SEEDS for agent in together[seed].agents]
        assert None not in uids and len(set(uids)) == len(uids) == AGENTS * len(SEEDS)
        assert all(UID_BASE <= uid < UID_BASE + UID_COUNT for uid in uids)


@pytest.fixture
def many_fds():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_1100_leases_in_one_process_are_1100_uids(many_fds):
    """More than the 1000 cells the old formula (host pid * 1000 + n % 1000) kept apart."""
    leases = [lease_uid() for _ in range(1100)]
    try:
        assert len({lease.uid for lease in leases}) == 1100
    finally:
        for lease in leases:
            lease.release()
    with lease_uid() as lease:  # released uids can be leased again, and the lock files go away
        assert UID_BASE <= lease.uid < UID_BASE + UID_COUNT


def test_leases_from_threads_are_distinct():
    start = UID_COUNT // 2  # all threads try the same uids first: only the locks keep them apart
    found: list[list] = []

    def lease_some():
        found.append(lease_uids(50, start=start))

    threads = [threading.Thread(target=lease_some) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    leases = [lease for batch in found for lease in batch]
    try:
        assert len({lease.uid for lease in leases}) == 200
    finally:
        for lease in leases:
            lease.release()


HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def test_a_uid_another_process_holds_is_skipped(tmp_path):
    import tempfile

    with lease_uid() as probe:  # a free stretch of the range, found the ordinary way
        start = probe.uid - UID_BASE
    held = UID_BASE + start
    lock = os.path.join(tempfile.gettempdir(), LOCK_DIR_NAME, f"{held}.lock")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, lock], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        with lease_uid(start=start) as lease:
            assert lease.uid != held
    finally:
        holder.communicate("")
    with lease_uid(start=start) as lease:  # the holder is gone, and so is its lock
        assert lease.uid == held


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process as another uid")
def test_a_uid_a_running_process_has_is_skipped():
    """An orphan cell of a killed host holds no lock, but still runs as its uid: that uid is skipped."""
    with lease_uid() as probe:
        start = probe.uid - UID_BASE
    uid = UID_BASE + start
    orphan = subprocess.Popen(["sleep", "60"], user=uid, group=uid, extra_groups=[])
    try:
        with lease_uid(start=start) as lease:
            assert lease.uid != uid
    finally:
        orphan.kill()
        orphan.wait()


def test_uids_handed_to_rootless_containers_are_skipped(monkeypatch, tmp_path):
    """A uid in /etc/subuid or /etc/subgid may later run a container's process: never a cell's."""
    import policybox.host.uids as uids

    with lease_uid() as probe:
        start = probe.uid - UID_BASE
    subuid = tmp_path / "subuid"
    subuid.write_text(f"someone:{UID_BASE + start}:10\nbroken line\n")
    real = uids.subordinate_ids
    monkeypatch.setattr(uids, "subordinate_ids", lambda: real((str(subuid),)))
    with lease_uid(start=start) as lease:
        assert lease.uid == UID_BASE + start + 10
