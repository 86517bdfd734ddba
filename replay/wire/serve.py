"""Replay at the transport: the provider model builds its request for real, the cassette answers it.

Only calls whose recording holds HTTP exchanges are served this way; in-process models
(FunctionModel, TestModel) and cassettes recorded before wire capture are answered at the
model boundary as before.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from ..cassette import Exchange
from ..recorder._interception import Call
from ..replayer import CassetteSource, Divergence, Level, _served_stream
from .capture import WireSlot, current_slot
from .store import answers

_allow_lock = threading.Lock()
_allow_depth = 0
_allow_saved = False


@contextmanager
def models_allowed() -> Iterator[None]:
    """Let a provider model past pydantic-ai's ``ALLOW_MODEL_REQUESTS`` while its HTTP is served locally.

    Nested and concurrent uses share one switch: the first in turns it on, the last out
    puts back what was there.
    """
    from pydantic_ai import models

    global _allow_depth, _allow_saved
    with _allow_lock:
        if _allow_depth == 0:
            _allow_saved = models.ALLOW_MODEL_REQUESTS
            models.ALLOW_MODEL_REQUESTS = True
        _allow_depth += 1
    try:
        yield
    finally:
        with _allow_lock:
            _allow_depth -= 1
            if _allow_depth == 0:
                models.ALLOW_MODEL_REQUESTS = _allow_saved


class WireSource(CassetteSource):
    """Serves recorded HTTP answers to the provider model's real requests; model-level answers otherwise."""

    def _arm(self, rec: Exchange) -> WireSlot | None:
        slot = current_slot()
        if slot is None or not rec.wire:
            return None
        slot.answers = deque(answers(rec.wire))
        return slot

    def _check(self, rec: Exchange, slot: WireSlot) -> None:
        made, recorded = len(slot.captured), len(rec.wire or ())
        if made != recorded:
            self.divergences.append(
                Divergence(
                    rec.role,
                    rec.index,
                    "exhausted" if made > recorded else "unused",
                    f"made {made} HTTP request{'s' * (made != 1)} where the recording has {recorded}",
                )
            )

    async def respond(self, call: Call, exchange: Exchange) -> Any:
        rec = self._next(call, exchange)
        if rec is None:
            return await call.call_original()
        if not rec.wire:
            return await self._serve(rec)
        await self._wait_turn(rec)
        slot = self._arm(rec)
        try:
            if slot is None:
                return self._response(rec)
            with models_allowed():
                return await call.call_original()
        finally:
            self._release(rec)
            if slot is not None:
                self._check(rec, slot)

    def stream(self, call: Call, exchange: Exchange) -> Any:
        rec = self._next(call, exchange)
        if rec is None:
            return call.call_original()
        if not rec.wire:
            return _served_stream(self, rec, call)
        return self._wire_stream(rec, call)

    @asynccontextmanager
    async def _wire_stream(self, rec: Exchange, call: Call) -> AsyncIterator[Any]:
        await self._wait_turn(rec)
        slot = self._arm(rec)
        try:
            with models_allowed():
                cm = call.call_original()
                response = await cm.__aenter__()
        finally:
            self._release(rec)
        exc_info: tuple[Any, Any, Any] = (None, None, None)
        try:
            yield response
        except BaseException as exc:
            exc_info = (type(exc), exc, exc.__traceback__)
            raise
        finally:
            await cm.__aexit__(*exc_info)
            if slot is not None:
                self._check(rec, slot)


def source_for(level: Level) -> type[CassetteSource]:
    """The response source of a replay level: ``wire`` serves HTTP where the cassette has it."""
    return WireSource if level == "wire" else CassetteSource
