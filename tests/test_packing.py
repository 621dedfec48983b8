"""Packing a policy's files for a node that cannot see them: a relocated spec plays exactly as the original,
the bundle's bytes depend only on the files, and a hostile or tampered bundle writes nothing.

Bundles are built from real files, and hostile ones by hand (with a correct digest, so only the member
checks stand in the way); every refusal is checked on the filesystem, not only by its message.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from conftest import POLICIES

import policybox.files.packing as packing
from policybox.envs.mettagrid import ACTION, NO_VIBE
from policybox.files.packing import Bundle, PackingError, pack, relocate, spec_roots, unpack
from policybox.spec import parse_policy_arg

BOT = "from weighting import Weights  # from the python_path folder\n\n\nclass Bot(Weights):\n    pass\n"
SUBMISSION_SPEC = {"class_path": "teambot.policy.Packed", "data_path": "ckpt/weights.txt"}


@pytest.fixture
def driver(tmp_path) -> Path:
    """A policy file, its checkpoint and its python_path folder in three separate folders, plus the
    bytecode a run leaves behind (which must not travel)."""
    root = tmp_path / "driver"
    for folder in ("bots/__pycache__", "ckpt", "libs"):
        (root / folder).mkdir(parents=True)
    (root / "bots" / "bot.py").write_text(BOT)
    (root / "bots" / "__pycache__" / "bot.cpython-311.pyc").write_bytes(b"stale")
    (root / "bots" / "old.pyc").write_bytes(b"stale")
    (root / "libs" / "weighting.py").write_text((POLICIES / "weights.py").read_text())
    np.savez(root / "ckpt" / "north.npz", weights=np.array([0, 9, 0, 0, 0], dtype=float))  # move_north
    return root


def driver_spec(driver: Path):
    return parse_policy_arg(f"{driver}/bots/bot.py:Bot,data={driver}/ckpt/north.npz,path={driver}/libs")


def make_team(folder: Path) -> Path:
    """A submission folder as test_submissions builds it: a package, a checkpoint and policy_spec.json."""
    (folder / "teambot").mkdir(parents=True)
    (folder / "teambot" / "__init__.py").write_text("")
    (folder / "teambot" / "policy.py").write_text((POLICIES / "packed.py").read_text())
    (folder / "ckpt").mkdir()
    (folder / "ckpt" / "weights.txt").write_text("team-a-weights")
    (folder / "policy_spec.json").write_text(json.dumps(SUBMISSION_SPEC))
    return folder


def files_under(folder: Path) -> dict[str, bytes | None]:
    """Every path below ``folder`` and its content (None for a folder); symlinks are not followed."""
    return {
        str(path.relative_to(folder)): path.read_bytes() if path.is_file() and not path.is_symlink() else None
        for path in sorted(folder.rglob("*"))
    }


def outcome(result) -> list[tuple[float, str]]:
    return [(agent.reward, agent.action_digest) for agent in result.agents]


# -- a relocated spec plays as the original ------------------------------------------------------


def test_a_relocated_spec_plays_exactly_like_the_original(play, driver, tmp_path):
    spec = driver_spec(driver)
    original = play([spec, "random"], agents=2, steps=20, mode="inline")
    bundle = pack(spec)
    folder = unpack(bundle, tmp_path / "node")
    moved = relocate(spec, bundle, folder)
    shutil.move(driver, tmp_path / "gone")  # the node's copy is all the relocated spec may use

    assert moved.class_path == f"{folder}/0/bots/bot.py:Bot"
    assert moved.data_path == f"{folder}/1/north.npz"
    assert moved.python_path == [f"{folder}/2/libs"]
    assert moved.display_name == spec.display_name == "Bot:north.npz"
    assert moved.model_dump(exclude={"class_path", "data_path", "python_path"}) == spec.model_dump(
        exclude={"class_path", "data_path", "python_path"}
    )
    inline = play([moved, "random"], agents=2, steps=20, mode="inline")
    in_cells = play([moved, "random"], agents=2, steps=20, mode="process")
    assert outcome(inline) == outcome(in_cells) == outcome(original)
    assert original.agents[0].action_digest == hashlib.sha256(ACTION.pack(1, NO_VIBE) * 20).hexdigest()  # north
    assert "loaded weights [0.0, 9.0" in Path(in_cells.agents[0].log_path).read_text()


def test_a_submission_folder_travels_as_one_root(play, tmp_path):
    team = make_team(tmp_path / "submissions" / "team_a")
    spec = parse_policy_arg(str(team))
    assert spec_roots(spec) == [team]  # its data_path and python_path lie inside it
    bundle = pack(spec)
    moved = relocate(spec, bundle, unpack(bundle, tmp_path / "node"))
    shutil.rmtree(team)
    assert moved.name == spec.name == str(team) and moved.label == spec.label
    result = play([moved], agents=1, steps=5, mode="process")
    assert result.agents[0].status == "ok"
    assert "checkpoint: team-a-weights" in Path(result.agents[0].log_path).read_text()


@pytest.mark.parametrize("text", ["random", "mettagrid.policy.random_agent.RandomMultiAgentPolicy"])
def test_shorthands_and_dotted_paths_need_no_files(text):
    spec = parse_policy_arg(text)
    assert spec_roots(spec) == [] and pack(spec) is None


def test_roots_are_deduplicated_and_nested_ones_dropped(driver):
    spec = parse_policy_arg(
        f"{driver}/bots/bot.py:Bot,data={driver}/bots/bot.py,path={driver},path={driver}/libs,path={driver}"
    )
    assert spec_roots(spec) == [driver]
    lstm = parse_policy_arg(f"lstm,data={driver}/ckpt/north.npz")  # a shorthand still needs its checkpoint
    assert spec_roots(lstm) == [driver / "ckpt" / "north.npz"]


def test_relocate_refuses_a_path_outside_the_bundle(driver, tmp_path):
    bundle = pack(parse_policy_arg(f"{driver}/bots/bot.py:Bot"))
    other = parse_policy_arg(f"{driver}/bots/bot.py:Bot,data={driver}/ckpt/north.npz")
    with pytest.raises(PackingError, match="north.npz is under none of the bundle's roots"):
        relocate(other, bundle, tmp_path / "node")


# -- deterministic bytes ---------------------------------------------------------------------------


def test_the_same_files_give_the_same_bytes(driver):
    spec = driver_spec(driver)
    first = pack(spec)
    for path in driver.rglob("*"):
        os.utime(path, (1_000_000, 1_000_000))
    (driver / "bots" / "bot.py").chmod(0o600)  # still not executable: still 0644 in the archive
    second = pack(spec)
    assert second == first and first.digest == hashlib.sha256(first.archive).hexdigest()
    assert first.roots == (str(driver / "bots"), str(driver / "ckpt" / "north.npz"), str(driver / "libs"))

    with tarfile.open(fileobj=io.BytesIO(first.archive)) as tar:
        members = tar.getmembers()
    names = [member.name for member in members]
    assert names == ["0", "0/bots", "0/bots/bot.py", "1", "1/north.npz", "2", "2/libs", "2/libs/weighting.py"]
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, 0, "", "")}
    assert {m.mode for m in members if m.isfile()} == {0o644} and {m.mode for m in members if m.isdir()} == {0o755}

    (driver / "libs" / "weighting.py").chmod(0o755)
    assert pack(spec).digest != first.digest  # the exec bit is content: a script may need it
    (driver / "libs" / "weighting.py").chmod(0o644)
    (driver / "bots" / "bot.py").write_text(BOT.replace("pass", "paSs"))
    assert pack(spec).digest != first.digest


# -- unpacking: verified, private, once ------------------------------------------------------------


def test_unpacked_into_a_private_content_addressed_folder(driver, tmp_path):
    bundle = pack(driver_spec(driver))
    base = tmp_path / "node" / "bundles"
    folder = unpack(bundle, base)
    assert folder == base / bundle.digest
    assert stat.S_IMODE(base.stat().st_mode) == 0o700
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert stat.S_IMODE((folder / "0" / "bots" / "bot.py").stat().st_mode) == 0o644
    assert (folder / "1" / "north.npz").read_bytes() == (driver / "ckpt" / "north.npz").read_bytes()
    assert not any(folder.rglob("*.pyc")) and not any(folder.rglob("__pycache__"))
    assert unpack(bundle, base) == folder
    assert [path.name for path in base.iterdir()] == [bundle.digest]


def test_a_shared_base_folder_is_refused(driver, tmp_path):
    base = tmp_path / "planted"
    base.mkdir(mode=0o777)
    base.chmod(0o777)
    with pytest.raises(PackingError, match="must be a folder owned by uid .* with mode 700"):
        unpack(pack(driver_spec(driver)), base)


def test_a_tampered_archive_is_refused(driver, tmp_path):
    bundle = pack(driver_spec(driver))
    flipped = bytearray(bundle.archive)
    flipped[len(flipped) // 2] ^= 1
    with pytest.raises(PackingError, match="content hash mismatch"):
        unpack(Bundle(bundle.digest, bytes(flipped), bundle.roots), tmp_path / "node")
    assert not (tmp_path / "node").exists()


def test_an_archive_over_the_limit_is_refused(driver, tmp_path):
    bundle = pack(driver_spec(driver))
    with pytest.raises(PackingError, match=f"is {len(bundle.archive)} bytes, more than {len(bundle.archive) - 1}"):
        unpack(bundle, tmp_path / "node", max_bytes=len(bundle.archive) - 1)
    assert not (tmp_path / "node").exists()
    with pytest.raises(PackingError, match="files come to more than 4096 bytes"):
        pack(driver_spec(driver), max_bytes=4096)


def test_a_loser_of_the_race_uses_the_winners_folder(driver, tmp_path, monkeypatch):
    """Another process renames its copy into place just before this one does: ours is dropped."""
    bundle = pack(driver_spec(driver))
    base = tmp_path / "node"
    real_move = packing.move_into_place

    def beaten(staging: Path, target: Path) -> None:
        monkeypatch.setattr(packing, "move_into_place", real_move)
        assert unpack(bundle, base) == target  # the winner
        real_move(staging, target)

    monkeypatch.setattr(packing, "move_into_place", beaten)
    folder = unpack(bundle, base)
    assert [path.name for path in base.iterdir()] == [bundle.digest]
    assert files_under(folder / "2" / "libs") == files_under(driver / "libs")


UNPACKER = """
import pickle, sys
from pathlib import Path
from policybox.files.packing import unpack
bundle = pickle.loads(Path(sys.argv[1]).read_bytes())
print("ready", flush=True)
sys.stdin.readline()
print(unpack(bundle, Path(sys.argv[2])), flush=True)
"""


def test_two_processes_unpacking_at_once_get_one_complete_folder(driver, tmp_path):
    for index in range(200):  # enough files that the two extractions overlap
        (driver / "libs" / f"part{index:03}.txt").write_text(f"part {index}\n" * 50)
    bundle = pack(driver_spec(driver))
    (tmp_path / "bundle.pickle").write_bytes(pickle.dumps(bundle))
    base = tmp_path / "node"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-c", UNPACKER, str(tmp_path / "bundle.pickle"), str(base)]
    workers = [subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)]
    workers.append(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env))
    assert [worker.stdout.readline() for worker in workers] == ["ready\n"] * 2
    for worker in workers:  # both go at once
        worker.stdin.write("\n")
        worker.stdin.flush()
    outputs = [worker.communicate(timeout=60)[0] for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0]
    assert outputs == [f"{base / bundle.digest}\n"] * 2
    assert [path.name for path in base.iterdir()] == [bundle.digest]
    assert files_under(base / bundle.digest / "2" / "libs") == files_under(driver / "libs")


# -- hostile bundles -------------------------------------------------------------------------------


def hostile_bundle(*members: tuple[str, bytes, bytes | str], roots: int = 1) -> Bundle:
    """A bundle built by hand from (name, type, content or link target) with a correct digest."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        top = tarfile.TarInfo("0")
        top.type = tarfile.DIRTYPE
        tar.addfile(top)
        for name, kind, payload in members:
            entry = tarfile.TarInfo(name)
            entry.type = kind
            if kind == tarfile.REGTYPE:
                entry.size = len(payload)
                tar.addfile(entry, io.BytesIO(payload))
            else:
                entry.linkname = payload
                tar.addfile(entry)
    archive = buffer.getvalue()
    return Bundle(hashlib.sha256(archive).hexdigest(), archive, tuple(f"/root{i}" for i in range(roots)))


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([("0/../../../../escape", tarfile.REGTYPE, b"x")], "climbs out with '..'"),
        ([("{tmp}/absolute", tarfile.REGTYPE, b"x")], "is an absolute path"),
        ([("0/passwd", tarfile.SYMTYPE, "/etc/passwd")], "is a symlink"),
        ([("0/ok", tarfile.REGTYPE, b"x"), ("0/link", tarfile.SYMTYPE, "ok")], "is a symlink"),
        ([("0/passwd", tarfile.LNKTYPE, "/etc/passwd")], "is a hard link"),
        ([("1/extra", tarfile.REGTYPE, b"x")], r"outside its roots' folders \['0'\]"),
        ([("stray", tarfile.REGTYPE, b"x")], "outside its roots' folders"),
        ([("0/fifo", tarfile.FIFOTYPE, "")], "not a plain file or folder"),
        ([("0/null", tarfile.CHRTYPE, "")], "not a plain file or folder"),
        ([("0/twice", tarfile.REGTYPE, b"a"), ("0/twice", tarfile.REGTYPE, b"b")], "appears twice"),
    ],
)
def test_a_hostile_bundle_writes_nothing(tmp_path, members, message):
    base = tmp_path / "node" / "bundles"
    base.mkdir(parents=True, mode=0o700)
    members = [(name.replace("{tmp}", str(tmp_path)), kind, payload) for name, kind, payload in members]
    before = files_under(tmp_path)
    with pytest.raises(PackingError, match=message):
        unpack(hostile_bundle(*members), base)
    assert files_under(tmp_path) == before


def test_garbage_is_not_a_bundle(tmp_path):
    archive = b"not a tar at all" * 100
    with pytest.raises(PackingError, match="cannot be unpacked"):
        unpack(Bundle(hashlib.sha256(archive).hexdigest(), archive, ("/root0",)), tmp_path / "node")
    assert list((tmp_path / "node").iterdir()) == []


# -- hostile files at pack time --------------------------------------------------------------------


def test_a_symlink_out_of_a_submission_is_refused_when_packed(tmp_path):
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "bot.py").write_text("SECRET = 'TEAM-B'\n")
    team = make_team(tmp_path / "team_a")
    (team / "loot.py").symlink_to(tmp_path / "victim" / "bot.py")
    spec = parse_policy_arg(str(team))  # the spec's own paths are confined; the loot is not among them
    with pytest.raises(PackingError, match=f"loot.py is a symlink to {tmp_path}/victim/bot.py, outside its root"):
        pack(spec)


def test_a_symlink_inside_a_submission_is_followed(tmp_path):
    team = make_team(tmp_path / "team_a")
    (team / "ckpt" / "latest.txt").symlink_to("weights.txt")
    (team / "alias").symlink_to("teambot", target_is_directory=True)
    bundle = pack(parse_policy_arg(str(team)))
    folder = unpack(bundle, tmp_path / "node") / "0" / "team_a"
    assert (folder / "ckpt" / "latest.txt").read_text() == "team-a-weights"
    assert files_under(folder / "alias") == files_under(team / "teambot")
    assert not [path for path in folder.rglob("*") if path.is_symlink()]


@pytest.mark.parametrize("target", [".", ".."])
def test_a_symlink_loop_is_refused(tmp_path, target):
    team = make_team(tmp_path / "team_a")
    (team / "teambot" / "loop").symlink_to(target, target_is_directory=True)
    with pytest.raises(PackingError, match="a symlink to a folder that holds it"):
        pack(parse_policy_arg(str(team)))


def test_a_fifo_in_a_submission_is_refused(tmp_path):
    team = make_team(tmp_path / "team_a")
    os.mkfifo(team / "pipe")
    with pytest.raises(PackingError, match="pipe is not a regular file or folder"):
        pack(parse_policy_arg(str(team)))
