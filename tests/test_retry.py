"""The one retry rule (``runner.play_again``) that a tournament's ``play_all`` and the ladder's run loop
both follow: the user's error is raised at once, the machinery's is played again up to MAX_ATTEMPTS."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from policybox.errors import PolicyboxError
from policybox.host.zygote import ZygoteError
from policybox.league.play.runner import MAX_ATTEMPTS, EpisodeJob, failure, play_again, play_all
from policybox.settings import EpisodeSettings


@pytest.mark.parametrize("exc", [ZygoteError("the zygote died"), RuntimeError("a worker was lost")])
def test_the_machinery_is_played_again_up_to_max_attempts(exc: Exception) -> None:
    assert all(play_again(exc, attempts) for attempts in range(1, MAX_ATTEMPTS))
    assert not play_again(exc, MAX_ATTEMPTS)


def test_the_users_error_is_raised_at_once() -> None:
    error = PolicyboxError("the disk is full")
    with pytest.raises(PolicyboxError) as raised:
        play_again(error, 1)
    assert raised.value is error


class _Failing:
    """A runner whose every job's future raises ``exc``; it counts the plays."""

    count = 1

    def __init__(self, exc: Exception) -> None:
        self.exc, self.plays = exc, 0

    def submit(self, job: EpisodeJob) -> Future[str]:
        self.plays += 1
        future: Future[str] = Future()
        future.set_exception(self.exc)
        return future


def _jobs() -> dict[str, EpisodeJob]:
    return {
        "episode-0": EpisodeJob(name="episode-0", specs=[], entrants=[], settings=EpisodeSettings(), log_dir="/nowhere")
    }


def test_play_all_gives_a_job_up_after_max_attempts_with_why() -> None:
    runner = _Failing(RuntimeError("a worker was lost"))
    incomplete = play_all(runner, _jobs(), lambda *_: pytest.fail("nothing finished"))  # type: ignore[arg-type]
    assert runner.plays == MAX_ATTEMPTS
    assert incomplete == {"episode-0": failure(runner.exc)} == {"episode-0": "RuntimeError: a worker was lost"}


def test_play_all_raises_the_users_error_after_one_play() -> None:
    runner = _Failing(PolicyboxError("the game cannot be reset with a seed"))
    with pytest.raises(PolicyboxError, match="reset with a seed"):
        play_all(runner, _jobs(), lambda *_: pytest.fail("nothing finished"))  # type: ignore[arg-type]
    assert runner.plays == 1
