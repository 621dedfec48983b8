"""What every ``policybox`` command shares once it runs: its consoles, how it reports a user's mistake, a
full disk and an interrupt, the checks of the folders and files it is given, a ladder opened and one of its
pages shown. Imported by a command's work, never by ``--help`` (rich is not needed until something is
shown)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.text import Text

from policybox.errors import PolicyboxError
from policybox.inert import shown
from policybox.storage import StorageFull

if TYPE_CHECKING:
    from policybox.league.ladder.folder import LadderFolder

console = Console(emoji=False)  # ":FACTORY:" in a message is text, not an emoji code
errors = Console(stderr=True, emoji=False)
# What a user can get wrong: one clear message and exit code 2, nothing started, nothing lost.
USER_ERRORS = (PolicyboxError, ValidationError)
Page = TypeVar("Page", bound=BaseModel)  # a ladder's page, as policybox.league.views reads it


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C's KeyboardInterrupt, so that it unwinds the same way."""


def _interrupted(signum: int, frame: object) -> None:
    _received.append(KeyboardInterrupt)
    raise KeyboardInterrupt


def _terminated(signum: int, frame: object) -> None:
    _received.append(Terminated)
    raise Terminated


_received: list[type[KeyboardInterrupt]] = []  # the interrupts that arrived while guarded
_dropped: list[type[KeyboardInterrupt]] = []  # interrupts Python dropped, to be raised again
REDELIVER_S = 0.01


def _redelivered(unraisable: Any) -> None:
    """``sys.unraisablehook`` while guarded: an interrupt that Python dropped -- its handler ran inside a
    garbage-collection callback or a ``__del__`` (SQLAlchemy's weakref callbacks, say), where what is
    raised is printed as "Exception ignored" and lost -- is raised again a moment later, by SIGALRM,
    once out of there (not from this hook: it runs inside the same callback). Without this, a Ctrl-C
    or SIGTERM could be ignored by a command that runs until stopped."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        _dropped.append(type(unraisable.exc_value))
        signal.setitimer(signal.ITIMER_REAL, REDELIVER_S)
        return
    sys.__unraisablehook__(unraisable)


def _raise_dropped(signum: int, frame: object) -> None:
    if _dropped:
        raise _dropped.pop()


@contextlib.contextmanager
def guarded(after_interrupt: str) -> Iterator[None]:
    """A user's mistake: one clear message and exit 2. A full disk: its message, exit 1 (what was
    written is kept). Ctrl-C: say what was kept, exit 130; SIGTERM the same, exit 143 -- also where the
    interrupt was raised inside native code that turned it into an exception of its own (pydantic's
    serializer makes it a ``PydanticSerializationError``)."""
    previous = signal.signal(signal.SIGTERM, _terminated), signal.signal(signal.SIGINT, _interrupted)
    previous_alarm, previous_hook = signal.signal(signal.SIGALRM, _raise_dropped), sys.unraisablehook
    sys.unraisablehook = _redelivered
    _received.clear()
    try:
        yield
    except KeyboardInterrupt as stop:
        _end_interrupted(after_interrupt, type(stop))
    except typer.Exit:
        raise
    except Exception as exc:
        if _received:  # what the interrupt became on its way through native code
            _end_interrupted(after_interrupt, _received[-1])
        if isinstance(exc, StorageFull):
            errors.print(error_line(exc), soft_wrap=True)
            raise typer.Exit(1) from None
        if isinstance(exc, USER_ERRORS):
            errors.print(error_line(exc), soft_wrap=True)
            if getattr(exc, "end_at_once", False):  # a database whose connections must not be closed (FilesChanged)
                sys.stdout.flush()
                os._exit(2)
            raise typer.Exit(2) from None
        raise
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])
        signal.setitimer(signal.ITIMER_REAL, 0)  # a redelivery not yet due must not reach SIGALRM's default
        signal.signal(signal.SIGALRM, previous_alarm)
        sys.unraisablehook = previous_hook
        _dropped.clear()
        _received.clear()


def _end_interrupted(after_interrupt: str, interrupt: type[KeyboardInterrupt]) -> NoReturn:
    with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C while saying so changes nothing
        errors.print(f"[yellow]interrupted: {after_interrupt}[/]")
    raise typer.Exit(143 if issubclass(interrupt, Terminated) else 130) from None


def show_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    """``warnings.showwarning`` for the command line: a policybox warning (a ladder's folder that others
    may read, say) is one line on stderr -- where in our code it was raised is not the user's business;
    any other library's as Python shows it (formatted here, not by whatever ``warnings.showwarning`` was
    when this module was imported: that may be this function already, the command having set it)."""
    if category.__module__.startswith("policybox."):
        errors.print(Text.assemble(("Warning: ", "bold yellow"), shown(message)), soft_wrap=True)
    else:
        (file or sys.stderr).write(warnings.formatwarning(message, category, filename, lineno, line))


def say(text: object, style: str = "") -> None:
    """Print ``text`` on the console as written: inert, never read as rich markup (a policy's name, a
    path, a message may hold ``[red]``)."""
    console.print(shown(text, style))


def error_line(message: object) -> Text:
    """An error line in the one style of every error (click's own included): ``Error: ...``, inert
    (it may quote a spec file or a zip's names). Printed with soft wrap: no path is broken."""
    return Text.assemble(("Error: ", "bold red"), shown(message))


def check_folder(folder: Path, option: str) -> None:
    """The folder ``option`` names exists or can be made there (checked without creating anything)."""
    existing = next(path for path in (folder, *folder.absolute().parents) if path.exists())
    if not existing.is_dir():
        raise typer.BadParameter(f"{existing} is a file, not a folder", param_hint=option)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise typer.BadParameter(f"folder {existing} is not writable", param_hint=option)


def check_writable(out: Path | None, example: str = "result.json") -> None:
    """``out`` is a file that can be written (``example``: a file name to suggest when it is a folder)."""
    if out is None:
        return
    if out.is_dir():
        raise typer.BadParameter(f"{out} is a folder; give a file name such as {out / example}", param_hint="--out")
    if not out.parent.resolve().is_dir():
        raise typer.BadParameter(f"folder {out.parent} does not exist", param_hint="--out")
    if not os.access(out.parent.resolve(), os.W_OK):
        raise typer.BadParameter(f"folder {out.parent} is not writable", param_hint="--out")


def open_ladder(folder: Path, read_only: bool = False) -> LadderFolder:
    """The ladder in ``folder``. The database layer (SQLAlchemy) is imported here, by the ladder's
    commands only: ``policybox run`` and ``evaluate`` start without it."""
    from policybox.league.ladder.folder import LadderFolder

    return LadderFolder.open(folder, read_only=read_only)


def show_page(
    folder: Path, read: Callable[[LadderFolder], Page], table: Callable[[Console, Page], None], json: bool
) -> None:
    """A page of the ladder in ``folder`` -- ``read`` off it, nothing changed -- as JSON, or as its ``table``."""
    with guarded("nothing was changed"), open_ladder(folder, read_only=True) as ladder:
        page = read(ladder)
    if json:
        console.print_json(page.model_dump_json())
    else:
        table(console, page)
