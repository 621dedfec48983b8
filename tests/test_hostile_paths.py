"""The host never follows, blocks on, or parses what an entrant's submission holds.

Each attack is a real submission folder built here. Its spec names a dotted class, ``evil.Bot``, and
the folder is on its python_path (as every submission folder's is), so the host looks for ``evil.py``
in it to tell whether the policy imports torch (``policybox.host.torch_use``); ``evil.py`` is a symlink
to ``/proc/kmsg`` (a "regular file" whose read blocks for good and consumes the kernel's log), a FIFO,
a symlink to ``/dev/zero``, a symlink to a file of the organiser's outside the submission, a 1 GiB
sparse file, or a module of one long f-string that takes CPython 3.11's parser quadratic time (about
2.5 minutes for this 1 MiB one, on this machine). Each is played by ``policybox run``, ``evaluate`` and
``ladder submit``, and judged from outside: the command returns -- exit 2, with one message naming
the file, or, where only a cell could find out, its cell's reason -- the kernel's log keeps its
unread lines (its unread count, ``klogctl``), and the outside file is never opened (inotify). The
spec files a submission holds (``policy_spec.json``, ``requirements.txt``) are refused the same way.

The command runs in this process where its exit code and text are the subject; in a process of its
own, with a timeout, where the subject is that it returns at all (``/proc/kmsg``, the slow parse).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import policybox
from helpers.ladders import GAME
from helpers.slow_uploads import BOT, INIT_TIMEOUT_S, ladder, slow_to_parse

from policybox.results import EpisodeResult

MiB = 1024 * 1024
IN_ACCESS, IN_OPEN = 0x1, 0x20
SYSLOG_ACTION_SIZE_UNREAD = 9
OUTSIDE = "is a symlink to a file outside its import root"
NOT_REGULAR = "is not a regular file"


def organisers_file(tmp_path: Path) -> Path:
    """A file of the organiser's, outside every submission: a module that imports torch."""
    secret = tmp_path / "organiser" / "secret.py"
    secret.parent.mkdir()
    secret.write_text("import torch\n\nKEY = 'the organiser'\n")
    return secret


def sparse(path: Path, tmp_path: Path) -> None:
    path.write_bytes(b"")
    os.truncate(path, 1024 * MiB)


ATTACKS: dict[str, Callable[[Path, Path], object]] = {  # each makes the file at its first argument
    "/proc/kmsg": lambda path, tmp_path: path.symlink_to("/proc/kmsg"),
    "a FIFO": lambda path, tmp_path: os.mkfifo(path),
    "/dev/zero": lambda path, tmp_path: path.symlink_to("/dev/zero"),
    "a file outside": lambda path, tmp_path: path.symlink_to(organisers_file(tmp_path)),
    "1 GiB sparse": sparse,
    "a slow parse": lambda path, tmp_path: path.write_text(slow_to_parse(MiB)),
}


def submission(tmp_path: Path, attack: str) -> Path:
    """A submission folder whose policy module, ``evil.py``, is the attack."""
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "policy_spec.json").write_text(json.dumps({"class_path": "evil.Bot"}))
    ATTACKS[attack](folder / "evil.py", tmp_path)
    return folder


COMMANDS: dict[str, Callable[[Path, Path], list[str]]] = {
    "run": lambda sub, tmp_path: [
        *("run", "-p", str(sub), "--env", GAME, "--steps", "5", "--init-timeout-s", str(INIT_TIMEOUT_S)),
        *("--log-dir", str(tmp_path / "logs"), "--out", str(tmp_path / "result.json")),
    ],
    "evaluate": lambda sub, tmp_path: [
        *("evaluate", "-p", str(sub), "--env", GAME, "--steps", "5", "--init-timeout-s", str(INIT_TIMEOUT_S)),
        *("--episodes", "1", "--workers", "1", "--out", str(tmp_path / "results")),
    ],
    "ladder submit": lambda sub, tmp_path: ["ladder", "submit", str(ladder(tmp_path / "cup")), "evil", str(sub)],
}


def in_a_process(args: list[str]) -> tuple[int, str]:
    """The command in a process of its own: one that does not return within 90 s fails the test."""
    command = [sys.executable, "-m", "policybox", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, env={**os.environ, "COLUMNS": "300"})
    return done.returncode, done.stdout + done.stderr


def refusal(output: str) -> str:
    """The one line the command printed to say why (its others, if any, are progress)."""
    lines = [line for line in output.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, output
    return lines[0]


@contextlib.contextmanager
def watching(path: Path) -> Iterator[Callable[[], bytes]]:
    """inotify on ``path`` for opens and reads, by any process: yields what has been seen so far."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0 or libc.inotify_add_watch(fd, os.fsencode(path), IN_OPEN | IN_ACCESS) < 0:
        raise OSError(ctypes.get_errno(), f"inotify on {path}")

    def seen() -> bytes:
        with contextlib.suppress(BlockingIOError):
            return os.read(fd, 65536)
        return b""

    try:
        yield seen
    finally:
        os.close(fd)


@contextlib.contextmanager
def kernel_log_kept() -> Iterator[None]:
    """A marker written to the kernel's log before; after, its unread lines (those a reader of
    /proc/kmsg takes away) still hold at least the marker, and dmesg shows it."""
    marker = f"policybox test marker {uuid.uuid4()}"
    try:
        Path("/dev/kmsg").write_text(marker + "\n")
    except OSError as exc:
        pytest.skip(f"cannot write the kernel's log here ({exc.strerror}): nothing to see consumed")
    yield
    unread = ctypes.CDLL(None, use_errno=True).klogctl(SYSLOG_ACTION_SIZE_UNREAD, None, 0)
    assert unread >= len(marker), f"the kernel's log was read: {unread} bytes left unread"
    assert marker in subprocess.run(["dmesg"], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("attack", "message"),
    [
        ("a FIFO", f"evil.py (the module of evil.Bot) {NOT_REGULAR}"),
        ("/dev/zero", f"evil.py (the module of evil.Bot) {OUTSIDE} sub"),
        ("1 GiB sparse", "sub cannot be built: "),
    ],
)
def test_a_module_the_host_may_not_read_is_refused_by_name(tmp_path, command, attack, message):
    """Refused before any cell starts (the FIFO and /dev/zero, which a cell would read for ever); the
    sparse file's first MiB scanned, no more: its cell, reading the rest, finds it is no module ("source
    code string cannot contain null bytes"), or is stopped at its start-up deadline first."""
    ran = policybox(*COMMANDS[command](submission(tmp_path, attack), tmp_path), columns=300)
    code, output = ran.returncode, ran.stdout + ran.stderr
    assert code == 2 and message in refusal(output), output


@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_outside_the_submission_is_never_opened(tmp_path, command):
    secret = organisers_file(tmp_path)
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "policy_spec.json").write_text(json.dumps({"class_path": "evil.Bot"}))
    (sub / "evil.py").symlink_to(secret)
    with watching(secret) as seen:
        ran = policybox(*COMMANDS[command](sub, tmp_path), columns=300)
        code, output = ran.returncode, ran.stdout + ran.stderr
        assert not seen(), "the organiser's file was opened"
    assert code == 2 and f"evil.py (the module of evil.Bot) {OUTSIDE} sub" in refusal(output), output


def test_a_module_beside_a_package_tells_the_cell_nothing_of_the_file_it_points_to(tmp_path):
    """``pkg/`` is the policy the cell imports; ``pkg.py`` beside it (which the import system passes
    over) is a symlink to the organiser's module that imports torch. The host looks where the cell
    imports from: the cell forks from the plain zygote, and the file is never opened."""
    secret = organisers_file(tmp_path)
    sub = tmp_path / "sub"
    (sub / "pkg").mkdir(parents=True)
    (sub / "policy_spec.json").write_text(json.dumps({"class_path": "pkg.Bot"}))
    said = "import sys\n\nprint(f\"torch loaded before the policy's module: {'torch' in sys.modules}\", flush=True)\n"
    (sub / "pkg" / "__init__.py").write_text(said + BOT)
    (sub / "pkg.py").symlink_to(secret)
    with watching(secret) as seen:
        ran = policybox(*COMMANDS["run"](sub, tmp_path), columns=300)
        code, output = ran.returncode, ran.stdout + ran.stderr
        assert not seen(), "the organiser's file was opened"
    assert code == 0, output
    result = EpisodeResult.model_validate_json((tmp_path / "result.json").read_text())
    assert all(agent.status == "ok" for agent in result.agents), [agent.failure for agent in result.agents]
    logs = [Path(agent.log_path).read_text() for agent in result.agents]
    # Where the module was imported: each cell, or (forked seats) their loader, whose log is its first seat's.
    imported = [log for log in logs if "torch loaded before the policy's module" in log]
    assert imported and all("torch loaded before the policy's module: False" in log for log in imported), logs


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("attack", "message"),
    [
        ("/proc/kmsg", f"evil.py (the module of evil.Bot) {OUTSIDE} sub"),
        ("a slow parse", f"Timeout at start-up: not ready within the init timeout of {INIT_TIMEOUT_S} s"),
    ],
)
def test_a_module_that_would_hold_the_host_lets_the_command_return(tmp_path, command, attack, message):
    """``/proc/kmsg`` is refused before it is opened (the kernel's log keeps its unread lines); the slow
    module is scanned in milliseconds, and its cell, still compiling it, is stopped at its start-up
    deadline. The host used to read the first for ever, and parse the second for minutes."""
    args = COMMANDS[command](submission(tmp_path, attack), tmp_path)
    with kernel_log_kept() if attack == "/proc/kmsg" else contextlib.nullcontext():
        code, output = in_a_process(args)
    assert code == 2 and message in refusal(output), output


@pytest.mark.parametrize("name", ["policy_spec.json", "requirements.txt"])
@pytest.mark.parametrize(
    ("attack", "message"),
    [
        ("/proc/kmsg", "is a symlink to a file outside the submission folder"),
        ("a FIFO", NOT_REGULAR),
        ("/dev/zero", "is a symlink to a file outside the submission folder"),
        ("a file outside", "is a symlink to a file outside the submission folder"),
        ("1 GiB sparse", "is larger than 1048576 bytes"),
    ],
)
def test_a_spec_file_the_host_may_not_read_is_refused_by_name(tmp_path, name, attack, message):
    """Read (by ``policybox.spec``, for ``run``, ``evaluate`` and ``ladder submit`` alike) only as a
    regular file inside the submission, at most 1 MiB of it."""
    sub = submission(tmp_path, "a FIFO")  # never reached: the spec is read first
    target = sub / name
    target.unlink(missing_ok=True)
    ATTACKS[attack](target, tmp_path)
    with kernel_log_kept() if attack == "/proc/kmsg" else contextlib.nullcontext():
        ran = policybox(*COMMANDS["run"](sub, tmp_path), columns=300)
        code, output = ran.returncode, ran.stdout + ran.stderr
    assert code == 2 and f"{sub / name} {message}" in refusal(output), output


@pytest.mark.parametrize(
    ("swap", "message"),
    [
        (lambda path, secret: path.symlink_to(secret), "is a symlink that cannot be followed"),
        (lambda path, secret: os.mkfifo(path), NOT_REGULAR),
    ],
)
def test_a_file_swapped_after_its_check_is_refused_not_followed(tmp_path, monkeypatch, swap, message):
    """The check (the path, its symlinks resolved, lies in its folder) and the open are two steps: a file
    swapped between them for a symlink to the organiser's file, or for a FIFO, is refused by the open
    itself (``O_NOFOLLOW``, then ``fstat`` on what was opened) -- never followed, never blocking."""
    from policybox import untrusted_files
    from policybox.errors import SpecError
    from policybox.untrusted_files import Folder

    secret = organisers_file(tmp_path)
    spec = submission(tmp_path, "a FIFO") / "policy_spec.json"
    inside = Folder.at(spec.parent, "the submission folder")
    resolve = os.path.realpath

    def swapped_once_resolved(path, *args, **kwargs):
        resolved = resolve(path, *args, **kwargs)
        if Path(path) == spec and spec.is_file():  # the check has seen a plain file: swap it now
            spec.unlink()
            swap(spec, secret)
        return resolved

    monkeypatch.setattr(os.path, "realpath", swapped_once_resolved)
    with watching(secret) as seen:
        with pytest.raises(SpecError, match=f"^policy_spec.json {message}"):
            untrusted_files.read(spec, "policy_spec.json", inside, MiB)
        assert not seen(), "the organiser's file was opened"
