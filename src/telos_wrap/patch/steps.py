"""The I/O of one call's preparation, as steps a plan asks for, and the two drivers that take them.

A call's route and preparation (``turns._plan``) is written once, as a generator that does no I/O:
where it needs some it yields a step and is sent the answer — a body whose file inputs are read
(``ReadFiles``), the session's turn (``PrepareTurn``), its hooks (``Hooks``), a pass-through noted in
the session (``NotePassthrough``). ``run`` answers each step on this thread with the sync I/O (the
file inputs read inline, as the sync SDK reads them); ``arun`` awaits the async I/O (the file inputs
read in a worker thread, as the async SDK reads them there, never on the event loop's thread). A
step that fails is thrown into the plan where it asked, as if the call had raised there: the plan
says what a failure means, the same for both drivers.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from telos_wrap.patch.sdk_json import aread_files, read_files

if TYPE_CHECKING:
    from telos_wrap.errors import TelosStageError
    from telos_wrap.ir.model import Api
    from telos_wrap.pipeline import Prepared, PrepareOptions, SessionHooks
    from telos_wrap.sessions.runtime import SessionRuntime

__all__ = ["Hooks", "NotePassthrough", "Plan", "PrepareTurn", "ReadFiles", "Step", "arun", "run"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ReadFiles:
    """``body`` (``sdk_json.with_file_inputs``' copy) with its file inputs read as the SDK reads them."""

    sdk: str
    body: Mapping[str, Any]

    def run(self) -> Any:
        """The step done with the sync I/O (``run``\'s)."""
        return read_files(self.sdk, self.body)

    async def arun(self) -> Any:
        """The step done with the async I/O (``arun``\'s)."""
        return await aread_files(self.sdk, self.body)


@dataclass(frozen=True, slots=True)
class PrepareTurn:
    """The session's turn for the request: ``(request index, Prepared)`` (``prepare_request``)."""

    session: SessionRuntime
    api: Api
    body: Mapping[str, Any]
    options: PrepareOptions
    strict: bool
    tenant: str

    def run(self) -> tuple[int, Prepared]:
        """The step done with the sync I/O (``run``\'s)."""
        return self.session.prepare_request(
            self.api, self.body, self.options, strict=self.strict, tenant=self.tenant
        )

    async def arun(self) -> tuple[int, Prepared]:
        """The step done with the async I/O (``arun``\'s)."""
        return await self.session.prepare_request_async(
            self.api, self.body, self.options, strict=self.strict, tenant=self.tenant
        )


@dataclass(frozen=True, slots=True)
class Hooks:
    """The session's pipeline hooks, for a request that is not a turn (``SessionRuntime.hooks``)."""

    session: SessionRuntime
    strict: bool

    def run(self) -> SessionHooks:
        """The step done with the sync I/O (``run``\'s)."""
        return self.session.hooks(strict=self.strict)

    async def arun(self) -> SessionHooks:
        """The step done with the async I/O (``arun``\'s)."""
        return await self.session.ahooks(strict=self.strict)


@dataclass(frozen=True, slots=True)
class NotePassthrough:
    """A request sent as built, noted in its session: its index (``SessionRuntime.note_passthrough``)."""

    session: SessionRuntime
    api: Api
    engine: str
    body: Mapping[str, Any]
    failed: TelosStageError | None = None

    def run(self) -> int:
        """The step done with the sync I/O (``run``\'s)."""
        return self.session.note_passthrough(self.api, self.engine, self.body, failed=self.failed)

    async def arun(self) -> int:
        """The step done with the async I/O (``arun``\'s)."""
        return await self.session.note_passthrough_async(self.api, self.engine, self.body, failed=self.failed)


#: What a plan may ask for.
Step = ReadFiles | PrepareTurn | Hooks | NotePassthrough

#: A plan: yields the steps it needs, is sent each one's answer, returns its result.
Plan = Generator[Step, Any, T]


def run(plan: Plan[T]) -> T:
    """``plan``'s result, its steps answered on this thread with the sync I/O."""
    value: Any = None
    error: Exception | None = None
    try:
        while True:
            try:
                step = plan.send(value) if error is None else plan.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            try:
                value, error = step.run(), None
            except Exception as exc:
                value, error = None, exc
    finally:
        plan.close()


async def arun(plan: Plan[T]) -> T:
    """``plan``'s result, its steps answered with the async I/O (awaited: the loop is never blocked)."""
    value: Any = None
    error: Exception | None = None
    try:
        while True:
            try:
                step = plan.send(value) if error is None else plan.throw(error)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            try:
                value, error = await step.arun(), None
            except Exception as exc:
                value, error = None, exc
    finally:
        plan.close()
