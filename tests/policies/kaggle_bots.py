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
