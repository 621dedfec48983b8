"""Cleanup a hostile cell cannot break: whatever a policy leaves in its scratch folder (folders nested
deeper than any path, crowds of files, modes it took away, symlinks out) is removed after its
episode, or by the next host's sweep, and the host never crashes on it."""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from pathlib import Path

import pytest
from conftest import policy

from policybox.host import remove
from policybox.host.remove import MAX_PROBLEM_LINES, remove_tree
from policybox.host.sandbox import SCRATCH_PREFIX, _sweep_scratch
from policybox.results import AgentStatus

DEAD_PID = 2**22 + 12345  # above pid_max: no such process can exist
NOBODY = 65534


def make_chain(root: Path, depth: int, name: str = "d", lock_every: int = 0) -> None:
    """``depth`` nested folders under ``root`` made relative to each other (no path string could reach
    the bottom); every ``lock_every``-th level also holds a chmod 000 folder with a chmod 000 file."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(depth):
            os.mkdir(name, dir_fd=fd)
            if lock_every and level % lock_every == 0:
                os.mkdir("locked", dir_fd=fd)
                locked = os.open("locked", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(os.open("secret", os.O_CREAT | os.O_WRONLY, 0, dir_fd=locked))
                os.fchmod(locked, 0)
                os.close(locked)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(os.open("bottom", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
    finally:
        os.close(fd)


def chown_tree(root: Path, uid: int) -> None:
    for folder, folders, files in os.walk(root):
        for name in [*folders, *files]:
            os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)
    os.chown(root, uid, uid)


def as_user(uid: int, action) -> list[str]:
    """Run ``action()`` in a forked child with an unprivileged uid; its JSON-able answer."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.write(write, json.dumps(action()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(answer)


# --- remove_tree -------------------------------------------------------------------------------


def test_remove_a_chain_deeper_than_any_path(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    make_chain(root, 20_000)
    assert remove_tree(root) == []
    assert not root.exists()


def test_remove_a_crowd_of_files_and_folders(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    for i in range(20):
        (root / f"sub{i}").mkdir()
        for j in range(100):
            (root / f"sub{i}" / str(j)).touch()
    for j in range(3_000):
        (root / f"file{j}").touch()
    assert remove_tree(root) == []
    assert not root.exists()


def test_remove_folders_and_files_whose_mode_was_taken_away(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    make_chain(root, 50, lock_every=7)
    (root / "closed").mkdir()
    (root / "closed" / "inner").mkdir()
    (root / "closed" / "inner" / "f").touch()
    (root / "closed" / "inner").chmod(0)
    (root / "closed").chmod(0)
    root.chmod(0o500)  # even the root: no writing
    assert remove_tree(root) == []
    assert not root.exists()


def test_an_unprivileged_owner_fixes_the_modes_it_took_away():
    """Not root, so no file mode is ignored: the walk must give itself rwx before going in."""
    parent = Path(tempfile.mkdtemp())
    try:
        parent.chmod(0o755)
        root = parent / "tree"
        root.mkdir()
        make_chain(root, 300, lock_every=50)
        (root / "closed").mkdir()
        (root / "closed" / "f").touch()
        chown_tree(root, NOBODY)
        os.chown(parent, NOBODY, NOBODY)
        (root / "closed").chmod(0)
        (root / "closed" / "f").chmod(0)
        assert as_user(NOBODY, lambda: remove_tree(root)) == []
        assert not root.exists()
    finally:
        remove_tree(parent)


def test_what_cannot_be_removed_is_reported_in_a_few_lines(tmp_path):
    """An unprivileged walk cannot remove root's files: each is a problem, the list is capped."""
    parent = Path(tempfile.mkdtemp())
    try:
        parent.chmod(0o755)
        root = parent / "tree"
        (root / "theirs").mkdir(parents=True)
        for i in range(30):
            (root / "theirs" / f"f{i}").touch()
        (root / "mine.txt").touch()
        chown_tree(root, NOBODY)
        os.chown(root / "theirs", 0, 0)  # root's folder: nobody may not empty it
        os.chown(parent, NOBODY, NOBODY)
        problems = as_user(NOBODY, lambda: remove_tree(root))
        assert len(problems) == MAX_PROBLEM_LINES + 1
        assert problems[-1] == f"... and {30 - MAX_PROBLEM_LINES} more problems"  # one per file of theirs
        assert f"{root}/theirs/f" in problems[0] and "Permission denied" in problems[0]
        assert not (root / "mine.txt").exists()
        assert len(list((root / "theirs").iterdir())) == 30
    finally:
        assert remove_tree(parent) == []


def test_symlinks_are_removed_never_followed(tmp_path):
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "keep.txt").write_text("keep")
    (outside / "sub" / "keep.txt").write_text("keep")
    root = tmp_path / "tree"
    (root / "a").mkdir(parents=True)
    (root / "a" / "to_folder").symlink_to(outside)
    (root / "a" / "to_file").symlink_to(outside / "keep.txt")
    (root / "to_sub").symlink_to(outside / "sub")
    (root / "dangling").symlink_to(tmp_path / "nothing")
    assert remove_tree(root) == []
    assert not root.exists()
    assert (outside / "keep.txt").read_text() == "keep"
    assert (outside / "sub" / "keep.txt").read_text() == "keep"
    # A symlink given as the root is itself removed, its target kept.
    link = tmp_path / "link"
    link.symlink_to(outside)
    assert remove_tree(link) == []
    assert not link.is_symlink() and (outside / "sub" / "keep.txt").exists()


def test_two_removals_of_one_tree_at_once_both_succeed(tmp_path):
    """As when two hosts sweep the same dead host's folder: what the other removed is simply gone."""
    root = tmp_path / "tree"
    root.mkdir()
    make_chain(root, 3_000)
    for i in range(20):
        make_chain(root, 100, name=f"side{i}")
    answers: list[list[str]] = []
    threads = [threading.Thread(target=lambda: answers.append(remove_tree(root))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [[], []]
    assert not root.exists()


def test_missing_paths_files_and_nonsense_never_raise(tmp_path):
    assert remove_tree(tmp_path / "nothing") == []
    (tmp_path / "f").write_text("x")
    assert remove_tree(tmp_path / "f") == []
    assert not (tmp_path / "f").exists()
    assert remove_tree("/") == ["/: refusing to remove it"]


def test_a_folder_moved_away_during_the_walk_is_left_alone(tmp_path, monkeypatch):
    """If the folder being emptied is moved out of the tree meanwhile, ``..`` no longer leads back
    to where the walk came from: that folder is left alone and the rest of the tree is removed."""
    root = tmp_path / "tree"
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "b" / "c" / "trigger").touch()
    (root / "a" / "b" / "c" / "more").touch()
    (root / "a" / "sibling.txt").touch()
    elsewhere = tmp_path / "elsewhere"
    real_unlink = os.unlink

    def unlink(name, *, dir_fd=None):
        if name == "trigger":
            os.rename(root / "a" / "b" / "c", elsewhere)
        real_unlink(name, dir_fd=dir_fd)

    monkeypatch.setattr(remove.os, "unlink", unlink)
    problems = remove_tree(root)
    assert len(problems) == 1 and "moved away during removal" in problems[0]
    assert elsewhere.is_dir()  # the moved folder (emptied already, but not removed: it is not ours now)
    assert not root.exists()


# --- the host's cleanup ------------------------------------------------------------------------


def scratch_root(agent) -> Path:
    match = re.search(r"scratch (\S+)", agent.sandbox.get("filesystem", ""))
    assert match, agent.sandbox
    return Path(match.group(1)).parent


def test_a_littered_scratch_folder_is_removed_after_the_episode(play):
    result = play([policy("litter.py:Litter"), "random"], agents=2, steps=5)
    assert result.steps == 5
    assert [a.status for a in result.agents] == [AgentStatus.OK, AgentStatus.OK]
    assert "littered" in Path(result.agents[0].log_path).read_text()
    root = scratch_root(result.agents[0])
    assert root.name.startswith(f"{SCRATCH_PREFIX}{os.getpid()}-")
    assert not root.exists()
    again = play(["random"], agents=2, steps=5)
    assert [a.status for a in again.agents] == [AgentStatus.OK, AgentStatus.OK]


def test_the_sweep_removes_a_hostile_tree_a_dead_host_left(play, tmp_path):
    # Built aside and moved into place at once: other hosts on this machine sweep the same folders.
    built = tmp_path / "stale"
    (built / "agent-0").mkdir(parents=True)
    make_chain(built / "agent-0", 20_000, lock_every=1000)
    (built / "agent-0").chmod(0)
    built.chmod(0)
    stale = Path(tempfile.gettempdir()) / f"{SCRATCH_PREFIX}{DEAD_PID}-x"
    built.rename(stale)
    try:
        result = play(["noop"], agents=1, steps=2)  # its ScratchRoot sweeps first
        assert result.agents[0].status == AgentStatus.OK
        assert not stale.exists()
        _sweep_scratch()  # and a sweep with nothing to do is quiet too
    finally:
        remove_tree(stale)


def test_the_sweep_never_raises(monkeypatch, tmp_path):
    def broken(*args, **kwargs):
        raise OSError(5, "Input/output error")

    # A temporary folder of its own: every other host on the machine (the other test worker's) sweeps
    # the shared one, and would remove the folder this test sees stay.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    stale = Path(tempfile.gettempdir()) / f"{SCRATCH_PREFIX}{DEAD_PID}-y"
    stale.mkdir()
    try:
        monkeypatch.setattr(remove.os, "scandir", broken)
        _sweep_scratch()  # the folder cannot be listed: it stays, quietly
        assert stale.exists()
        monkeypatch.setattr(Path, "glob", broken)
        _sweep_scratch()
    finally:
        monkeypatch.undo()
        remove_tree(stale)
    assert not stale.exists()


@pytest.mark.parametrize("fail", ["glob", "rmdir"])
def test_the_cgroup_sweep_never_raises(tmp_path, monkeypatch, fail):
    from policybox.host import cgroup

    (tmp_path / f"policybox-{DEAD_PID}-0").mkdir()

    def broken(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, fail, broken)
    cgroup.sweep(tmp_path)
