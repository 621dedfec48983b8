"""The version store: every spec form kept as an immutable, content-addressed, root-only copy.

Each test stores real files, then changes or deletes the originals and judges the copy from the
filesystem (modes, owners, bytes) and by playing it in real cells.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import zipfile
from pathlib import Path

import pytest
from conftest import POLICIES

import policybox.submission as submission
from policybox.episode import run_episode
from policybox.files.version_files import FILES, KEY_FILE, check_name, keep
from policybox.results import AgentStatus
from policybox.settings import EpisodeSettings
from policybox.spec import SpecError

MANIFEST = '[policy]\nclass_path = "teambot.policy.Packed"\ndata_path = "ckpt/weights.txt"\n'
SPEC_JSON = {"class_path": "teambot.policy.Packed", "data_path": "ckpt/weights.txt"}


@pytest.fixture(autouse=True)
def unpacked(tmp_path, monkeypatch) -> Path:
    """Zips unpack under this test's folder instead of the real temp folder."""
    root = tmp_path / "unpacked"
    monkeypatch.setattr(submission, "submissions_root", lambda: root)
    return root


def team(folder: Path, weights: str = "team-a-weights", spec_file: str = "policy_spec.json") -> Path:
    """A submission folder: a package, a checkpoint, and a policy_spec.json or cogames.toml."""
    (folder / "teambot").mkdir(parents=True)
    (folder / "teambot" / "__init__.py").write_text("")
    (folder / "teambot" / "policy.py").write_text((POLICIES / "packed.py").read_text())
    (folder / "ckpt").mkdir()
    (folder / "ckpt" / "weights.txt").write_text(weights)
    (folder / spec_file).write_text(MANIFEST if spec_file == "cogames.toml" else json.dumps(SPEC_JSON))
    return folder


def zipped(folder: Path, path: Path, compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as archive:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                archive.write(file, file.relative_to(folder))
    return path


def tree(folder: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every path below ``folder``: its mode, owner and content (None for a folder)."""
    return {
        str(path.relative_to(folder)): (
            stat.S_IMODE(path.lstat().st_mode),
            path.lstat().st_uid,
            path.read_bytes() if path.is_file() else None,
        )
        for path in sorted(folder.rglob("*"))
    }


def log(agent) -> str:
    return Path(agent.log_path).read_text()


# -- every form ----------------------------------------------------------------------------------


def test_every_spec_form_is_stored_and_plays_from_its_copy_alone(tmp_path):
    """file.py:Class with a checkpoint, folders with policy_spec.json or cogames.toml, zips of either, a
    YAML spec file: each is copied under the root; with every original deleted, all of them play
    together in one episode, each reading its own checkpoint from its copy."""
    originals = tmp_path / "originals"
    bots = originals / "bots"
    bots.mkdir(parents=True)
    shutil.copy(POLICIES / "packed.py", bots / "bot.py")
    (bots / "w.txt").write_text("file-form-weights")
    (bots / "memo.yaml").write_text("class_path: bot.py:Packed\ndata_path: w.txt\nname: memo\n")
    sources = {
        "file": f"{bots}/bot.py:Packed,data={bots}/w.txt",
        "json folder": str(team(originals / "json_team", "json-folder-weights")),
        "toml folder": str(team(originals / "toml_team", "toml-folder-weights", "cogames.toml")),
        "json zip": str(zipped(team(originals / "z1", "json-zip-weights"), originals / "json.zip")),
        "toml zip": str(zipped(team(originals / "z2", "toml-zip-weights", "cogames.toml"), originals / "toml.zip")),
        "yaml": str(bots / "memo.yaml"),
    }
    root = tmp_path / "versions"
    stored = {form: keep(source, root) for form, source in sources.items()}
    shutil.rmtree(originals)
    shutil.rmtree(tmp_path / "unpacked")  # where the zips were unpacked: gone too

    for form, version in stored.items():
        assert version.files is not None and version.files.parent == (root / FILES).resolve(), form
        paths = [version.spec.file_and_class[0]] if version.spec.file_and_class else []
        paths += [version.spec.data_path, *version.spec.python_path]
        assert all(Path(path).is_relative_to(version.files) for path in paths), form
    assert stat.S_IMODE(root.stat().st_mode) == stat.S_IMODE((root / FILES).stat().st_mode) == 0o700
    for version in stored.values():
        for mode, owner, content in tree(version.files).values():
            assert owner == os.geteuid() and mode == (0o755 if content is None else 0o644)

    result = run_episode([v.spec for v in stored.values()], EpisodeSettings(steps=3), tmp_path / "logs")
    weights = ["file-form", "json-folder", "toml-folder", "json-zip", "toml-zip", "file-form"]
    for agent, expected in zip(result.agents, weights, strict=True):
        assert agent.status == AgentStatus.OK, agent.failure
        assert f"checkpoint: {expected}-weights" in log(agent)
    assert result.agents[5].spec.label == "memo"


@pytest.mark.parametrize("text", ["random", "mettagrid.policy.random_agent.RandomMultiAgentPolicy"])
def test_a_spec_without_files_is_digested_by_its_json(tmp_path, text):
    first = keep(text, tmp_path / "versions")
    assert first.files is None and first.spec.class_path == text
    assert keep(text, tmp_path / "versions").digest == first.digest
    assert keep(f"{text},kw.depth=3", tmp_path / "versions").digest != first.digest
    assert not (tmp_path / "versions" / FILES).exists()


# -- digests -------------------------------------------------------------------------------------


def test_the_same_content_has_the_same_digest_wherever_it_comes_from(tmp_path):
    root = tmp_path / "versions"
    original = team(tmp_path / "team_a")
    first = keep(str(original), root)
    assert keep(str(original), root) == first  # the same copy, reused
    assert keep("team_a", root, base_dir=tmp_path).digest == first.digest  # a relative path
    moved = shutil.copytree(original, tmp_path / "elsewhere" / "renamed")
    assert keep(str(moved), root).digest == first.digest  # another folder's name
    bot = f"{original}/teambot/policy.py:Packed,data={original}/ckpt/weights.txt"
    assert keep(f"{bot},name=champion", root).digest == keep(bot, root).digest  # the operator's name
    deflated = keep(str(zipped(original, tmp_path / "a.zip")), root)
    stored_zip = keep(str(zipped(original, tmp_path / "b.zip", zipfile.ZIP_STORED)), root)
    assert (tmp_path / "a.zip").read_bytes() != (tmp_path / "b.zip").read_bytes()
    assert deflated.digest == stored_zip.digest == first.digest  # a zip made again
    assert len(list((root / FILES).iterdir())) == 5  # copies go by their tar: original, renamed, 2 zips, bot


@pytest.mark.parametrize(
    "change",
    [
        lambda folder: (folder / "ckpt" / "weights.txt").write_text("team-a-weights!"),
        lambda folder: (folder / "teambot" / "extra.py").write_text(""),
        lambda folder: (folder / "teambot" / "policy.py").chmod(0o755),
        lambda folder: (folder / "policy_spec.json").write_text(json.dumps({**SPEC_JSON, "init_kwargs": {"x": 1}})),
        lambda folder: (folder / "policy_spec.json").write_text(json.dumps({**SPEC_JSON, "name": "a label"})),
    ],
    ids=["checkpoint", "new file", "mode", "init_kwargs", "label"],
)
def test_changed_content_has_a_new_digest(tmp_path, change):
    root = tmp_path / "versions"
    original = team(tmp_path / "team_a")
    before = keep(str(original), root)
    kept = tree(before.files)
    change(original)
    after = keep(str(original), root)
    assert after.digest != before.digest and after.files != before.files
    assert tree(before.files) == kept  # the old version's copy is untouched


def test_editing_or_deleting_the_original_changes_nothing(tmp_path):
    root = tmp_path / "versions"
    original = team(tmp_path / "team_a")
    version = keep(str(original), root)
    kept = tree(version.files)
    (original / "ckpt" / "weights.txt").write_text("edited after the submission")
    (original / "teambot" / "policy.py").write_text("raise SystemExit('edited')\n")
    (original / "teambot" / "new.py").write_text("")
    assert tree(version.files) == kept
    shutil.rmtree(original)
    assert tree(version.files) == kept
    agent = run_episode([version.spec], EpisodeSettings(steps=2), tmp_path / "logs", agents=1).agents[0]
    assert agent.status == AgentStatus.OK and "checkpoint: team-a-weights" in log(agent)


def test_secrets_change_the_digest_but_never_show_in_it(tmp_path):
    root = tmp_path / "versions"
    token = tmp_path / "token"
    token.write_text("1234\n")
    first = keep(f"random,env.TOKEN=@{token}", root)
    assert first.spec.env == {"TOKEN": "1234"} and first.spec.redacted().env == {"TOKEN": "***"}
    token.write_text("1235\n")
    assert first.spec.env == {"TOKEN": "1234"}  # read once: the version keeps its value
    second = keep(f"random,env.TOKEN=@{token}", root)
    assert second.digest != first.digest
    assert keep("random,env.TOKEN=1234", root).digest == first.digest  # the value, however it was given
    # Not a hash of the value an outsider could test guesses against: the store's own key is in it.
    plain = keep("random,env.TOKEN=1234", tmp_path / "another-store")
    assert plain.digest != first.digest
    for guess in ("1234", hashlib.sha256(b"1234").hexdigest()):
        assert guess not in first.digest
    key = root / KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 64


# -- refusals ------------------------------------------------------------------------------------


def test_a_manifest_that_climbs_out_is_refused_and_nothing_is_stored(tmp_path):
    (tmp_path / "x").write_text("another team's checkpoint")
    folder = team(tmp_path / "team_a", spec_file="cogames.toml")
    (folder / "cogames.toml").write_text('[policy]\nclass_path = "teambot.policy.Packed"\ndata_path = "../x"\n')
    with pytest.raises(SpecError, match="data_path '../x' resolves outside the submission folder"):
        keep(str(folder), tmp_path / "versions")
    assert not (tmp_path / "versions" / FILES).exists()


@pytest.mark.parametrize("name", ["a", "team-a", "team_a", "0day", "x" * 40])
def test_good_names(name):
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "-team", "_team", "Team", "team a", "team/a", "team.a", "x" * 41, "team\n"])
def test_bad_names_are_refused_with_the_rule(name):
    with pytest.raises(SpecError, match="use 1 to 40 of a-z, 0-9, '_' and '-', starting with a letter or a digit"):
        check_name(name)
