"""Kaggle agents for tests/test_kaggle.py, each written as an agent file's last callable would be: the
test copies one function into a ``main.py`` of its own (``kaggle_agent``)."""


def leftmost(observation, configuration):
    """ConnectX: the leftmost column with room."""
    return next(column for column in range(configuration.columns) if observation.board[column] == 0)


def rightmost(observation, configuration):
    """ConnectX: the rightmost column with room."""
    return next(column for column in reversed(range(configuration.columns)) if observation.board[column] == 0)


def turner(observation):
    """Hungry Geese, one argument as Kaggle allows: north, east, south, west in turn, by step."""
    return ["NORTH", "EAST", "SOUTH", "WEST"][observation.step % 4]


def raiser(observation, configuration):
    """Raises in its third call."""
    raiser.calls = getattr(raiser, "calls", 0) + 1
    if raiser.calls == 3:
        raise RuntimeError("kaggle agent raised on purpose")
    return next(column for column in range(configuration.columns) if observation.board[column] == 0)


def out_of_range(observation, configuration):
    """ConnectX: a column the board does not have."""
    return configuration.columns + 5


def sleeper(observation, configuration):
    """Sleeps past any deadline in its second call."""
    import time

    sleeper.calls = getattr(sleeper, "calls", 0) + 1
    if sleeper.calls == 2:
        time.sleep(30)
    return 0


def climber(observation, configuration):
    """Hungry Geese: north, east, north, west in turn, by step (never back the way it came)."""
    return ["NORTH", "EAST", "NORTH", "WEST"][observation.step % 4]


def snoop(observation, configuration):
    """Reads another team's agent file (its path in SNOOP_PATH, a module-level name the test writes)."""
    from pathlib import Path

    if observation.step < 2:
        try:
            print("read:", Path(SNOOP_PATH).read_text())  # noqa: F821 -- written above it by the test
        except OSError as exc:
            print("refused:", type(exc).__name__)
    return next(column for column in range(configuration.columns) if observation.board[column] == 0)


def writer(observation, configuration):
    """Writes a file outside its cell (its path in ESCAPE_PATH, written above it by the test)."""
    from pathlib import Path

    try:
        Path(ESCAPE_PATH).write_text("escaped")  # noqa: F821
        print("write: done")
    except OSError as exc:
        print("write: refused", type(exc).__name__)
    return next(column for column in range(configuration.columns) if observation.board[column] == 0)


def flood(observation, configuration):
    """Prints 100 MB in its first call."""
    if observation.step < 2:
        chunk = "x" * (1 << 20)
        for _ in range(100):
            print(chunk, flush=True)
    return next(column for column in range(configuration.columns) if observation.board[column] == 0)


def forker(observation, configuration):
    """Starts a child that sleeps, and prints its pid; plays on."""
    import os
    import subprocess
    import sys

    if observation.step < 2:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        print(f"child pid {child.pid} of {os.getpid()}", flush=True)
    return next(column for column in range(configuration.columns) if observation.board[column] == 0)


def deep(observation, configuration):
    """An action 400 lists deep: Kaggle's schema check deep-copies it, past Python's recursion limit."""
    value = 0
    for _ in range(400):
        value = [value]
    return value


def not_a_number(observation, configuration):
    """NaN: Python's json writes it, JSON has no such number."""
    return float("nan")


def overdrawn(observation, configuration):
    """ConnectX: says the time it is told it has, and takes 0.8 s on its second call."""
    import time

    overdrawn.calls = getattr(overdrawn, "calls", 0) + 1
    print(f"act {configuration.actTimeout} overage {observation.remainingOverageTime:.3f}", flush=True)
    if overdrawn.calls == 2:
        time.sleep(0.8)
    return next(column for column in range(configuration.columns) if observation.board[column] == 0)


def kore_crasher(observation, configuration):
    """Kore Fleets, from its second turn: a launch whose flight plan the game's schema allows (any text)
    and its rules assert against."""
    shipyards = observation.players[observation.player][1]
    return {shipyard: "LAUNCH_2_NZ" for shipyard in shipyards} if observation.step >= 1 else {}
