"""Uploads cost what they weigh: an entrant's zip, sent as the worst entrant would send it.

A bomb (1.5 GiB of zeros in a 1.5 MiB zip), too many entries, one huge file, a table of entries too
large to read, names the filesystem would refuse, a spec whose init_kwargs or env is huge: each is
refused with one clear message (HTTP 413 or 400 naming what to fix; ``ladder submit`` exit 2, one
line), over the web page and the command line. Judged from outside: the status and the body, the exit
code and stderr, the files left in the temporary folder and in DIR/versions (nothing but the accepted
versions'), the SQL the pages send (no version's spec), and a live ``ladder serve``'s peak memory
(VmHWM in /proc) and how fast its standings answer while a large upload is received and processed.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import POLICIES
from helpers.ladders import EXAMPLES, api_ladder, ladder_command
from helpers.servers import serving, standings_seconds
from helpers.web import upload
from sqlalchemy import event
from starlette.testclient import TestClient

from policybox.host.uids import LOCK_DIR_NAME
from policybox.league.web.app import make_app

MiB = 1024 * 1024
SPEC = {"class_path": "bot.py:Wanderer"}
BOT = (EXAMPLES / "wanderer.py").read_text()


def submission(path: Path, extra: dict[str, bytes | str] | None = None, spec: dict | None = None) -> Path:
    """A submission zip: policy_spec.json, bot.py (the wanderer) and ``extra`` entries."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("policy_spec.json", json.dumps(spec or SPEC))
        archive.writestr("bot.py", BOT)
        for name, content in (extra or {}).items():
            archive.writestr(name, content)
    return path


def zeros_zip(path: Path, size: int, *names: str) -> Path:
    """A submission with ``size`` bytes of zeros in each entry of ``names`` (default ``zeros.bin``),
    written a MiB at a time (never in memory)."""
    submission(path)
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as archive:
        for name in names or ("zeros.bin",):
            with archive.open(name, "w") as entry:
                for _ in range(size // MiB):
                    entry.write(bytes(MiB))
    return path


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    """1.5 GiB of zeros in a zip of 1.5 MiB, made once."""
    path = zeros_zip(tmp_path_factory.mktemp("bomb") / "bomb.zip", 1536 * MiB)
    assert path.stat().st_size < 2 * MiB
    return path


def patched(path: Path, old: bytes, new: bytes) -> Path:
    """The zip with every ``old`` (an entry name, in its local and central headers) replaced by ``new``."""
    data = path.read_bytes()
    assert data.count(old) == 2 and len(old) == len(new)
    path.write_bytes(data.replace(old, new))
    return path


def listing(*folders: Path) -> set[str]:
    """Every path under ``folders`` but the cells' uid lock folder (policybox.host.uids), which the
    build check's cell makes in the temporary folder and leaves empty: a lock file left in it is listed."""
    return {str(path) for folder in folders for path in folder.rglob("*") if path.name != LOCK_DIR_NAME}


def first_version(folder: Path) -> set[str]:
    """What a ladder's first version adds to DIR/versions: its spec file, its files' copy, and the
    store's own folders and digest key."""
    versions = folder / "versions"
    copy = Path(json.loads((versions / "specs" / "1.json").read_text())["files"])
    made = [versions / name for name in ("specs", "specs/1.json", "files", ".digest-key")]
    return {*map(str, made), str(copy), *listing(copy)}


@pytest.fixture
def ladder_folder(tmp_path, database_url, temp_folder) -> tuple[Path, str]:
    """A ladder with small caps (8 entries, 2 MiB a file, 3 MiB in all) and team gamma's token."""
    folder = tmp_path / "cup"
    with api_ladder(folder, database_url, max_entries=8, max_file_mb=2, max_unpacked_mb=3) as ladder:
        token = ladder.token("gamma")
    return folder, token


def test_oversized_zips_are_refused_before_a_byte_is_written(ladder_folder, bomb, tmp_path, temp_folder):
    """413, naming the cap passed; nothing new in the temporary folder nor in DIR/versions, and an
    honest upload after them is stored (it alone is new)."""
    folder, token = ladder_folder
    gamma = {"Authorization": f"Bearer {token}"}
    commented = submission(tmp_path / "commented.zip")
    with zipfile.ZipFile(commented, "a") as archive:  # 6 entries whose table of entries is 300 KB
        for index in range(4):
            info = zipfile.ZipInfo(f"note{index}.txt")
            info.comment = b"c" * 65_000
            archive.writestr(info, "")
    cases = [
        (bomb, rf"entry 'zeros.bin' unpacks to {1536 * MiB} bytes, more than {2 * MiB}$"),
        (zeros_zip(tmp_path / "big.zip", 3 * MiB, "ckpt/big.bin"), rf"entry 'ckpt/big.bin' unpacks to {3 * MiB} bytes"),
        (submission(tmp_path / "many.zip", {f"f{i}.txt": "" for i in range(7)}), r"holds 9 entries, more than 8$"),
        (
            submission(tmp_path / "sum.zip", {f"w{i}.bin": bytes(MiB) for i in range(3)}),
            r"\d+ bytes, more than 3145728$",
        ),
        (commented, r"its table of entries is 260\d{3} bytes, more than 8 entries need \(69632\)$"),
    ]
    versions = folder / "versions"
    with TestClient(make_app(folder)) as client:
        before = listing(temp_folder, versions)
        for path, message in cases:
            refused = upload(client, path, "walker", gamma)
            assert refused.status_code == 413, refused.text
            assert re.search(message, refused.json()["error"]), refused.text
        assert listing(temp_folder, versions) == before
        made = upload(client, submission(tmp_path / "walker.zip"), "walker", gamma)
        assert made.status_code == 201, made.text
        assert listing(temp_folder, versions) - before == first_version(folder)
    assert not listing(temp_folder)


def test_a_zip_that_lies_about_its_sizes_is_refused_and_leaves_nothing(ladder_folder, tmp_path, temp_folder):
    """Headers that claim 100 bytes for 4 MiB of zeros: what is read is checked, and refused."""
    folder, token = ladder_folder
    path = zeros_zip(tmp_path / "liar.zip", 4 * MiB)
    data = bytearray(path.read_bytes())
    local, central = data.index(b"zeros.bin"), data.rindex(b"zeros.bin")
    for at in (local - 30 + 22, central - 46 + 24):  # the uncompressed size in each header
        data[at : at + 4] = (100).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    before = listing(temp_folder, folder / "versions")
    with TestClient(make_app(folder)) as client:
        refused = upload(client, path, "walker", {"Authorization": f"Bearer {token}"})
    assert refused.status_code == 400 and "entry 'zeros.bin' cannot be read" in refused.json()["error"], refused.text
    assert listing(temp_folder, folder / "versions") == before


HOSTILE_NAMES = [
    # (name written, bytes patched in after (same length), what the message says)
    ("bot-\u00e9.py", ("\u00e9".encode(), b"\xff\xfe"), r"entry b'bot-\xff\xfe.py' is flagged UTF-8 but is not"),
    ("a" * 300, None, f"entry '{'a' * 80}'... has a part longer than 255 bytes"),
    ("/".join(["deep"] * 1000), None, "... is longer than 1024 bytes"),
    ("/".join(["d"] * 40), None, "is more than 32 folders deep"),
    ("team\\bot.py", None, r"entry 'team\\bot.py' holds a backslash"),
    ("botX.py", (b"botX.py", b"bot\x00.py"), r"entry 'bot\x00.py' holds a NUL or another control character"),
    ("bot\x1b[2J.py", None, r"entry 'bot\x1b[2J.py' holds a NUL or another control character"),
]


@pytest.mark.parametrize(("name", "patch", "message"), HOSTILE_NAMES, ids=lambda value: str(value)[:12])
def test_hostile_entry_names_are_a_400_naming_the_entry(ladder_folder, tmp_path, temp_folder, name, patch, message):
    folder, token = ladder_folder
    path = submission(tmp_path / "hostile.zip", {name: "x"})
    if patch:
        patched(path, *patch)
    before = listing(temp_folder, folder / "versions")
    with TestClient(make_app(folder)) as client:
        refused = upload(client, path, "walker", {"Authorization": f"Bearer {token}"})
    assert refused.status_code == 400, refused.text
    assert message in refused.json()["error"]
    assert listing(temp_folder, folder / "versions") == before


def test_the_command_line_refuses_the_same_in_one_line(ladder_folder, bomb, tmp_path, temp_folder):
    """``ladder submit``: exit 2, one line naming what to fix; nothing left in the temporary folder."""
    folder, _ = ladder_folder
    cases = [
        (bomb, f"entry 'zeros.bin' unpacks to {1536 * MiB} bytes, more than {2 * MiB}"),
        (patched(submission(tmp_path / "nul.zip", {"botX.py": "x"}), b"botX.py", b"bot\x00.py"), "holds a NUL"),
        (submission(tmp_path / "kw.zip", spec={**SPEC, "init_kwargs": {"blob": "x" * 70_000}}), "init_kwargs is"),
    ]
    before = listing(temp_folder, folder / "versions")
    for path, message in cases:
        refused = ladder_command("submit", str(folder), "walker", str(path))
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert listing(temp_folder, folder / "versions") == before
    made = ladder_command("submit", str(folder), "walker", str(submission(tmp_path / "walker.zip")))
    assert made.returncode == 0, made.stderr
    assert listing(temp_folder, folder / "versions") - before == first_version(folder)


def test_huge_init_kwargs_env_or_spec_files_are_refused(ladder_folder, tmp_path, temp_folder):
    folder, token = ladder_folder
    big = "x" * 70_000  # over the 64 KiB cap; 120 MiB would be refused the same, by the spec file's cap first
    cases = [
        ({**SPEC, "init_kwargs": {"blob": big}}, "init_kwargs is 70012 bytes as JSON, more than 65536"),
        ({**SPEC, "env": {"BLOB": big}}, "env is 70012 bytes as JSON, more than 65536"),
        ({**SPEC, "init_kwargs": {"blob": "x" * (MiB + 1)}}, "policy_spec.json is larger than 1048576 bytes"),
    ]
    before = listing(temp_folder, folder / "versions")
    with TestClient(make_app(folder)) as client:
        for spec, message in cases:
            refused = upload(
                client, submission(tmp_path / "kw.zip", spec=spec), "walker", {"Authorization": f"Bearer {token}"}
            )
            assert refused.status_code == 400 and message in refused.json()["error"], refused.text
    assert listing(temp_folder, folder / "versions") == before
    kw = ladder_command("submit", str(folder), "walker", f"{POLICIES / 'weights.py'}:Weights,kw.blob={big}")
    assert kw.returncode == 2 and "init_kwargs is 70012 bytes as JSON" in kw.stderr, kw.stderr


def test_pages_never_read_a_versions_spec(database_url, tmp_path, temp_folder):
    """The SQL the standings, queue, matches and name pages send selects no versions.spec column
    (a spec may be 128 KiB; every open tab polls the standings); the name page alone reads the source."""
    folder = tmp_path / "cup"
    with api_ladder(folder, database_url) as ladder:
        ladder.submit("walker", f"{EXAMPLES / 'wanderer.py'}:Wanderer,kw.blob={'x' * 60_000}")
        ladder.submit("noop", "noop")
    with TestClient(make_app(folder)) as client:
        statements: list[str] = []
        engine = client.app.state.site.reader.engine
        listen = (engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
        event.listen(*listen)
        try:
            for path in ("/api/standings", "/", "/api/queue", "/queue", "/api/matches", "/matches"):
                assert client.get(path).status_code == 200, path
            assert statements and not [s for s in statements if "versions.spec" in s or "versions.source" in s]
            statements.clear()
            assert client.get("/api/names/walker").status_code == 200
            assert not [s for s in statements if "versions.spec" in s] and any(
                "versions.source" in s for s in statements
            )
        finally:
            event.remove(*listen)


# ---------------------------------------------------------------------------------------------
# A live server


def peak_rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) / 1024


def post_zip(url: str, token: str, path: Path, name: str) -> tuple[int, str]:
    """POST /api/submit as a browser's form would, the file streamed from disk."""
    boundary = "policybox-test-boundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\n{name}\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{path.name}"\r\n'
        "Content-Type: application/zip\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    def body() -> Iterator[bytes]:
        yield head
        with path.open("rb") as file:
            while chunk := file.read(MiB):
                yield chunk
        yield tail

    request = urllib.request.Request(
        url + "/api/submit",
        data=body(),
        method="POST",
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Content-Length": str(len(head) + path.stat().st_size + len(tail)),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


@pytest.mark.alone  # each standings answer within 5 s: a wall-clock time the other worker's test would share
def test_a_large_upload_never_blocks_the_standings_nor_fills_memory(tmp_path, bomb, temp_folder):
    """A live server receives a 64 MiB upload that unpacks to 320 MiB (under the default caps), then
    the 1.5 GiB bomb: meanwhile its standings answer, each within 5 s, and its peak memory stays
    under 300 MiB (the tar built in memory took 2.8 GiB for the bomb); nothing is left in its
    temporary folder but what it keeps of the version in DIR/versions."""
    folder = tmp_path / "cup"
    with api_ladder(folder) as ladder:
        token = ladder.token("gamma")
        ladder.submit("walker", f"{EXAMPLES / 'wanderer.py'}:Wanderer")
    large = zeros_zip(tmp_path / "large.zip", 128 * MiB, "ckpt/zeros.bin", "ckpt/more-zeros.bin")
    with zipfile.ZipFile(large, "a", zipfile.ZIP_STORED) as archive, archive.open("ckpt/noise.bin", "w") as entry:
        for _ in range(64):  # incompressible: 64 MiB sent
            entry.write(os.urandom(MiB))
    with serving(folder, tmp_path / "serve.log") as (url, serve):
        baseline = standings_seconds(url)
        answers: dict[str, tuple[int, str]] = {}

        def send() -> None:
            answers["large"] = post_zip(url, token, large, "bigbot")
            answers["bomb"] = post_zip(url, token, bomb, "bomb")

        sender = threading.Thread(target=send)
        sender.start()
        timings = []
        while sender.is_alive():
            seconds = standings_seconds(url)
            assert seconds is not None and seconds < 5, (seconds, baseline)
            timings.append(seconds)
            time.sleep(0.2)
        sender.join()
        peak = peak_rss_mib(serve.pid)
        assert answers["large"][0] == 201, answers
        assert answers["bomb"][0] == 413 and "more than 268435456" in answers["bomb"][1], answers
        assert len(timings) >= 3, timings  # the standings were asked while the upload was in flight
        assert peak < 300, f"peak RSS {peak:.0f} MiB"
        assert not listing(temp_folder)
    print(f"standings during the upload: {len(timings)} answers, max {max(timings):.2f} s; peak RSS {peak:.0f} MiB")


def test_ladder_init_sets_the_caps(tmp_path, temp_folder):
    folder = tmp_path / "cup"
    made = ladder_command("init", str(folder), "--env", str(EXAMPLES / "moves.yaml"), "--max-entries", "3")
    assert made.returncode == 0, made.stderr
    refused = ladder_command(
        "submit", str(folder), "walker", str(submission(tmp_path / "four.zip", {"a.txt": "", "b.txt": ""}))
    )
    assert refused.returncode == 2 and "holds 4 entries, more than 3" in refused.stderr, refused.stderr
    assert ladder_command("submit", str(folder), "walker", str(submission(tmp_path / "two.zip"))).returncode == 0
