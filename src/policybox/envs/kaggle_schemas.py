"""Kaggle's schema checks, each done once: its ``process_schema`` with a validator made once per
schema (``fast_schemas`` swaps it in while a host works its game), and a game whose state schema is
built once rather than on every read (``state_schema_once``). The same answers as
``kaggle-environments`` gives, a tenth of the time (``policybox.envs.kaggle``).
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
from collections.abc import Iterator
from typing import Any

_validators: dict[str, Any] = {}  # by the schema's JSON text: each schema checked, and its validator made, once


def process_schema(schema: Any, data: Any, use_default: bool = True) -> tuple[str | None, Any]:
    """Kaggle's ``utils.process_schema`` -- the data with its defaults filled in, and what is wrong with it
    (whatever validating it raised, as text), or None -- with each schema checked and its validator made
    once: ``jsonschema.validate`` checks the schema itself on every call, a millisecond each, most of a
    Kaggle game's step (``fast_schemas``)."""
    import jsonschema
    from kaggle_environments.utils import default_schema

    if use_default:
        data = default_schema(schema, copy.deepcopy(data))
    try:
        key = json.dumps(schema, sort_keys=True, default=str)
        validator = _validators.get(key)
        if validator is None:
            kind = jsonschema.validators.validator_for(schema)
            kind.check_schema(schema)
            validator = _validators[key] = kind(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    except Exception as exc:  # as Kaggle's: whatever validating raises is what is wrong
        return str(exc), data
    return (None if error is None else str(error)), data


_swap = threading.Lock()
_swapped: list[Any] = []  # Kaggle's own process_schema, once per block open (threads may step games at once)


@contextlib.contextmanager
def fast_schemas() -> Iterator[None]:
    """Within it, the game's own code validates with ``process_schema`` above: the same answers, a tenth of
    the time. Swapped in only while a host makes, resets and steps its game -- the first block in swaps,
    the last one out swaps back -- so that Kaggle's own runner in this process otherwise stays as it ships."""
    from kaggle_environments import core

    with _swap:
        _swapped.append(core.process_schema if not _swapped else _swapped[0])
        core.process_schema = process_schema
    try:
        yield
    finally:
        with _swap:
            shipped = _swapped.pop()
            if not _swapped:
                core.process_schema = shipped


def state_schema_once(env: Any) -> None:
    """Make ``env`` (this host's game alone) build its state schema once: Kaggle's ``Environment`` builds
    it afresh (``structify`` of the whole schema) on every read, several times an action; its readers copy
    what they change, so one copy serves them all."""
    shipped = type(env)
    if shipped not in _ONCE:
        _ONCE[shipped] = _once_class(shipped)
    env.__class__ = _ONCE[shipped]


_ONCE: dict[type, type] = {}  # Kaggle's Environment class -> its subclass that builds the state schema once


def _once_class(shipped: type) -> type:
    """``shipped`` whose state schema is built once per game."""

    def state_schema(game: Any) -> Any:
        if "_policybox_state_schema" not in game.__dict__:
            game.__dict__["_policybox_state_schema"] = shipped._Environment__state_schema.fget(game)  # type: ignore[attr-defined]
        return game.__dict__["_policybox_state_schema"]

    return type(shipped.__name__, (shipped,), {"_Environment__state_schema": property(state_schema)})
