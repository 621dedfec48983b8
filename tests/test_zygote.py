"""The zygote: started once, reused across episodes, forks every cell, holds no policy, dies cleanly."""

import contextlib
import os
import re
from pathlib import Path

import psutil
import pytest
from conftest import policy
from typer.testing import CliRunner

from policybox import process_names
from policybox.cli import app
from policybox.episode import run_episode
from policybox.host.zygote import Zygote, ZygoteError
from policybox.league.play.runner import EpisodeJob
from policybox.limits import Limits
from policybox.results import AgentStatus, EpisodeResult
from policybox.settings import EpisodeSettings
from policybox.spec import PolicySpec, parse_policy_arg


def test_one_zygote_serves_many_episodes(tmp_path):
    specs = [parse_policy_arg(policy("stateful.py:Stateful")), PolicySpec(class_path="random")]
    with Zygote() as zygote:
        zygote_process = psutil.Process(zygote._popen.pid)
        digests = []
        for seed in (3, 3, 4):
            result = run_episode(specs, EpisodeSettings(steps=30, seed=seed), tmp_path / str(seed), zygote=zygote)
            assert [a.status for a in result.agents] == [AgentStatus.OK] * 2
            digests.append([a.action_digest for a in result.agents])
            assert zygote_process.is_running() and zygote_process.children() == []  # its cells are gone
        assert digests[0] == digests[1] != digests[2]
        # Policy code is imported by each cell, never by the zygote (else a forked cell would find the
        # module already imported and print nothing).
        marker = parse_policy_arg(policy("import_marker.py:Marker"))
        result = run_episode([marker] * 2, EpisodeSettings(steps=3), tmp_path / "marker", zygote=zygote)
        for agent in result.agents:
            importers = re.findall(r"policy module imported in pid (\d+)", Path(agent.log_path).read_text())
            assert len(importers) == 1 and int(importers[0]) != zygote_process.pid
    assert not zygote_process.is_running() or zygote_process.status() == psutil.STATUS_ZOMBIE


def zygotes_here() -> set[int]:
    """The zygote processes this process has started, as the kernel lists them."""
    return {p.pid for p in psutil.Process().children() if "policybox.cell.zygote" in " ".join(p.cmdline())}


def test_kept_zygotes_serve_every_episode_in_their_block_and_end_with_it(tmp_path):
    """Within kept_zygotes(), episodes given no zygote -- a MettaGrid one and a PettingZoo one, twice
    each -- fork from one zygote per preload, the same process each time; when the block ends both are
    gone. Judged from outside: the zygote processes this process has, during and after."""
    from policybox.host.zygote import kept_zygotes

    before = zygotes_here()
    games = [{}, {"env": "pettingzoo:pettingzoo.classic.rps_v2:env"}]
    seen = []
    with kept_zygotes() as kept:
        for turn in range(2):
            for game in games:
                logs = tmp_path / f"{turn}-{len(game)}"
                result = run_episode(["random"], EpisodeSettings(steps=5, **game), logs, agents=None if game else 2)
                assert {a.status for a in result.agents} == {AgentStatus.OK}
                seen.append(zygotes_here() - before)
        both = {zygote._popen.pid for zygote in kept.values()}
        assert len(both) == 2 and seen[0] < both and seen[1:] == [both] * 3  # the second game's started once
    assert zygotes_here() == before


def test_zygotes_kept_for_an_owner_outlive_the_block_for_the_next(tmp_path):
    """Given ``keep`` (its owner's, as the test suite keeps one per worker), a block uses and fills it and
    leaves its zygotes running: the next block's episode forks from the same process."""
    from policybox.host.zygote import kept_zygotes

    keep: dict = {}
    try:
        for turn in range(2):
            with kept_zygotes(keep):
                run_episode(["random"], EpisodeSettings(steps=3), tmp_path / str(turn), agents=2)
            (zygote,) = keep.values()
            assert zygote.alive and zygote._popen.pid in zygotes_here()
            if turn == 0:
                first = zygote
        assert zygote is first
    finally:
        for zygote in keep.values():
            zygote.close()


def test_cells_are_forked_by_the_zygote(tmp_path):
    spec = parse_policy_arg(policy("sleepy.py:Sleepy", **{"kw.sleep_s": "0.2"}))
    with Zygote() as zygote:
        import threading

        seen: list[int] = []
        done = threading.Event()

        def watch():
            while not done.is_set() and not seen:
                seen.extend(child.pid for child in psutil.Process(zygote._popen.pid).children())

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            run_episode([spec] * 2, EpisodeSettings(steps=5), tmp_path, zygote=zygote)
        finally:
            done.set()
            watcher.join()
        assert seen, "no cell was a child of the zygote"


def test_a_zygote_started_by_a_thread_serves_after_it_ends_and_dies_with_its_host_process(tmp_path):
    """A program may start its zygote from a short-lived thread (a test's, a web request's): the zygote
    serves on after that thread ends -- a parent-death signal would have killed it then, since it fires
    when the parent *thread* ends -- and still ends, with its cells, when the host process does.
    Judged from outside: the zygote's process after its thread ended, an episode played with it, and,
    for a host process SIGKILLed mid-episode, whether its zygote and cells still run."""
    import signal
    import subprocess
    import sys
    import threading
    import time

    started: list[Zygote] = []
    starter = threading.Thread(target=lambda: started.append(Zygote()))
    starter.start()
    starter.join()
    with started[0] as zygote:
        time.sleep(0.5)  # a parent-death signal is sent at once; its zygote would be gone by now
        assert zygote.alive and _running(zygote._popen.pid)
        result = run_episode([PolicySpec(class_path="random")] * 2, EpisodeSettings(steps=3), tmp_path, zygote=zygote)
        assert [a.status for a in result.agents] == [AgentStatus.OK] * 2
    sleepy = policy("sleepy.py:Sleepy", **{"kw.sleep_s": "0.05"})
    host = subprocess.Popen([sys.executable, "-c", HOST_WITH_A_THREADS_ZYGOTE, str(tmp_path / "host"), sleepy],
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        zygote_pid = int(host.stdout.readline())
        give_up = time.monotonic() + 60
        while not (cells := [c.pid for c in psutil.Process(zygote_pid).children()]):
            assert time.monotonic() < give_up, "the host's episode forked no cell"
            time.sleep(0.05)
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()
    give_up = time.monotonic() + 10
    while any(_running(pid) for pid in (zygote_pid, *cells)):
        assert time.monotonic() < give_up, "the killed host's zygote or its cells still run"
        time.sleep(0.05)


# A host that starts its zygote from a thread that then ends, prints the zygote's pid, and plays an episode
# of 300 steps of 0.05 s (it is killed in the middle).
HOST_WITH_A_THREADS_ZYGOTE = """
import sys, threading
from pathlib import Path
from policybox.episode import run_episode
from policybox.host.zygote import Zygote
from policybox.settings import EpisodeSettings
from policybox.spec import parse_policy_arg

started = []
starter = threading.Thread(target=lambda: started.append(Zygote()))
starter.start()
starter.join()
print(started[0]._popen.pid, flush=True)
spec = parse_policy_arg(sys.argv[2])
run_episode([spec] * 2, EpisodeSettings(steps=300), Path(sys.argv[1]), zygote=started[0])
"""


def test_a_policys_variables_reach_its_cell_and_never_the_zygote_that_forks_every_teams_cells(tmp_path):
    """A spec's variables may be secrets (``env.NAME=@FILE``). A zygote forks every team's cells, and each
    inherits the zygote's memory -- freed bytes included, where a fork request once was -- so a secret that
    passed through the zygote could be read by the next team's cell. The variables reach their own cell in
    its SETUP instead. Judged from outside: the zygote's whole memory, read from /proc after the episode
    (it held the secret before, tried: and a later cell found it in its own heap), and the variable the
    cell printed."""
    import secrets

    secret = f"policybox-secret-{secrets.token_hex(8)}"
    reader = parse_policy_arg(policy("env_reader.py:EnvReader", **{"env.POLICY_MODE": secret}))
    with Zygote() as zygote:
        result = run_episode([reader] * 2, EpisodeSettings(steps=2), tmp_path, zygote=zygote)
        assert all(secret in Path(agent.log_path).read_text() for agent in result.agents)
        assert _memory_holds(zygote._popen.pid, b"policybox.cell.zygote")  # the reader reads: its own argv
        assert not _memory_holds(zygote._popen.pid, secret.encode())


def _memory_holds(pid: int, needle: bytes) -> bool:
    """Whether any readable mapping of process ``pid`` holds ``needle`` (root reads another's memory)."""
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as memory:
        for line in maps:
            fields = line.split()
            if "r" not in fields[1] or fields[-1] in ("[vvar]", "[vsyscall]", "[vvar_vclock]"):
                continue
            start, end = (int(address, 16) for address in fields[0].split("-"))
            with contextlib.suppress(OSError, ValueError, OverflowError):
                memory.seek(start)
                if needle in memory.read(end - start):
                    return True
    return False


def test_a_channel_may_ask_for_cells_only(tmp_path):
    """A channel (what a worker holds) may not ask its zygote for one of the host's processes, nor for
    another channel: only the host's own control socket may. Judged from outside: the zygote's children,
    the channel's silence (a fork would be answered), and an episode played after."""
    import json
    import select
    import socket
    import time

    with Zygote() as zygote:
        channel = zygote.channel()
        read, write = os.pipe()
        process = {"process": "policybox.league.play.worker", "argv": ["--fd", "{0}"]}
        socket.send_fds(channel, [json.dumps(process).encode()], [write, write, write])
        socket.send_fds(channel, [json.dumps({"channel": True}).encode()], [write])
        time.sleep(0.5)
        assert not select.select([channel], [], [], 0.5)[0]  # no "forked" reply
        assert psutil.Process(zygote._popen.pid).children() == []
        result = run_episode([PolicySpec(class_path="random")] * 2, EpisodeSettings(steps=3), tmp_path, zygote=zygote)
        assert [a.status for a in result.agents] == [AgentStatus.OK] * 2
        channel.close()
        os.close(read)
        os.close(write)


def test_missing_preload_module_is_a_clear_error():
    with pytest.raises(ZygoteError, match="preload failed: ModuleNotFoundError: No module named 'no_such_mod"):
        Zygote(("no_such_module_for_policybox",))
    run = CliRunner().invoke(app, ["run", "-p", "random", "--steps", "5", "--preload", "no_such_module_for_policybox"])
    assert run.exit_code == 2
    assert "preload failed" in run.output


def test_a_dead_zygote_fails_the_episode_and_leaves_no_cgroup(tmp_path):
    import os

    from policybox.host.cgroup import kill_cgroup_parent

    zygote = Zygote()
    zygote.close()
    with pytest.raises(ZygoteError, match="the zygote cannot fork a cell"):
        run_episode([PolicySpec(class_path="random")], EpisodeSettings(steps=3), tmp_path, zygote=zygote)
    parent = kill_cgroup_parent()
    if parent is not None:
        assert list(parent.glob(f"policybox-{os.getpid()}-*")) == []


def _job(tmp_path: Path, name: str, spec: PolicySpec, steps: int, **settings) -> EpisodeJob:
    return EpisodeJob(
        name=name,
        specs=[spec] * 2,
        entrants=["a", "b"],
        settings=EpisodeSettings(steps=steps, **settings),
        log_dir=str(tmp_path / name),
    )


def _cells_of(zygote_pid: int) -> dict[int, set[int]]:
    """The zygote's cells and the CPUs each may run on, as the kernel shows them: its children that named
    themselves cells (not the workers it forked, nor a child still between its fork and its name)."""
    cells = {}
    for child in psutil.Process(zygote_pid).children():
        with contextlib.suppress(psutil.NoSuchProcess):
            if child.name() == process_names.CELL:
                cells[child.pid] = set(child.cpu_affinity())
    return cells


def _cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_pools_workers_fork_their_cells_from_the_drivers_zygote_each_on_its_cpu(tmp_path):
    """A pool's workers start no zygote of their own: the cells of both fork from the one this process
    keeps, each cell on the CPU of the worker that asked for it. Judged from outside: the process tree
    and each process's CPUs, read from /proc while two episodes play at once."""
    import time

    from policybox.host.zygote import kept_zygotes
    from policybox.league.play.worker_pool import LocalWorkers

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    spec = parse_policy_arg(policy("sleepy.py:Sleepy", **{"kw.sleep_s": "0.05"}))
    with kept_zygotes() as kept, LocalWorkers(2, None) as pool:
        futures = [pool.submit(_job(tmp_path, f"episode-{i}", spec, steps=40)) for i in range(2)]
        ((zygote,),) = [kept.values()]
        (zygote_pid,) = zygote.pids
        seen: dict[int, set[int]] = {}
        while not all(future.done() for future in futures):
            seen |= _cells_of(zygote_pid)
            time.sleep(0.02)  # each read lists the whole process table
        assert all(future.result() for future in futures)
        workers = [psutil.Process(pid) for pid in pool.pids]
        assert [w.children() for w in workers] == [[], []]  # no zygote, no cell under a worker
        worker_cpus = [set(w.cpu_affinity()) for w in workers]
    assert len(seen) >= 4, seen  # 2 episodes x 2 seats, all forked by the one zygote
    assert sorted(map(sorted, seen.values())) == sorted([sorted(worker_cpus[0])] * 2 + [sorted(worker_cpus[1])] * 2)


def test_a_pools_workers_fork_from_the_drivers_zygote_and_play_in_its_environment_and_folder(tmp_path, monkeypatch):
    """A pool's workers are forked from the zygote its cells fork from (not fresh interpreters), yet play
    with the driver's environment and folder as they are when the pool starts, not the zygote's (which it
    took when it started, before both changed here), and the driver's secrets never pass through the
    zygote (every later cell inherits its memory). Judged from outside: the process tree and names, the
    folder the episode's relative log folder lands in, the variables its cells were given (a cell inherits
    its locale variables from its worker), and the zygote's whole memory."""
    import secrets

    from policybox.host.zygote import kept_zygotes
    from policybox.league.play.worker_pool import LocalWorkers

    with kept_zygotes() as kept:
        with LocalWorkers(1, None) as pool:
            assert pool.submit(_job(tmp_path, "first", PolicySpec(class_path="random"), steps=2)).result(timeout=120)
        ((zygote,),) = [kept.values()]
        (zygote_pid,) = zygote.pids
        monkeypatch.setenv("LC_POLICYBOX_PROBE", "set after the zygote started")
        secret = f"policybox-secret-{secrets.token_hex(8)}"
        monkeypatch.setenv("POLICYBOX_DRIVER_SECRET", secret)
        monkeypatch.chdir(tmp_path)
        reader = parse_policy_arg(policy("env_reader.py:EnvReader"))
        job = EpisodeJob(name="read", specs=[reader] * 2, entrants=["a", "b"], settings=EpisodeSettings(steps=2),
                         log_dir="relative")  # fmt: skip
        with LocalWorkers(1, None) as pool:
            result = EpisodeResult.model_validate_json(pool.submit(job).result(timeout=120))
            (worker,) = pool.pids
            assert psutil.Process(worker).ppid() == zygote_pid
            assert psutil.Process(worker).name() == process_names.WORKER
        assert _memory_holds(zygote_pid, b"policybox.cell.zygote")  # the reader reads: its own argv
        assert not _memory_holds(zygote_pid, secret.encode())
    logs = [Path(agent.log_path) for agent in result.agents]
    assert all(log.is_relative_to(tmp_path / "relative") for log in (tmp_path / log for log in logs))
    assert all("LC_POLICYBOX_PROBE" in (tmp_path / log).read_text() for log in logs)


def test_without_pidfds_a_pools_workers_are_fresh_interpreters_and_play(tmp_path, monkeypatch):
    """Where the kernel gives no pidfds (before Linux 5.3, or a seccomp profile that denies them), a forked
    worker could not be watched: the pool starts its workers as interpreters of their own instead. Judged
    from outside: the worker's parent, and the episode's result."""
    from policybox.host import zygote as host_zygote
    from policybox.host.zygote import kept_zygotes
    from policybox.league.play.worker_pool import LocalWorkers

    monkeypatch.setattr(host_zygote, "_pidfds", lambda: False)
    with kept_zygotes(), LocalWorkers(1, None) as pool:
        result = pool.submit(_job(tmp_path, "plain", PolicySpec(class_path="random"), steps=3)).result(timeout=120)
        (worker,) = pool.pids
        assert psutil.Process(worker).ppid() == os.getpid()
    assert [a.status for a in EpisodeResult.model_validate_json(result).agents] == [AgentStatus.OK] * 2


def test_a_killed_workers_cells_die_with_it_and_the_shared_zygote_serves_on(tmp_path):
    """A worker SIGKILLed while its cell spins forever in a policy's step: the zygote it shared with the
    driver kills that cell when the worker's channel closes (as the worker's own zygote would have died
    with it), and stays to serve the pool's next worker. Judged from outside: the cell's process, the
    zygote's, and the next episode's result."""
    import signal
    import time

    from policybox.host.zygote import kept_zygotes
    from policybox.league.play.worker_pool import LocalWorkers, WorkerLost

    spinner = parse_policy_arg(policy("faults.py:InfiniteLoopInStep"))
    with kept_zygotes() as kept, LocalWorkers(1, None) as pool:
        future = pool.submit(_job(tmp_path, "spins", spinner, steps=50, limits=Limits(act_timeout_ms=600_000)))
        ((zygote,),) = [kept.values()]
        (zygote_pid,) = zygote.pids
        give_up = time.monotonic() + 60
        while not (cells := _cells_of(zygote_pid)) and time.monotonic() < give_up:
            time.sleep(0.05)
        assert cells, "no cell was forked from the driver's zygote"
        while not all(_cpu_seconds(pid) > 0.5 for pid in cells):  # both seats spin in their step
            assert time.monotonic() < give_up, "the cells never reached their spinning step"
            time.sleep(0.05)
        (worker,) = pool.pids
        os.kill(worker, signal.SIGKILL)
        with pytest.raises(WorkerLost):
            future.result(timeout=30)
        give_up = time.monotonic() + 10
        while any(_running(pid) for pid in cells):
            assert time.monotonic() < give_up, "a dead worker's cells still run"
            time.sleep(0.05)
        assert psutil.Process(zygote_pid).is_running() and zygote.alive
        result = pool.submit(_job(tmp_path, "next", PolicySpec(class_path="random"), steps=5)).result(timeout=120)
        assert [a.status for a in EpisodeResult.model_validate_json(result).agents] == [AgentStatus.OK] * 2
        assert zygote.pids == {zygote_pid}


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if (link := os.readlink(f"/proc/{pid}/fd/{fd}")).startswith("socket:"):
                    inodes.add(link)
    return inodes


def test_no_cell_holds_a_control_socket_of_the_zygote_it_shares_and_knocking_forks_nothing(tmp_path):
    """A cell keeps none of the zygote's control sockets -- the host's, nor any worker's channel -- so a
    policy that writes to every datagram socket it inherited (zygote_knocker.py: a fork request that would
    hand it a cell to send an unsandboxed SETUP to, then garbage) reaches nothing. Judged from outside,
    while two workers' cells play: the socket inodes each cell holds against the zygote's (/proc) -- the
    check that fails when a forked cell keeps the channels open (tried: the knocking itself then still
    forked nothing, so another layer stops it too) -- the zygote's children (never more than the cells
    the workers asked for), and the zygote serving on."""
    import time

    from policybox.host.zygote import kept_zygotes
    from policybox.league.play.worker_pool import LocalWorkers

    knocker = parse_policy_arg(policy("zygote_knocker.py:Knocker"))
    with kept_zygotes() as kept, LocalWorkers(2, None) as pool:
        futures = [pool.submit(_job(tmp_path, f"knock-{i}", knocker, steps=30)) for i in range(2)]
        ((zygote,),) = [kept.values()]
        (zygote_pid,) = zygote.pids
        most, checked = 0, set()
        while not all(future.done() for future in futures):
            cells = set(_cells_of(zygote_pid))
            most = max(most, len(cells))
            for cell in cells - checked:
                held = _socket_inodes(cell)
                assert held and not held & _socket_inodes(zygote_pid), f"cell {cell} holds a zygote socket"
                checked.add(cell)
            time.sleep(0.02)
        results = [EpisodeResult.model_validate_json(future.result()) for future in futures]
        assert [a.status for result in results for a in result.agents] == [AgentStatus.OK] * 4
        assert len(checked) >= 2 and most <= 4  # two episodes of two cells; no cell a policy asked for
        assert zygote.alive and psutil.Process(zygote_pid).is_running()
        again = pool.submit(_job(tmp_path, "after", PolicySpec(class_path="random"), steps=5)).result(timeout=120)
        assert [a.status for a in EpisodeResult.model_validate_json(again).agents] == [AgentStatus.OK] * 2
