"""``policybox evaluate --backend ray`` on a real 2-node Ray cluster (``ray.cluster_utils.Cluster``, one
CPU per node): the same episodes and summary as the local backend, with one node killed mid-run and
the policy's own files shipped to the nodes (its original folder is gone before any episode runs).

One cluster serves every test of a worker here (``cluster``); the test that kills its worker node adds
another, so each test finds two."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import ray
from conftest import POLICIES, descendants, of_the_whole_run, policybox, policybox_process
from ray.cluster_utils import Cluster

from policybox.files import packing
from policybox.league.evaluate.journal import read_records
from policybox.league.evaluate.results_folder import episode_job, evaluate, play_tournament
from policybox.league.play import ray_backend
from policybox.league.play.tournament import Tournament, entrants
from policybox.results import EpisodeRecord, EpisodeResult
from policybox.sandbox import SandboxLevel, SandboxUnavailable
from policybox.settings import EpisodeSettings

EPISODES = 6


class TwoNodes:
    """A head and a worker node, one CPU each, and the processes they started."""

    def __init__(self) -> None:
        self.processes: set[int] = set()
        with of_the_whole_run() as started:
            self.head = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        self.processes |= started
        self.add_worker()

    def add_worker(self) -> None:
        with of_the_whole_run() as started:
            self.worker = self.head.add_node(num_cpus=1)
        self.processes |= started
        self.head.wait_for_nodes()

    def stop(self) -> None:
        """Shut the cluster down and wait until every Ray process is gone."""
        tree = []
        for pid in self.processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                root = psutil.Process(pid)
                tree += [root, *root.children(recursive=True)]
        self.head.shutdown()
        psutil.wait_procs(tree, timeout=30)


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[TwoNodes]:
    """This worker's cluster for the tests here; every Ray process gone after them."""
    nodes = TwoNodes()
    yield nodes
    nodes.stop()


@pytest.fixture
def cluster(two_nodes: TwoNodes) -> Iterator[tuple[Cluster, object]]:
    """The cluster, its two nodes up; the test's driver disconnected after it, and what the driver started
    (its own processes, not the nodes') gone."""
    yield two_nodes.head, two_nodes.worker
    ray.shutdown()
    psutil.wait_procs(descendants(), timeout=30)


def tournament(policies: Path) -> Tournament:
    """Two policies -- one a file with its own folder, shipped to the nodes -- 50 steps an episode;
    a 20 ms sleep a step makes an episode last about a second, so a node dies in the middle of one."""
    sleepy = f"{policies / 'sleepy.py'}:Sleepy,kw.sleep_s=0.02"
    return Tournament(
        entrants=entrants([sleepy, f"{policies / 'seeded_random.py'}:SeededRandom"]),
        episodes=EPISODES,
        agents=2,
        seating="rotate",
        settings=EpisodeSettings(steps=50, seed=4),
    )


def outcomes(folder: Path) -> dict[int, tuple]:
    records, _ = read_records(folder / "results.jsonl")
    return {e: (r.seed, r.seats, [(a.reward, a.action_digest, a.status) for a in r.agents]) for e, r in records.items()}


def without_timing(summary) -> dict:
    data = summary.model_dump(mode="json")
    for row in data["policies"]:
        row.pop("latency")
    return data


def kill_when_busy(cluster: Cluster, worker, results: Path, killed: dict, finished: threading.Event) -> None:
    """Once two episodes are written and the worker node is playing one (its CPU taken), remove it."""
    while not finished.wait(0.05):
        done = len(results.read_text().splitlines()) if results.exists() else 0
        # Ray's per-node view of free resources (a private helper: this test only watches with it).
        free = ray._private.state.available_resources_per_node()
        if done >= 2 and worker.node_id in free and "CPU" not in free[worker.node_id]:  # listed only when free
            killed["episodes_done"] = done
            cluster.remove_node(worker, allow_graceful=False)
            return


def test_a_ray_tournament_equals_the_local_one_with_a_node_killed_mid_run(cluster, two_nodes, tmp_path, monkeypatch):
    head, worker = cluster
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies, ignore=shutil.ignore_patterns("__pycache__"))
    board = tournament(policies)
    local = play_tournament(board, tmp_path / "local", workers=2)

    def pack_then_remove(spec):  # the nodes must play from the bundles: the originals are gone once packed
        bundle = packing.pack(spec)
        if spec == board.entrants[-1].spec:
            shutil.rmtree(policies)
        return bundle

    monkeypatch.setattr(ray_backend, "pack", pack_then_remove)
    ray.init(address=head.address, log_to_driver=False)
    killed: dict = {}
    out = tmp_path / "ray"
    finished = threading.Event()
    watcher = threading.Thread(target=kill_when_busy, args=(head, worker, out / "results.jsonl", killed, finished))
    watcher.start()
    try:
        remote = play_tournament(board, out, backend="ray", ray_address=head.address)
    finally:
        finished.set()
        watcher.join()
    two_nodes.add_worker()  # for the next test
    assert 2 <= killed["episodes_done"] < EPISODES, killed  # the node died while the tournament ran
    assert not policies.exists()
    assert outcomes(out) == outcomes(tmp_path / "local") and len(outcomes(out)) == EPISODES
    lines = (out / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["episode"] for line in lines) == list(range(EPISODES))  # each counted once
    assert without_timing(remote) == without_timing(local)
    records = [EpisodeRecord.model_validate_json(line) for line in lines]
    shown = {agent.spec.class_path for record in records for agent in record.agents}
    assert shown == {entrant.spec.class_path for entrant in board.entrants}  # the driver's paths, not a node's
    assert all(record.node and record.node.startswith("node ") for record in records)
    # The tournament folder is the local backend's: resuming it locally plays nothing and agrees.
    assert without_timing(play_tournament(board, out, workers=1)) == without_timing(local)


def test_policybox_evaluate_and_doctor_on_the_command_line(cluster, tmp_path):
    """As processes of their own: a Ray driver is its process's (ray.init), and a command that starts or
    refuses one leaves state in it that another command in the same process would meet. The game is a
    Kaggle one: the tests above play MettaGrid's on the cluster."""
    head, _ = cluster
    evaluate = [
        "evaluate",
        "--env",
        "kaggle:connectx",
        "-p",
        "kaggle:negamax",
        "-p",
        "kaggle:random",
        "--episodes",
        "2",
    ]
    evaluate += ["--out", str(tmp_path / "board"), "--backend", "ray"]
    run = policybox_process(*evaluate, "--ray-address", head.address)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads((tmp_path / "board" / "summary.json").read_text())["episodes_done"] == 2
    run = policybox_process("doctor", "--ray-address", head.address)
    assert run.returncode == 0, run.stdout + run.stderr
    nodes = re.findall(r"sandbox layers on \S+ \(\S+ (\w+)\)", run.stdout)
    assert len(set(nodes)) == 2 and run.stdout.count("│ yes ") == 2 * 13  # every layer on both nodes
    replays = policybox_process(*evaluate, "--replays")
    assert replays.returncode == 2 and "--replays is not available with --backend ray" in replays.stderr
    nowhere = policybox_process(*evaluate, "--ray-address", "127.0.0.1:1")
    assert nowhere.returncode == 2 and "cannot reach a Ray cluster at 127.0.0.1:1" in nowhere.stderr


def test_a_policy_cannot_reach_the_ray_cluster_it_runs_in(cluster, tmp_path):
    """The worst entrant on a Ray node: the cluster's head runs any task it is sent, as root. In its
    sandboxed cell the policy cannot even open a TCP connection to it, nor see Ray's files; judged
    from outside by the file its task would have written and the agent's log on disk. Without the
    sandbox the same policy takes the cluster over and plants that file as root (the control)."""
    head, _ = cluster
    marker = tmp_path / "planted"
    attacker = f"{POLICIES / 'hostile.py'}:TakeOverRay,kw.address={head.address},kw.marker={marker}"
    ray.init(address=head.address, log_to_driver=False)
    logs = {}
    for level in ("standard", "off"):
        evaluate([attacker], tmp_path / level, episodes=1, agents=1, steps=3, backend="ray", sandbox=level)
        (record,) = read_records(tmp_path / level / "results.jsonl")[0].values()
        logs[level] = Path(record.agents[0].log_path).read_text()
        if level == "standard":
            assert not marker.exists()
    assert "tcp to the Ray head: refused" in logs["standard"], logs["standard"]
    assert "read Ray's session folder: refused" in logs["standard"]
    assert "a Ray task outside the sandbox" not in logs["standard"]
    assert "tcp to the Ray head: succeeded" in logs["off"], logs["off"]
    assert marker.read_text() == "planted by a policy"  # without the sandbox it owns the cluster


def test_a_node_without_the_sandbox_level_refuses_its_episodes_naming_itself(tmp_path, monkeypatch):
    """What a Ray task runs, run here with the doctor reporting a layer missing on this 'node'."""
    from policybox.host import diagnosis as doctor

    missing = [doctor.LayerCheck(layer, False, "not on this node") for layer in doctor.Layer]
    monkeypatch.setattr(doctor, "diagnose", lambda: tuple(missing))
    monkeypatch.setattr(ray_backend, "NODE_BASE", tmp_path / "node")
    strict = Tournament(
        entrants=entrants(["random"]),
        episodes=1,
        agents=2,
        seating="rotate",
        settings=EpisodeSettings(steps=5, sandbox=SandboxLevel.STRICT),
    )
    players: list = []
    monkeypatch.setattr(ray_backend, "_players", players)
    job = episode_job(strict, strict.seat_maps()[0], tmp_path / "board", 0, False)
    try:
        with pytest.raises(SandboxUnavailable, match=r"^node \S+ \(no Ray\): strict sandbox refused, layers missing"):
            ray_backend.play_on_node(job, {})
    finally:
        for player in players:
            player.close()


def test_a_ladder_runs_on_the_cluster_and_each_match_is_what_the_engine_plays_here(cluster, tmp_path):
    """``ladder run --backend ray``: the versions' kept files shipped to the nodes, each match played
    there exactly as ``run_episode`` plays its seats and seed on this machine; the ratings a replay."""
    from sqlalchemy import func, select

    from policybox.episode import run_episode
    from policybox.ladder import Ladder, LadderSettings
    from policybox.league.ladder.schema import final_matches, match_seats, matches

    bot = tmp_path / "bot"
    shutil.copytree(POLICIES, bot, ignore=shutil.ignore_patterns("__pycache__"))
    settings = LadderSettings(settings=EpisodeSettings(steps=30, seed=3), agents=2, placement_matches=0)
    with Ladder.create(tmp_path / "cup", settings) as ladder:
        ladder.submit("seeded", f"{bot / 'seeded_random.py'}:SeededRandom")
        ladder.submit("random", "random")
        shutil.rmtree(bot)  # the ladder keeps its own copy; the nodes get that
        head = cluster[0].address
        progress = ladder.run(matches=3, workers=2, backend="ray", ray_address=head)
        assert progress.played == 3, (progress, [(r.name, r.state, r.reason) for r in ladder.standings().rows])
        assert ladder.rerate() == []
        with ladder.engine.connect() as connection:
            played = connection.execute(select(matches.c.id, matches.c.result).order_by(matches.c.id)).all()
            seats = {
                match_id: [
                    v
                    for _, v in sorted(
                        connection.execute(
                            select(match_seats.c.seat, match_seats.c.version_id).where(
                                match_seats.c.match_id == match_id
                            )
                        ).all()
                    )
                ]
                for match_id, _ in played
            }
        assert len(played) == 3
        for match_id, stored in played:
            on_cluster = EpisodeResult.model_validate(stored)
            assert on_cluster.node is not None and all(a.status == "ok" for a in on_cluster.agents)
            specs = [ladder.stored(version_id).spec for version_id in seats[match_id]]
            here = run_episode(specs, settings.settings.model_copy(update={"seed": on_cluster.seed}), tmp_path / "logs")
            assert [(a.reward, a.action_digest) for a in on_cluster.agents] == [
                (a.reward, a.action_digest) for a in here.agents
            ]
    # Its final on the cluster too (ladder final --backend ray): every match played there, none rated.
    args = ["ladder", "final", str(tmp_path / "cup"), "--rounds", "1", "--backend", "ray", "--ray-address", head]
    final = policybox(*args, "--json")
    assert final.returncode == 0, final.stderr
    shown = json.loads(final.stdout)
    assert (shown["state"], shown["played"], shown["scheduled"]) == ("done", 2, 2)  # one cycle of 2 names
    with Ladder.open(tmp_path / "cup", read_only=True) as ladder, ladder.engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(matches)).scalar() == 3
        results = connection.execute(select(final_matches.c.result)).scalars().all()
    assert all(EpisodeResult.model_validate(result).node is not None for result in results)
