"""Ctrl-C and SIGTERM end ``policybox evaluate`` within seconds at any moment, and the Python API runs
from a plain script: judged by exit codes, times, the processes left (psutil) and the results file.

A terminal's Ctrl-C is SIGINT to the whole foreground process group, so each run is started in a
session of its own and signalled either alone (its pid) or as a group, at moments spread over
start-up (workers starting, the tournament checked) and play.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import policy
from helpers.processes import still_running, tree

from policybox.league.evaluate.journal import read_records

EVALUATE_PAGE = Path(__file__).parents[1] / "docs" / "evaluate.md"
EPISODES = 12
# Two seats of every episode sleep 10 ms a step: an episode lasts over two seconds whatever the machine's
# speed, so that play is still under way at the last moment below, and costs little CPU.
PACER = policy("sleepy.py:Sleepy", **{"kw.sleep_s": "0.01"})
TOURNAMENT = ["-p", "random", "-p", PACER, "--episodes", str(EPISODES), "--agents", "4", "--steps", "200"]
# (seconds after the start, signal, to the whole group?, resume after?)
MOMENTS = [
    (0.3, signal.SIGINT, True, False),  # importing
    (1.0, signal.SIGTERM, False, False),  # workers starting
    (2.0, signal.SIGINT, False, False),  # the tournament checked
    (3.0, signal.SIGTERM, True, False),
    (4.5, signal.SIGINT, True, True),  # playing and writing
    (6.0, signal.SIGTERM, False, False),
    (8.0, signal.SIGINT, False, True),
]
ENDS_WITHIN_S = 20  # after the signal, on a loaded 2-core machine; typically 1-3 s


@pytest.mark.parametrize(("after_s", "signum", "group", "resume"), MOMENTS)
def test_a_signal_at_any_moment_ends_evaluate_cleanly(tmp_path, after_s, signum, group, resume):
    out = tmp_path / "board"
    command = [sys.executable, "-m", "policybox", "evaluate", *TOURNAMENT, "--out", str(out)]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    seen: dict[int, float] = {}
    deadline = time.monotonic() + after_s
    while time.monotonic() < deadline and process.poll() is None:
        seen.update(tree(process.pid))
        time.sleep(0.05)
    if process.poll() is not None:
        pytest.skip("the tournament finished before the signal")  # not expected at these moments
    sent = time.monotonic()
    os.killpg(process.pid, signum) if group else process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=120)
    took = time.monotonic() - sent
    assert took < ENDS_WITHIN_S, f"took {took:.1f} s to end"
    assert process.returncode == (130 if signum == signal.SIGINT else 143), stdout + stderr
    assert "Traceback" not in stderr and "Traceback" not in stdout, stderr
    assert "interrupted" in stderr
    time.sleep(0.5)  # the kernel's parent-death signals are delivered at once; give reaping a moment
    assert still_running(seen) == [], "processes outlived the command"
    if not (out / "results.jsonl").exists():
        return
    data = (out / "results.jsonl").read_text()
    records, good = read_records(out / "results.jsonl")
    assert good == len(data.encode()) and len(records) == data.count("\n")  # every line is a whole record
    if resume:  # the same command plays the rest, keeping every finished episode as it was
        resumed = subprocess.run(command, capture_output=True, text=True, timeout=900)
        assert resumed.returncode == 0, resumed.stderr
        assert f"resuming: {len(records)} of {EPISODES} episodes already done" in resumed.stdout or not records
        assert (out / "results.jsonl").read_text().startswith(data)
        assert sorted(read_records(out / "results.jsonl")[0]) == list(range(EPISODES))


def docs_api_example() -> str:
    """The docs' Python API example, verbatim (the first python block of evaluate.md's 'Python API' section)."""
    section = EVALUATE_PAGE.read_text().split("## Python API", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.parametrize("how", ["script", "stdin", "notebook"])
def test_the_api_example_runs_from_a_plain_script_stdin_and_a_notebook(tmp_path, how):
    """No ``if __name__ == "__main__":`` guard: the workers never import the caller's main module."""
    code = docs_api_example()
    assert "__main__" not in code
    script = tmp_path / "api.py"
    script.write_text(code)
    if how == "script":
        run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    elif how == "stdin":
        run = subprocess.run(
            [sys.executable, "-"], input=code, capture_output=True, text=True, cwd=tmp_path, timeout=600
        )
    else:  # a notebook: code run in __main__ with no file behind it
        exec_in_main = f"import sys; exec(compile({code!r}, '<cell>', 'exec'), sys.modules['__main__'].__dict__)"
        run = subprocess.run(
            [sys.executable, "-c", exec_in_main], capture_output=True, text=True, cwd=tmp_path, timeout=600
        )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "bootstrapping phase" not in run.stderr and "Traceback" not in run.stderr
    assert json.loads((tmp_path / "board-api" / "summary.json").read_text())["episodes_done"] >= 1


DROPPED = """
import os, signal, sys, time
import typer
from policybox.cli.common import guarded

class Collected:
    def __del__(self):  # as SQLAlchemy's weakref callbacks: the signal's handler runs in here
        os.kill(os.getpid(), signal.{signal})
        time.sleep(0.2)

try:
    with guarded("nothing was written"):
        Collected()
        time.sleep(10)
        print("not interrupted", flush=True)
except typer.Exit as stop:
    sys.exit(stop.exit_code)
"""


WRAPPED = """
import os, signal, sys, time
import pydantic, typer
from policybox.cli.common import guarded

class Job(pydantic.BaseModel):
    name: str

    @pydantic.field_serializer("name")
    def _interrupted_here(self, name):  # the signal's handler runs inside pydantic's serializer
        os.kill(os.getpid(), signal.{signal})
        time.sleep(0.2)
        return name

try:
    with guarded("nothing was written"):
        Job(name="x").model_dump_json()
        print("not interrupted", flush=True)
except typer.Exit as stop:
    sys.exit(stop.exit_code)
"""


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_native_code_turns_into_its_own_error_still_ends_the_command_as_interrupted(signum, code):
    """pydantic's serializer turns a KeyboardInterrupt raised in it into a PydanticSerializationError: a
    Ctrl-C that came while evaluate handed a worker its job printed a traceback and exit 1. Guarded
    commands know an interrupt came, and end as interrupted whatever it became."""
    run = subprocess.run(
        [sys.executable, "-c", WRAPPED.format(signal=signum.name)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == code, run.stdout + run.stderr
    assert "Traceback" not in run.stderr and "interrupted: nothing was written" in run.stderr


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_python_drops_inside_a_finaliser_still_stops_the_command(signum, code):
    """Python drops what a signal handler raises while a ``__del__`` or a garbage-collection callback
    runs ("Exception ignored"): a ladder run once ignored a Ctrl-C so, and ran on. Guarded commands
    raise it again once out of there, so the command ends as interrupted, at once."""
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-c", DROPPED.format(signal=signum.name)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == code, run.stdout + run.stderr
    assert "not interrupted" not in run.stdout and "interrupted: nothing was written" in run.stderr
    assert time.monotonic() - started < 8  # not after the ten seconds' sleep
