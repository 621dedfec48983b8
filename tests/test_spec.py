"""Policy specs as users write them: the forms, the options, and a clear error for each mistake."""

import json
from pathlib import Path

import pytest

from policybox.spec import PolicySpec, SpecError, parse_policy_arg

POLICIES = Path(__file__).parent / "policies"


def test_shorthand_and_dotted_path_pass_through():
    assert parse_policy_arg("random") == PolicySpec(class_path="random")
    dotted = "mettagrid.policy.random_agent.RandomMultiAgentPolicy"
    spec = parse_policy_arg(dotted)
    assert spec.class_path == dotted
    assert spec.display_name == "RandomMultiAgentPolicy"


def test_file_path_is_made_absolute_relative_to_the_working_folder(monkeypatch):
    monkeypatch.chdir(POLICIES.parent)
    spec = parse_policy_arg("policies/weights.py:Weights")
    assert spec.class_path == f"{POLICIES / 'weights.py'}:Weights"
    assert spec.display_name == "Weights"


def test_data_name_path_and_kwargs(tmp_path):
    weights = tmp_path / "w.npz"
    weights.write_bytes(b"x")
    text = f"class={POLICIES}/weights.py:Weights,data={weights},name=champion,path={tmp_path},kw.stride=3,kw.mode=fast"
    spec = parse_policy_arg(text)
    assert spec.data_path == str(weights)
    assert spec.name == "champion"
    assert spec.python_path == [str(tmp_path)]
    assert spec.init_kwargs == {"stride": 3, "mode": "fast"}


def test_display_name_includes_the_checkpoint(tmp_path):
    (tmp_path / "ckpt.npz").write_bytes(b"x")
    spec = parse_policy_arg(f"{POLICIES}/weights.py:Weights,data={tmp_path}/ckpt.npz")
    assert spec.display_name == "Weights:ckpt.npz"


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_spec_files_resolve_paths_relative_to_themselves(tmp_path, suffix):
    (tmp_path / "bot.py").write_text("")
    (tmp_path / "w.npz").write_bytes(b"x")
    raw = {"class_path": "bot.py:Bot", "data_path": "w.npz", "init_kwargs": {"depth": 2}}
    spec_file = tmp_path / f"spec{suffix}"
    spec_file.write_text(json.dumps(raw))  # JSON is valid YAML too
    spec = parse_policy_arg(str(spec_file))
    assert spec.class_path == f"{tmp_path / 'bot.py'}:Bot"
    assert spec.data_path == str(tmp_path / "w.npz")
    assert spec.init_kwargs == {"depth": 2}


def test_submission_folder_reads_policy_spec_json(tmp_path):
    (tmp_path / "bot.py").write_text("")
    (tmp_path / "policy_spec.json").write_text(json.dumps({"class_path": "bot.py:Bot"}))
    spec = parse_policy_arg(str(tmp_path))
    assert spec.class_path == f"{tmp_path / 'bot.py'}:Bot"
    assert spec.python_path == [str(tmp_path)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty policy spec"),
        ("./missing.py:Bot", "policy file './missing.py' does not exist"),
        (f"{POLICIES}/weights.py:Weights,data=/no/such/ckpt", "checkpoint \\(data\\) '/no/such/ckpt' does not exist"),
        ("random,path=/no/such/dir", "python path folder '/no/such/dir' does not exist"),
        ("random,colour=blue", "unknown key 'colour'"),
        ("random,oops", "'oops' is not KEY=VALUE"),
        ("data=/tmp", "names no class"),
        ("not a class!", "neither a shorthand"),
        ("missing.yaml", "policy spec file .* does not exist"),
    ],
)
def test_mistakes_get_one_clear_error(text, message):
    with pytest.raises(SpecError, match=message):
        parse_policy_arg(text)


def test_bad_spec_file_contents(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"class_path": 3, "colour": "blue"}')
    with pytest.raises(SpecError, match="invalid policy spec: class_path: .*colour: Extra inputs"):
        parse_policy_arg(str(bad))
    bad.write_text("{")
    with pytest.raises(SpecError, match="is not valid JSON"):
        parse_policy_arg(str(bad))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError, match="has no policy_spec.json"):
        parse_policy_arg(str(tmp_path / "empty"))


def test_env_variables_for_the_cells():
    spec = parse_policy_arg("random,env.OMP_NUM_THREADS=1,env.MODE=fast")
    assert spec.env == {"OMP_NUM_THREADS": "1", "MODE": "fast"}


@pytest.fixture
def submissions(tmp_path, monkeypatch):
    """``submissions/`` (mode 700) holding a victim's bot and checkpoint, and ``team_a`` to fill in."""
    root = tmp_path / "submissions"
    (root / "victim").mkdir(parents=True)
    (root / "victim" / "bot.py").write_text("SECRET = 'TEAM-B'\n")
    (root / "victim" / "ckpt.npz").write_bytes(b"weights")
    (root / "team_a").mkdir()
    (root / "team_a" / "bot.py").write_text("")
    root.chmod(0o700)
    monkeypatch.chdir(tmp_path)
    return root


def write_spec(folder: Path, **fields) -> None:
    (folder / "policy_spec.json").write_text(json.dumps({"class_path": "bot.py:Bot", **fields}))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"data_path": "../victim"}, "data_path '../victim' resolves outside the submission folder"),
        ({"data_path": "../victim/ckpt.npz"}, "data_path '../victim/ckpt.npz' resolves outside"),
        ({"class_path": "../victim/bot.py:Bot"}, "class_path '../victim/bot.py:Bot' resolves outside"),
        ({"python_path": [".", "../victim"]}, r"python_path\[1\] '../victim' resolves outside"),
        ({"data_path": "SUBMISSIONS/victim/ckpt.npz"}, "data_path '/.*/victim/ckpt.npz' resolves outside"),
        ({"data_path": "../missing"}, "data_path '../missing' resolves outside"),
    ],
)
def test_a_submission_cannot_name_files_outside_itself(submissions, fields, message):
    fields = {
        key: value.replace("SUBMISSIONS", str(submissions)) if isinstance(value, str) else value
        for key, value in fields.items()
    }
    write_spec(submissions / "team_a", **fields)
    with pytest.raises(SpecError, match=f"^submissions/team_a/policy_spec.json: {message}"):
        parse_policy_arg("submissions/team_a")


def test_the_message_names_the_folder_as_given(submissions):
    write_spec(submissions / "team_a", data_path="../victim")
    with pytest.raises(SpecError) as caught:
        parse_policy_arg("submissions/team_a")
    assert str(caught.value) == (
        "submissions/team_a/policy_spec.json: data_path '../victim' resolves outside "
        "the submission folder submissions/team_a"
    )


@pytest.mark.parametrize(
    ("link", "target", "fields", "message"),
    [
        ("ckpt", "victim/ckpt.npz", {"data_path": "ckpt"}, "data_path .* resolves outside"),
        ("theirs.py", "victim/bot.py", {"class_path": "theirs.py:Bot"}, "class_path .* resolves outside"),
        ("lib", "victim", {"python_path": ["lib"]}, r"python_path\[0\] .* resolves outside"),
        ("lib", "victim", {"class_path": "lib/bot.py:Bot"}, "class_path .* resolves outside"),
        ("policy_spec.json", "victim/policy_spec.json", None, "policy_spec.json is a symlink to a file outside"),
    ],
)
def test_a_symlink_inside_the_submission_that_points_outside_is_refused(submissions, link, target, fields, message):
    write_spec(submissions / "victim")
    if fields is not None:
        write_spec(submissions / "team_a", **fields)
    (submissions / "team_a" / link).symlink_to(submissions / target)
    with pytest.raises(SpecError, match=f"{message} the submission folder submissions/team_a"):
        parse_policy_arg("submissions/team_a")


def test_a_spec_file_is_confined_to_its_own_folder(submissions):
    spec_file = submissions / "team_a" / "memo.yaml"
    spec_file.write_text("class_path: ../victim/bot.py:Bot\n")
    with pytest.raises(SpecError, match="class_path '../victim/bot.py:Bot' resolves outside the spec file's folder"):
        parse_policy_arg("submissions/team_a/memo.yaml")


def test_the_operator_may_name_any_file_on_the_command_line(submissions):
    spec = parse_policy_arg("submissions/team_a/bot.py:Bot,data=submissions/victim/ckpt.npz")
    assert spec.data_path == str((submissions / "victim" / "ckpt.npz").resolve())


def test_a_legit_submission_with_inner_paths_still_loads(submissions):
    team = submissions / "team_a"
    (team / "lib").mkdir()
    (team / "ckpt.npz").write_bytes(b"w")
    (team / "link.npz").symlink_to(team / "ckpt.npz")  # a symlink that stays inside is fine
    write_spec(team, data_path="link.npz", python_path=["lib"], name="Champion")
    spec = parse_policy_arg("submissions/team_a")
    assert spec.class_path == f"{team.resolve() / 'bot.py'}:Bot"
    assert spec.data_path == str(team.resolve() / "ckpt.npz")
    assert spec.python_path == [str(team.resolve()), str(team.resolve() / "lib")]


def test_a_declared_name_is_only_a_label(submissions):
    write_spec(submissions / "team_a", name="victim")
    spec = parse_policy_arg("submissions/team_a")
    assert (spec.name, spec.label, spec.display_name) == ("submissions/team_a", "victim", "submissions/team_a")
    (submissions / "team_a" / "memo.yaml").write_text("class_path: bot.py:Bot\nname: memo\n")
    spec = parse_policy_arg("submissions/team_a/memo.yaml")
    assert (spec.display_name, spec.label) == ("submissions/team_a/memo.yaml", "memo")
    assert parse_policy_arg("random,name=mine").display_name == "mine"  # the operator's own name stays


def test_mettagrid_fields_in_policy_spec_json(submissions):
    """MettaGrid writes policy_env_interface and setup_script: the first is ignored, the script is kept
    (to run in a cell before the policy is built), confined like every path, and its checkpoint may be
    what it makes."""
    team = submissions / "team_a"
    write_spec(team, policy_env_interface=None, setup_script=None)
    assert parse_policy_arg("submissions/team_a").class_path.endswith("bot.py:Bot")
    (team / "setup.py").write_text("")
    write_spec(team, setup_script="setup.py", data_path="made/by/setup.pt")
    spec = parse_policy_arg("submissions/team_a")
    assert spec.setup_script == str(team.resolve() / "setup.py")
    assert spec.data_path == str(team.resolve() / "made" / "by" / "setup.pt")
    write_spec(team, setup_script="../victim/bot.py")
    with pytest.raises(SpecError, match="setup_script '../victim/bot.py' resolves outside the submission folder"):
        parse_policy_arg("submissions/team_a")
    (team / "setup.sh").write_text("")
    write_spec(team, setup_script="setup.sh")
    with pytest.raises(SpecError, match="setup_script 'setup.sh' must be a Python file"):
        parse_policy_arg("submissions/team_a")
    write_spec(team, data_path="missing.pt")  # without a script, a checkpoint must be there
    with pytest.raises(SpecError, match="checkpoint \\(data\\) 'missing.pt' does not exist"):
        parse_policy_arg("submissions/team_a")


MANIFEST = """
[policy]
class_path = "bot.py:Bot"
data_path = "ckpt.npz"
setup_script = "setup.py"

[policy.init_kwargs]
depth = 3
mode = "fast"
"""


def test_a_cogames_toml_manifest_is_read_like_policy_spec_json(submissions):
    team = submissions / "team_a"
    (team / "setup.py").write_text("")
    (team / "ckpt.npz").write_bytes(b"w")
    (team / "cogames.toml").write_text(MANIFEST)
    spec = parse_policy_arg("submissions/team_a")
    assert spec.class_path == f"{team.resolve() / 'bot.py'}:Bot"
    assert spec.data_path == str(team.resolve() / "ckpt.npz")
    assert spec.setup_script == str(team.resolve() / "setup.py")
    assert spec.init_kwargs == {"depth": 3, "mode": "fast"}
    assert spec.python_path == [str(team.resolve())]
    assert spec.name == "submissions/team_a"
    write_spec(team, init_kwargs={"depth": 9})  # both: policy_spec.json wins, as in MettaGrid
    assert parse_policy_arg("submissions/team_a").init_kwargs == {"depth": 9}


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ("[policy\nclass_path = 1", " is not valid TOML: Expected"),
        ("[other]\nclass_path = 'bot.py:Bot'\n", r" has no \[policy\] table"),
        ("policy = 'bot.py:Bot'\n", r" has no \[policy\] table"),
        ("[policy]\ndata_path = 'ckpt.npz'\n", ": invalid policy spec: class_path: Field required"),
        ("[policy]\nclass_path = 'bot.py:Bot'\ncolour = 1\n", "colour: Extra inputs are not permitted"),
        ("[policy]\nclass_path = 'bot.py:Bot'\ndata_path = '../x'\n", "data_path '../x' resolves outside"),
        ("[policy]\nclass_path = '../victim/bot.py:Bot'\n", "class_path '../victim/bot.py:Bot' resolves outside"),
    ],
)
def test_a_bad_or_escaping_manifest_is_one_clear_error(submissions, manifest, message):
    (submissions / "team_a" / "cogames.toml").write_text(manifest)
    with pytest.raises(SpecError, match=f"submissions/team_a/cogames.toml.*{message}"):
        parse_policy_arg("submissions/team_a")


def test_a_folder_with_neither_file(submissions):
    with pytest.raises(SpecError, match="policy folder submissions/team_a has no policy_spec.json .nor a cogames.toml"):
        parse_policy_arg("submissions/team_a")


def test_env_secrets_come_from_a_file_or_a_variable_and_unsafe_names_are_refused(tmp_path, monkeypatch):
    secret = tmp_path / "token"
    secret.write_text("from-a-file\n")
    monkeypatch.setenv("POLICYBOX_TEST_TOKEN", "from-a-variable")
    spec = parse_policy_arg(f"random,env.A=@{secret},env.B=$POLICYBOX_TEST_TOKEN,env.C=plain")
    assert spec.env == {"A": "from-a-file", "B": "from-a-variable", "C": "plain"}
    with pytest.raises(SpecError, match="POLICYBOX_NO_SUCH_VARIABLE"):
        parse_policy_arg("random,env.B=$POLICYBOX_NO_SUCH_VARIABLE")
    with pytest.raises(SpecError, match="cannot read"):
        parse_policy_arg(f"random,env.A=@{tmp_path / 'missing'}")
    for name in ("LD_PRELOAD", "PYTHONPATH", "GCONV_PATH", "HOME", "TMPDIR"):
        with pytest.raises(SpecError, match=f"env.{name} may not be set"):
            parse_policy_arg(f"random,env.{name}=x")


def test_a_class_name_longer_than_a_file_name_can_be_is_a_class_name(tmp_path):
    """``bot.py:`` and a 300-character class: no folder can have that name (ENAMETOOLONG), so it is
    read as FILE:CLASS, never a raw OSError."""
    (tmp_path / "bot.py").write_text("")
    spec = parse_policy_arg("bot.py:" + "A" * 300, tmp_path)
    assert spec.class_path.endswith(":" + "A" * 300)


def test_a_file_without_a_class_is_an_agent_file_named_by_its_folder_for_a_main_py(tmp_path):
    """Kaggle's form: the file's last callable is the agent (built in the cell); a main.py is named by
    its folder, any other file by its stem."""
    (tmp_path / "bot").mkdir()
    (tmp_path / "bot" / "main.py").write_text("def agent(observation):\n    return 0\n")
    spec = parse_policy_arg("bot/main.py", base_dir=tmp_path)
    assert spec.class_path == str(tmp_path / "bot" / "main.py") and spec.file_and_class == (spec.class_path, "")
    assert spec.display_name == "bot" and parse_policy_arg(f"{POLICIES}/weights.py").display_name == "weights"
    folder = parse_policy_arg(str(tmp_path / "bot"))  # Kaggle's submission format: a folder with a main.py
    assert folder.class_path == str(tmp_path / "bot" / "main.py") and folder.python_path == [str(tmp_path / "bot")]
