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
        (f"{POLICIES}/weights.py", "name the class too"),
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
