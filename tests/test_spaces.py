"""The space codec: observations cross exactly, actions are refused unless they are exactly a value of the space."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest
from gymnasium import spaces

import policybox.envs.spaces as codec_module
from policybox.envs.base import ConfigError, InvalidAction
from policybox.envs.spaces import (
    SpaceCodec,
    UnsupportedSpace,
    describe_space,
    fallback_action,
    space_from_description,
)

INF = np.inf

SPACES = {
    "box_f32_inf": spaces.Box(-INF, INF, (4,), np.float32),
    "box_f64_half_inf": spaces.Box(np.array([-INF, 0.0, -1.5]), np.array([1.0, INF, 2.5]), dtype=np.float64),
    "box_f16": spaces.Box(-2.0, 2.0, (2, 2), np.float16),
    "box_i8": spaces.Box(-5, 7, (3, 2), np.int8),
    "box_u8_image": spaces.Box(0, 255, (4, 4, 3), np.uint8),
    "box_i64_unbounded": spaces.Box(-INF, INF, (2,), np.int64),
    "box_u64": spaces.Box(0, 2**64 - 1, (2,), np.uint64),
    "box_bool": spaces.Box(0, 1, (5,), bool),
    "box_scalar": spaces.Box(-1.0, 1.0, (), np.float32),
    "box_empty": spaces.Box(0.0, 1.0, (0, 3), np.float32),
    "discrete": spaces.Discrete(7),
    "discrete_start": spaces.Discrete(5, start=-2),
    "discrete_i8": spaces.Discrete(3, start=100, dtype=np.int8),
    "multidiscrete": spaces.MultiDiscrete([3, 4, 5]),
    "multidiscrete_start_i8": spaces.MultiDiscrete([[2, 3], [4, 5]], dtype=np.int8, start=[[-1, 0], [10, -5]]),
    "multibinary": spaces.MultiBinary(6),
    "multibinary_shape": spaces.MultiBinary([2, 3]),
    "dict": spaces.Dict({"observation": spaces.Box(0, 1, (6, 7, 2), np.int8), "action_mask": spaces.MultiBinary(7)}),
    "tuple": spaces.Tuple([spaces.Discrete(3), spaces.Box(-1.0, 1.0, (2,), np.float32)]),
    "nested": spaces.Dict(
        {
            "z": spaces.Tuple([spaces.Dict({"deep": spaces.MultiDiscrete([2, 9], start=[5, -3])}), spaces.Discrete(2)]),
            "a": spaces.Box(-INF, 3.0, (2, 1), np.float32),
            "m": spaces.MultiBinary(3),
        }
    ),
}
ALL = list(SPACES.values())
IDS = list(SPACES)


def assert_exactly_equal(got, expected, where="value"):
    """Same types, dtypes, shapes, keys and bit patterns."""
    assert type(got) is type(expected), where
    if isinstance(expected, dict):
        assert set(got) == set(expected), where
        for key in expected:
            assert_exactly_equal(got[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, tuple):
        assert len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            assert_exactly_equal(g, e, f"{where}[{i}]")
    elif isinstance(expected, np.ndarray | np.generic):
        assert got.dtype == expected.dtype and got.shape == expected.shape, where
        assert np.array_equal(got, expected, equal_nan=True), where
        assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(expected).tobytes(), where
    elif isinstance(expected, float):
        assert np.float64(got).tobytes() == np.float64(expected).tobytes(), where
    else:
        assert got == expected, where


def round_trip(space, value):
    codec = SpaceCodec(space)
    got = codec.decode(codec.encode(value))
    assert_exactly_equal(got, value)
    return got


# -- schema -------------------------------------------------------------------------------------


@pytest.mark.parametrize("space", ALL, ids=IDS)
def test_description_rebuilds_an_equal_space_also_through_json(space):
    assert space_from_description(describe_space(space)) == space
    rebuilt = space_from_description(json.loads(json.dumps(describe_space(space))))
    assert rebuilt == space
    assert SpaceCodec.from_description(SpaceCodec(space).describe()).space == space
    if isinstance(space, spaces.Box):  # Box.__eq__ only checks allclose: the bounds must be bit-exact
        assert rebuilt.low.tobytes() == space.low.tobytes() and rebuilt.high.tobytes() == space.high.tobytes()


def test_dict_description_keeps_the_space_key_order():
    space = spaces.Dict({"b": spaces.Discrete(2), "a": spaces.Discrete(3)})  # a plain dict gets sorted keys
    ordered = spaces.Dict([("b", spaces.Discrete(2)), ("a", spaces.Discrete(3))])
    for s in (space, ordered):
        rebuilt = space_from_description(json.loads(json.dumps(describe_space(s))))
        assert list(rebuilt.spaces) == list(s.spaces)


def test_uniform_bounds_are_described_as_one_number():
    description = describe_space(spaces.Box(0, 255, (84, 84, 3), np.uint8))
    assert description["low"] == 0 and description["high"] == 255


@pytest.mark.parametrize(
    "space",
    [
        spaces.Text(10),
        spaces.Sequence(spaces.Discrete(3)),
        spaces.Graph(spaces.Box(0.0, 1.0, (2,)), spaces.Discrete(2)),
        spaces.OneOf([spaces.Discrete(2), spaces.Discrete(3)]),
        spaces.Dict({"ok": spaces.Discrete(2), "bad": spaces.Text(5)}),
    ],
    ids=["text", "sequence", "graph", "oneof", "nested_text"],
)
def test_unsupported_spaces_are_refused_naming_them(space):
    with pytest.raises(UnsupportedSpace, match="not supported.*Box, Discrete") as raised:
        SpaceCodec(space)
    assert isinstance(raised.value, ConfigError)
    with pytest.raises(UnsupportedSpace):
        describe_space(space)


def test_custom_space_classes_are_refused():
    class MyBox(spaces.Box):
        pass

    with pytest.raises(UnsupportedSpace, match="MyBox|Box"):
        SpaceCodec(MyBox(0.0, 1.0, (2,)))
    with pytest.raises(UnsupportedSpace, match="'Frob'"):
        space_from_description({"type": "Frob"})


# -- observations -------------------------------------------------------------------------------


@pytest.mark.parametrize("space", ALL, ids=IDS)
def test_sampled_observations_round_trip_exactly(space):
    for seed in range(5):
        space.seed(seed)
        round_trip(space, space.sample())


def test_observation_bit_patterns_survive():
    box = spaces.Box(-INF, INF, (5,), np.float32)
    weird = np.array([np.nan, -0.0, INF, -INF, 1e-45], np.float32)
    weird.view(np.uint32)[0] = 0x7FC01234  # a NaN with a payload
    got = round_trip(box, weird)
    assert got.view(np.uint32)[0] == 0x7FC01234
    round_trip(spaces.Discrete(3), float("nan"))  # an out-of-spec Python float, carried bit-exact


def test_scalar_types_are_preserved():
    space = spaces.Discrete(200)
    for value in (5, np.int64(5), np.int8(5), np.uint16(5), True, np.bool_(True), 5.0, np.float32(5), np.array(5)):
        round_trip(space, value)
    big = 2**62
    assert type(round_trip(space, big)) is int


def test_off_spec_arrays_are_preserved():
    box = spaces.Box(-1.0, 1.0, (2, 3), np.float32)
    round_trip(box, np.linspace(-1, 1, 6).reshape(2, 3))  # float64 in a float32 Box stays float64
    round_trip(box, np.zeros((3, 2), np.float32))  # wrong shape is carried, not reshaped
    round_trip(box, np.arange(6, dtype=">f4").reshape(2, 3))  # big-endian stays big-endian
    round_trip(box, np.ones((2, 3), np.complex64))
    round_trip(box, np.float32(0.5))  # a numpy scalar where the space wants an array
    fortran = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    strided = np.arange(12, dtype=np.float32).reshape(2, 6)[:, ::2]
    for array in (fortran, strided):
        assert_exactly_equal(round_trip(box, array), np.ascontiguousarray(array))


def test_decoded_arrays_own_their_memory_and_survive_buffer_reuse():
    space = SPACES["dict"]
    codec = SpaceCodec(space)
    value = space.sample()
    buffer = bytearray(codec.encode(value))
    got = codec.decode(memoryview(buffer))
    buffer[:] = bytes(len(buffer))  # the receive buffer is reused
    assert_exactly_equal(got, value)
    for array in got.values():
        assert array.flags.owndata and array.flags.writeable
        array[...] = 1


def test_observation_dict_keys_come_back_in_the_space_order():
    space = SPACES["dict"]
    value = {"observation": np.zeros((6, 7, 2), np.int8), "action_mask": np.ones(7, np.int8)}
    got = SpaceCodec(space).decode(SpaceCodec(space).encode(value))
    assert list(got) == list(space.spaces)


@pytest.mark.parametrize(
    ("space", "value", "match"),
    [
        (spaces.Box(0, 1, (2,)), np.array(["a", "b"]), r"dtype <U1"),
        (spaces.Box(0, 1, (2,)), np.array([object(), 1]), r"dtype object"),
        (SPACES["dict"], {"observation": np.zeros((6, 7, 2), np.int8), "action_mask": [1] * 7}, r"\['action_mask'\]"),
        (SPACES["dict"], {"observation": np.zeros((6, 7, 2), np.int8)}, "keys"),
        (SPACES["tuple"], (1,), "tuple of 2"),
        (spaces.Discrete(3), 2**70, "64 bits"),
        (spaces.Discrete(3), "2", "str"),
    ],
    ids=["str_array", "object_array", "list_leaf", "missing_key", "short_tuple", "big_int", "string"],
)
def test_observations_that_cannot_be_carried_exactly_raise_value_error(space, value, match):
    with pytest.raises(ValueError, match=match):
        SpaceCodec(space).encode(value)


def test_common_observations_carry_no_per_step_header():
    space = SPACES["dict"]
    value = space.sample()
    assert len(SpaceCodec(space).encode(value)) == 2 + 6 * 7 * 2 + 7  # one tag byte per leaf


# -- real PettingZoo games ----------------------------------------------------------------------


def _mpe_simple_spread():
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env()
    observations, _ = env.reset(seed=1)
    return env, observations


def _parallel(module_name):
    def make():
        import importlib

        env = importlib.import_module(f"pettingzoo.classic.{module_name}").parallel_env()
        observations, _ = env.reset(seed=1)
        return env, observations

    return make


def _aec(module_name):
    def make():
        import importlib

        env = importlib.import_module(f"pettingzoo.classic.{module_name}").env()
        env.reset(seed=1)
        return env, {env.agent_selection: env.last()[0]}

    return make


GAMES = {
    "simple_spread": _mpe_simple_spread,
    "connect_four": _aec("connect_four_v3"),
    "tictactoe": _aec("tictactoe_v3"),
    "rps": _parallel("rps_v2"),
}


@pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")  # PettingZoo's own
@pytest.mark.parametrize("make", GAMES.values(), ids=GAMES.keys())
def test_pettingzoo_games_cross_exactly(make):
    env, observations = make()
    for agent in env.possible_agents:
        for space in (env.observation_space(agent), env.action_space(agent)):
            assert space_from_description(describe_space(space)) == space
            assert space_from_description(json.loads(json.dumps(describe_space(space)))) == space
        codec = SpaceCodec.from_description(json.loads(json.dumps(describe_space(env.observation_space(agent)))))
        if agent in observations:
            assert_exactly_equal(codec.decode(codec.encode(observations[agent])), observations[agent])
        actions = SpaceCodec(env.action_space(agent))
        action = fallback_action(env.action_space(agent), observations.get(agent))
        assert actions.parse_action(actions.encode_action(action)) == action
    env.close()


def test_connect_four_observations_cross_exactly_through_a_game():
    from pettingzoo.classic import connect_four_v3

    env = connect_four_v3.env()
    env.reset(seed=3)
    codecs = {agent: SpaceCodec(env.observation_space(agent)) for agent in env.possible_agents}
    for _ in range(12):
        observation, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            break
        codec = codecs[env.agent_selection]
        assert_exactly_equal(codec.decode(codec.encode(observation)), observation)
        env.step(fallback_action(env.action_space(env.agent_selection), observation))
    env.close()


def test_connect_four_fallback_plays_the_first_legal_column():
    from pettingzoo.classic import connect_four_v3

    env = connect_four_v3.env()
    env.reset(seed=0)
    for _ in range(6):  # both players fill column 0
        env.step(0)
    observation = env.last()[0]
    assert observation["action_mask"][0] == 0
    assert fallback_action(env.action_space(env.agent_selection), observation) == 1
    env.close()


# -- actions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("space", ALL, ids=IDS)
def test_sampled_actions_round_trip(space):
    codec = SpaceCodec(space)
    for seed in range(20):
        space.seed(seed)
        action = space.sample()
        parsed = codec.parse_action(codec.encode_action(action))
        assert space.contains(parsed)
        _assert_action_equal(parsed, action)


def _assert_action_equal(parsed, action):
    if isinstance(action, dict):
        assert list(parsed) == list(action)
        for key in action:
            _assert_action_equal(parsed[key], action[key])
    elif isinstance(action, tuple):
        for p, a in zip(parsed, action, strict=True):
            _assert_action_equal(p, a)
    elif isinstance(action, np.ndarray):
        assert type(parsed) is np.ndarray and parsed.dtype == action.dtype and parsed.shape == action.shape
        assert np.array_equal(parsed, action) and parsed.flags.owndata and parsed.flags.writeable
    else:  # a Discrete action arrives as a Python int
        assert type(parsed) is int and parsed == action


def test_parsed_action_types():
    assert type(SpaceCodec(spaces.Discrete(4)).parse_action((3).to_bytes(8, "little"))) is int
    parsed = SpaceCodec(spaces.Box(0.0, 1.0, (2,), np.float32)).parse_action(np.float32([0.5, 1]).tobytes())
    assert parsed.dtype == np.float32 and parsed.flags.owndata
    wide = memoryview(np.int32([3, 0]))  # a buffer of 2 items is 8 bytes: lengths are counted in bytes
    assert SpaceCodec(spaces.Discrete(4)).parse_action(wide) == 3


@pytest.mark.parametrize(
    ("space", "value"),
    [
        (spaces.Discrete(4), 3),
        (spaces.Discrete(4), np.int8(3)),
        (spaces.Discrete(4), np.uint64(3)),
        (spaces.Box(-1.0, 1.0, (2,), np.float32), np.array([0.1, -0.3])),  # float64 into float32 converts
        (spaces.Box(-1.0, 1.0, (2,), np.float32), [0, 1]),
        (spaces.Box(-5, 5, (2,), np.int8), [1.0, -2.0]),  # integral floats keep their value
        (spaces.Box(0, 1, (2,), bool), [1, 0]),
        (spaces.MultiDiscrete([3, 3]), (2, 0)),
        (spaces.MultiBinary(3), np.array([True, False, True])),
        (SPACES["tuple"], [1, [0.5, 0.5]]),  # a list for a Tuple
    ],
)
def test_convertible_actions_are_accepted(space, value):
    codec = SpaceCodec(space)
    parsed = codec.parse_action(codec.encode_action(value))
    assert space.contains(parsed)


@pytest.mark.parametrize(
    ("space", "value", "match"),
    [
        (spaces.Discrete(7), 2.0, r"expected an integer for Discrete\(7\), got float"),
        (spaces.Discrete(7), True, "got bool"),
        (spaces.Discrete(7), np.array([1]), "got ndarray"),
        (spaces.Discrete(7), "1", "got str"),
        (spaces.Discrete(7), 2**64, "64 bits"),
        (spaces.Box(-5, 5, (1,), np.int64), [1.5], "change"),
        (spaces.Box(-5, 5, (1,), np.int8), [300], "change"),
        (spaces.Box(0, 5, (1,), np.uint8), [-1], "change"),
        (spaces.Box(0, 5, (1,), np.int64), np.array([2**64 - 1], np.uint64), "change"),  # wraps to -1
        (spaces.Box(-5, 5, (1,), np.int64), [np.nan], "change"),
        (spaces.Box(-1.0, 1.0, (1,), np.float32), [1e300], "change"),  # overflows to inf
        (spaces.Box(0, 1, (2,), bool), [2, 0], "change"),
        (spaces.Box(-1.0, 1.0, (2,), np.float32), [0.5], "shape"),
        (spaces.Box(-1.0, 1.0, (2,), np.float32), ["a", "b"], "numbers"),
        (spaces.Box(-1.0, 1.0, (2,), np.float32), [1j, 0], "numbers"),
        (spaces.Box(-1.0, 1.0, (2,), np.float32), [[1], [1, 2]], "array"),
        (spaces.Box(-1.0, 1.0, (2,), np.float32), None, "numbers"),
        (spaces.MultiDiscrete([3, 3]), [1.5, 0], "change"),
        (SPACES["dict"], {"observation": np.zeros((6, 7, 2))}, "keys"),
        (SPACES["dict"], [0, 1], "dict"),
        (SPACES["tuple"], (1,), "tuple of 2"),
        (SPACES["tuple"], (1.0, [0, 0]), r"\[0\]"),
    ],
)
def test_unrepresentable_actions_are_refused(space, value, match):
    with pytest.raises(InvalidAction, match=match):
        SpaceCodec(space).encode_action(value)


def _hostile_payloads(space):
    codec = SpaceCodec(space)
    good = codec.encode_action(fallback_action(space))
    yield good[:-1]
    yield good + b"\0"
    yield b""
    rng = np.random.default_rng(0)
    for length in [*range(0, 40), len(good), len(good), len(good), 2 * len(good)]:
        for _ in range(5):
            yield rng.integers(0, 256, length, dtype=np.uint8).tobytes()


@pytest.mark.parametrize("space", ALL, ids=IDS)
def test_hostile_payloads_only_ever_raise_invalid_action(space):
    codec = SpaceCodec(space)
    for payload in _hostile_payloads(space):
        for carrier in (payload, memoryview(payload), bytearray(payload)):
            try:
                value = codec.parse_action(carrier)
            except InvalidAction:
                continue
            assert space.contains(value)


@pytest.mark.parametrize(
    ("space", "payload"),
    [
        (spaces.Box(-1.0, 1.0, (2,), np.float32), np.float32([np.nan, 0]).tobytes()),
        (spaces.Box(-INF, INF, (2,), np.float32), np.float32([np.nan, 0]).tobytes()),
        (spaces.Box(-1.0, 1.0, (2,), np.float32), np.float32([2, 0]).tobytes()),
        (spaces.Discrete(7), (7).to_bytes(8, "little")),
        (spaces.Discrete(5, start=-2), (-3).to_bytes(8, "little", signed=True)),
        (spaces.Discrete(3, start=100, dtype=np.int8), (2**40).to_bytes(8, "little")),
        (spaces.MultiDiscrete([3, 3]), np.int64([0, 3]).tobytes()),
        (spaces.MultiBinary(2), np.int8([0, 2]).tobytes()),
        (spaces.Box(0, 1, (2,), bool), bytes([1, 2])),  # a bool byte that is neither 0 nor 1
        (spaces.Box(0, 1, (2,), np.float32), np.float32([0.5]).tobytes()),  # truncated
        (spaces.Box(0, 1, (2,), np.float32), np.float32([0.5, 0.5, 0.5]).tobytes()),  # extra bytes
    ],
)
def test_payloads_outside_the_space_are_refused(space, payload):
    with pytest.raises(InvalidAction):
        SpaceCodec(space).parse_action(payload)


# -- fallback -----------------------------------------------------------------------------------


@pytest.mark.parametrize("space", ALL, ids=IDS)
def test_fallback_is_an_action_of_every_space(space):
    codec = SpaceCodec(space)
    action = fallback_action(space)
    assert space.contains(action)
    _assert_action_equal(codec.parse_action(codec.encode_action(action)), action)


def test_fallback_values():
    assert fallback_action(spaces.Discrete(5, start=-2)) == -2
    box = fallback_action(spaces.Box(np.float32([1, -3]), np.float32([2, -1]), dtype=np.float32))
    assert box.dtype == np.float32 and box.tolist() == [1.0, -1.0]
    assert fallback_action(spaces.MultiDiscrete([3, 4], start=[2, -1], dtype=np.int8)).tolist() == [2, -1]
    assert fallback_action(spaces.MultiBinary([2, 2])).tolist() == [[0, 0], [0, 0]]


def test_fallback_follows_the_action_mask():
    space = spaces.Discrete(4, start=10)
    assert fallback_action(space, {"action_mask": np.int8([0, 0, 1, 1])}) == 12
    assert fallback_action(space, {"action_mask": np.int8([0, 0, 0, 0])}) == 10  # nothing legal: start
    assert fallback_action(space, {"observation": np.zeros(3)}) == 10
    assert fallback_action(space, np.zeros(4)) == 10


# -- no pickle ----------------------------------------------------------------------------------


def test_the_codec_never_uses_pickle():
    """No import or name of a code-carrying serializer; the docstrings may say "pickle" to say why."""
    tree = ast.parse(Path(codec_module.__file__).read_text())
    names = {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom) for alias in node.names
    }
    names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    names |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {node.arg for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg}
    assert not [name for name in names if any(word in name.lower() for word in ("pickle", "marshal", "shelve", "dill"))]
    assert not names & {"load", "loads", "eval", "exec", "__import__"}
