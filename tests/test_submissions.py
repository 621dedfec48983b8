"""Submissions as entrants hand them in: folders, MettaGrid zips and tar.gz files, each confined to itself.

A submission is hostile input. These tests play the entrant: they point a submission at another
team's files, and hand in zips and tar.gz files that climb out, name absolute paths, hold symlinks,
links or devices, too many files or a bomb. Each must be refused with a SpecError that names the
offending entry, with nothing written outside the extraction root; an honest submission must still
play.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import re
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import POLICIES

import policybox.submission as submission
from policybox.results import AgentStatus
from policybox.spec import SpecError, parse_policy_arg

SPEC = {"class_path": "teambot.policy.Packed", "data_path": "ckpt/weights.txt", "init_kwargs": {}}
# What MettaGrid's own tools write (SubmissionPolicySpec.model_dump_json) besides the above.
METTAGRID_EXTRAS = {"policy_env_interface": None, "setup_script": None}


@pytest.fixture
def unpacked(tmp_path, monkeypatch) -> Path:
    """Unpack zips under this test's folder instead of the real temp folder."""
    root = tmp_path / "unpacked"
    monkeypatch.setattr(submission, "submissions_root", lambda: root)
    return root


@pytest.fixture
def submissions(tmp_path) -> Path:
    """Submissions under a folder only root may enter, as the README asks; a victim among them."""
    root = tmp_path / "submissions"
    (root / "victim").mkdir(parents=True)
    (root / "victim" / "bot.py").write_text("SECRET = 'TEAM-B-WINNING-STRATEGY'\n")
    root.chmod(0o700)
    return root


def make_zip(path: Path, files: dict[str, str | bytes], spec: dict | None = None) -> Path:
    """A zip holding ``files`` and, unless ``spec`` is None, a ``policy_spec.json``."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        if spec is not None:
            archive.writestr("policy_spec.json", json.dumps(spec))
        for name, content in files.items():
            archive.writestr(name, content)
    return path


def good_zip(path: Path) -> Path:
    files = {
        "teambot/__init__.py": "",
        "teambot/policy.py": (POLICIES / "packed.py").read_text(),
        "ckpt/weights.txt": "team-a-weights",
    }
    return make_zip(path, files, {**SPEC, **METTAGRID_EXTRAS})


def everything_under(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


# -- submission folders --------------------------------------------------------------------------


def test_a_legit_submission_folder_plays(play, submissions):
    team = submissions / "team_a"
    (team / "teambot").mkdir(parents=True)
    (team / "teambot" / "__init__.py").write_text("")
    (team / "teambot" / "policy.py").write_text((POLICIES / "packed.py").read_text())
    (team / "ckpt").mkdir()
    (team / "ckpt" / "weights.txt").write_text("team-a-weights")
    (team / "policy_spec.json").write_text(json.dumps({**SPEC, "name": "victim"}))
    agent, other = play([str(team), "noop"], agents=2, steps=5).agents
    assert agent.status == other.status == AgentStatus.OK, agent.failure
    assert agent.policy == str(team)  # the operator's argument, not the declared name
    assert agent.spec.label == "victim"
    assert "checkpoint: team-a-weights" in Path(agent.log_path).read_text()


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"data_path": "../victim"}, "data_path '../victim'"),
        ({"class_path": "../victim/bot.py:Bot"}, "class_path '../victim/bot.py:Bot'"),
        ({"python_path": ["../victim"]}, r"python_path\[0\] '../victim'"),
    ],
)
def test_a_submission_folder_cannot_reach_another(submissions, fields, field):
    team = submissions / "team_a"
    team.mkdir()
    (team / "bot.py").write_text("")
    (team / "policy_spec.json").write_text(json.dumps({"class_path": "bot.py:Bot", **fields}))
    with pytest.raises(SpecError, match=f"{field} resolves outside the submission folder {team}$"):
        parse_policy_arg(str(team))


def test_a_symlink_to_another_submission_is_refused(submissions):
    team = submissions / "team_a"
    team.mkdir()
    (team / "bot.py").symlink_to(submissions / "victim" / "bot.py")
    (team / "policy_spec.json").write_text(json.dumps({"class_path": "bot.py:Bot"}))
    with pytest.raises(SpecError, match="class_path 'bot.py:Bot' resolves outside the submission folder"):
        parse_policy_arg(str(team))


# -- submission zips -----------------------------------------------------------------------------


def test_a_good_zip_plays_under_the_operators_name(play, tmp_path, unpacked, monkeypatch):
    monkeypatch.chdir(tmp_path)
    good_zip(tmp_path / "team_a.zip")
    agent, other = play(["team_a.zip", "noop"], agents=2, steps=5).agents
    assert agent.status == other.status == AgentStatus.OK, agent.failure
    assert agent.policy == "team_a.zip"
    assert "checkpoint: team-a-weights" in Path(agent.log_path).read_text()


def test_a_zip_is_unpacked_once_into_a_private_folder(tmp_path, unpacked):
    zip_path = good_zip(tmp_path / "team_a.zip")
    spec = parse_policy_arg(str(zip_path))
    folder = Path(spec.python_path[0])
    assert folder.parent == unpacked.resolve() and len(folder.name) == 16
    assert stat.S_IMODE(unpacked.stat().st_mode) == 0o700
    assert stat.S_IMODE(folder.stat().st_mode) == stat.S_IMODE((folder / "teambot").stat().st_mode) == 0o755
    assert stat.S_IMODE((folder / "ckpt" / "weights.txt").stat().st_mode) == 0o644
    assert spec.data_path == str(folder / "ckpt" / "weights.txt")
    assert parse_policy_arg(str(zip_path)).python_path[0] == str(folder)  # reused, not unpacked again
    assert everything_under(unpacked) == everything_under(folder.parent)  # no staging folder left
    assert [path.name for path in unpacked.iterdir()] == [folder.name]


def test_a_zip_submission_is_confined_too(tmp_path, unpacked, submissions):
    zip_path = make_zip(tmp_path / "team_a.zip", {}, {"class_path": f"{submissions}/victim/bot.py:Bot"})
    with pytest.raises(SpecError, match=f"class_path '{submissions}/victim/bot.py:Bot' resolves outside"):
        parse_policy_arg(str(zip_path))


def symlink_entry(archive: zipfile.ZipFile) -> None:
    info = zipfile.ZipInfo("teambot/evil")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    archive.writestr(info, "../../../victim")


def fifo_entry(archive: zipfile.ZipFile) -> None:
    info = zipfile.ZipInfo("evil")
    info.external_attr = (stat.S_IFIFO | 0o644) << 16
    archive.writestr(info, "")


@pytest.mark.parametrize(
    ("add", "message"),
    [
        (lambda archive: archive.writestr("../evil", "x"), r"entry '\.\./evil' climbs out with '\.\.'"),
        (lambda archive: archive.writestr("teambot/../../evil", "x"), "entry 'teambot/../../evil' climbs out"),
        (lambda archive: archive.writestr("/tmp/evil", "x"), "entry '/tmp/evil' is an absolute path"),
        (symlink_entry, "entry 'teambot/evil' is a symlink"),
        (fifo_entry, "entry 'evil' is not a plain file or folder"),
    ],
)
def test_a_hostile_entry_is_refused_and_nothing_is_written(tmp_path, unpacked, add, message):
    zip_path = good_zip(tmp_path / "team_a.zip")
    with zipfile.ZipFile(zip_path, "a") as archive:
        add(archive)
    with pytest.raises(SpecError, match=f"submission {zip_path}: {message}"):
        parse_policy_arg(str(zip_path))
    assert not list(Path("/tmp").glob("evil")) and not list(tmp_path.rglob("evil"))
    assert list(unpacked.iterdir()) == []  # not even the honest entries of a hostile zip


def test_too_many_files(tmp_path, unpacked, monkeypatch):
    zip_path = make_zip(tmp_path / "many.zip", {f"f{i}.txt": "" for i in range(5)}, SPEC)
    with pytest.raises(SpecError, match="holds 6 entries, more than 5"):
        parse_policy_arg(str(zip_path), limits=submission.ZipLimits(max_entries=5))
    assert list(unpacked.iterdir()) == []


def test_a_zip_bomb(tmp_path, unpacked):
    zip_path = make_zip(tmp_path / "bomb.zip", {"bomb.bin": bytes(4 * 1024 * 1024)}, SPEC)
    assert zip_path.stat().st_size < 64 * 1024  # tiny, but inflates 64 times past the cap
    with pytest.raises(SpecError, match=r"unpacks to \d+ bytes, more than 65536"):
        parse_policy_arg(str(zip_path), limits=submission.ZipLimits(max_bytes=64 * 1024))
    assert list(unpacked.iterdir()) == []


def test_a_zip_bomb_that_lies_about_its_size(tmp_path, unpacked, monkeypatch):
    """A zip whose headers claim 100 bytes for 4 MiB of zeros is refused; nothing big is written."""
    zip_path = make_zip(tmp_path / "bomb.zip", {"bomb.bin": bytes(4 * 1024 * 1024)})
    data = bytearray(zip_path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # local and central headers
        at = data.index(signature) + offset
        data[at : at + 4] = (100).to_bytes(4, "little")
    zip_path.write_bytes(bytes(data))
    with pytest.raises(SpecError, match="entry 'bomb.bin' cannot be read"):
        parse_policy_arg(str(zip_path), limits=submission.ZipLimits(max_bytes=64 * 1024))
    assert list(unpacked.iterdir()) == []


def test_the_written_bytes_are_counted_whatever_the_zip_declares(tmp_path, unpacked, monkeypatch):
    """If the declared sizes slip past the early check, writing stops as soon as the cap is passed."""
    monkeypatch.setattr(submission, "CHUNK", 4096)
    monkeypatch.setattr(submission, "_declared_bytes", lambda entries: 0)
    sizes = []
    real_new_file = submission.new_file

    @contextlib.contextmanager
    def measured(path):
        with real_new_file(path) as file:
            try:
                yield file
            finally:
                sizes.append(file.tell())

    monkeypatch.setattr(submission, "new_file", measured)
    zip_path = make_zip(tmp_path / "bomb.zip", {"bomb.bin": bytes(4 * 1024 * 1024)})
    with pytest.raises(SpecError, match="unpacks to more than 65536 bytes"):
        parse_policy_arg(str(zip_path), limits=submission.ZipLimits(max_bytes=64 * 1024))
    assert sizes and sizes[-1] <= 64 * 1024  # stopped at the cap, not after inflating it all
    assert list(unpacked.iterdir()) == []


def test_not_a_zip(tmp_path, unpacked):
    fake = tmp_path / "team_a.zip"
    fake.write_text("PK but not really")
    with pytest.raises(SpecError, match=f"submission {fake} is not a zip or tar.gz file"):
        parse_policy_arg(str(fake))
    with pytest.raises(SpecError, match="submission zip missing.zip does not exist"):
        parse_policy_arg("missing.zip")


def test_a_zip_without_policy_spec_json_names_the_fix(tmp_path, unpacked):
    zip_path = make_zip(tmp_path / "empty.zip", {"bot.py": ""})
    fix = "at its top: .* e.g. cd FOLDER && zip -r ../empty.zip ."
    with pytest.raises(SpecError, match=f"submission {zip_path} has no policy_spec.json .* {fix}"):
        parse_policy_arg(str(zip_path))


def test_a_zip_of_one_folder_is_read_as_that_folder(tmp_path, unpacked):
    """``zip -r delta.zip delta/`` (and macOS's Compress, which adds __MACOSX/ beside it) puts the
    submission one folder down: it is read from there, its paths relative to that folder."""
    files = {"delta/policy_spec.json": json.dumps(SPEC), "delta/ckpt/weights.txt": "1", "delta/teambot/policy.py": ""}
    for litter in ({}, {"__MACOSX/delta/._policy_spec.json": "x", ".DS_Store": "x"}):
        spec = parse_policy_arg(str(make_zip(tmp_path / "delta.zip", files | litter)))
        assert Path(spec.data_path).read_text() == "1" and Path(spec.data_path).parent.parent.name == "delta"
        assert spec.name == str(tmp_path / "delta.zip")  # still named as it was given
    tar_path = tmp_path / "delta.tar.gz"
    with tarfile.open(tar_path, "w:gz") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content.encode())
            archive.addfile(info, io.BytesIO(content.encode()))
    assert Path(parse_policy_arg(str(tar_path)).data_path).read_text() == "1"


@pytest.mark.parametrize(
    ("files", "fix"),
    [
        ({"delta/policy_spec.json": "{}", "notes.txt": ""}, "(it is in its folder delta/): .* e.g. cd delta &&"),
        ({"delta/policy_spec.json": "{}", "echo/policy_spec.json": "{}"}, "(it is in its folder delta/)"),
        ({"a b/policy_spec.json": "{}", "c/bot.py": ""}, "e.g. cd 'a b' && zip -r ../team.zip ."),
        ({"delta/bot.py": ""}, "at its top: .* e.g. cd FOLDER && zip -r ../team.zip .$"),
        ({"a/delta/policy_spec.json": "{}"}, "at its top: .* e.g. cd FOLDER"),  # one folder down only
    ],
)
def test_a_zip_that_cannot_be_read_as_one_folder_is_refused_naming_the_fix(tmp_path, unpacked, files, fix):
    with pytest.raises(SpecError, match=r"submission .*team\.zip has no policy_spec\.json") as refused:
        parse_policy_arg(str(make_zip(tmp_path / "team.zip", files)))
    assert re.search(fix.replace("(", r"\(").replace(")", r"\)"), str(refused.value)), str(refused.value)


def test_a_planted_root_folder_is_not_used(tmp_path, monkeypatch):
    """In a shared /tmp someone else may make the root first; it must be ours and private."""
    planted = tmp_path / "planted"
    planted.mkdir(mode=0o777)
    planted.chmod(0o777)
    monkeypatch.setattr(submission, "submissions_root", lambda: planted)
    with pytest.raises(SpecError, match="must be a folder owned by uid .* with mode 700"):
        parse_policy_arg(str(good_zip(tmp_path / "team_a.zip")))


# -- tar.gz files ---------------------------------------------------------------------------------


def make_tar(path: Path, files: dict[str, bytes], *extra: tarfile.TarInfo, **options) -> Path:
    """A tar.gz of ``files``, then the ``extra`` entries (links, devices: no bytes of their own)."""
    with tarfile.open(path, "w:gz", **options) as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
        for info in extra:
            archive.addfile(info)
    return path


def good_files() -> dict[str, bytes]:
    return {
        "policy_spec.json": json.dumps(SPEC).encode(),
        "teambot/__init__.py": b"",
        "teambot/policy.py": (POLICIES / "packed.py").read_bytes(),
        "ckpt/weights.txt": b"team-a-weights",
    }


def entry(name: str, kind: bytes, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


@pytest.mark.parametrize("suffix", [".tar.gz", ".tgz"])
def test_a_good_tar_gz_is_unpacked_as_a_zip_is(play, tmp_path, unpacked, suffix):
    tar_path = make_tar(tmp_path / f"team_a{suffix}", good_files())
    spec = parse_policy_arg(str(tar_path))
    assert spec.class_path == "teambot.policy.Packed"
    (folder,) = unpacked.iterdir()
    assert everything_under(folder) == {
        "policy_spec.json", "teambot", "teambot/__init__.py", "teambot/policy.py", "ckpt", "ckpt/weights.txt"
    }  # fmt: skip
    result = play([str(tar_path)], agents=1, steps=3)
    assert result.agents[0].status == AgentStatus.OK


@pytest.mark.parametrize(
    ("extra", "files", "message"),
    [
        ((), {"../evil": b"x"}, r"entry '\.\./evil' climbs out with '\.\.'"),
        ((), {"/tmp/evil": b"x"}, "entry '/tmp/evil' is an absolute path"),
        ((), {"evil\x07": b"x"}, r"entry 'evil\\x07' holds a NUL or another control character"),
        ((entry("teambot/evil", tarfile.SYMTYPE, "../../../victim"),), {}, "entry 'teambot/evil' is a symlink"),
        ((entry("evil", tarfile.LNKTYPE, "/etc/passwd"),), {}, "entry 'evil' is a hard link"),
        ((entry("evil", tarfile.FIFOTYPE),), {}, "entry 'evil' is not a plain file or folder"),
        ((entry("evil", tarfile.CHRTYPE),), {}, "entry 'evil' is not a plain file or folder"),
        ((entry("evil", tarfile.GNUTYPE_SPARSE),), {}, "entry 'evil' is a sparse file"),
    ],
)
def test_a_hostile_tar_entry_is_refused_and_nothing_is_kept(tmp_path, unpacked, extra, files, message):
    tar_path = make_tar(tmp_path / "team_a.tar.gz", {**good_files(), **files}, *extra)
    with pytest.raises(SpecError, match=f"submission {tar_path}: {message}"):
        parse_policy_arg(str(tar_path))
    assert not list(Path("/tmp").glob("evil")) and not list(tmp_path.rglob("evil"))
    assert list(unpacked.iterdir()) == []  # the entries before it, half written, are gone too


def test_a_tar_name_that_is_not_utf8_is_refused_by_name(tmp_path, unpacked):
    tar_path = make_tar(tmp_path / "team_a.tar.gz", {"bad\udcff.py": b"x"}, encoding="utf-8", errors="surrogateescape")
    with pytest.raises(SpecError, match="is not valid UTF-8"):
        parse_policy_arg(str(tar_path))


def test_a_tar_gz_bomb_stops_at_the_cap(tmp_path, unpacked, monkeypatch):
    """4 MiB of zeros in 4 KiB of gzip: writing stops at the cap, counted as written."""
    tar_path = make_tar(tmp_path / "bomb.tar.gz", {**good_files(), "bomb.bin": bytes(4 * 1024 * 1024)})
    assert tar_path.stat().st_size < 64 * 1024
    with pytest.raises(submission.TooLarge, match="unpacks to more than 65536 bytes"):
        parse_policy_arg(str(tar_path), limits=submission.ZipLimits(max_bytes=64 * 1024))
    assert list(unpacked.iterdir()) == []


def test_a_tar_header_too_large_to_read_is_refused_before_it_is_read(tmp_path, unpacked):
    """A PAX header of 1 MiB (tarfile reads a header whole into memory) is refused by its size."""
    tar_path = make_tar(
        tmp_path / "pax.tar.gz", good_files(), format=tarfile.PAX_FORMAT, pax_headers={"x": "y" * (1 << 20)}
    )
    with pytest.raises(submission.TooLarge, match=r"has a header of \d+ bytes, more than 65536"):
        parse_policy_arg(str(tar_path))


def test_too_many_tar_entries_and_a_gzip_that_is_no_tar(tmp_path, unpacked):
    many = make_tar(tmp_path / "many.tar.gz", {f"f{i}.txt": b"" for i in range(6)})
    with pytest.raises(submission.TooLarge, match="holds more than 5 entries"):
        parse_policy_arg(str(many), limits=submission.ZipLimits(max_entries=5))
    plain = tmp_path / "plain.tar.gz"
    plain.write_bytes(gzip.compress(b"not a tar, only gzip" * 100))
    with pytest.raises(SpecError, match="is not a zip or a readable tar.gz file"):
        parse_policy_arg(str(plain))
