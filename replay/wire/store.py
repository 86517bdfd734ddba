"""Between the in-memory HTTP exchanges of ``replay.wire.capture`` and the cassette's ``WireRecord``."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..cassette import Cassette, CassetteBuilder, WireRecord
from .capture import HttpExchange


def to_records(builder: CassetteBuilder, captured: Iterable[HttpExchange]) -> list[WireRecord]:
    """Intern each request body (its top-level lists element by element) and keep the raw answers."""
    records = []
    for ex in captured:
        record = WireRecord.model_construct(
            method=ex.method,
            url=ex.url,
            request_headers=dict(ex.request_headers),
            body=None,
            body_lists={},
            body_text=None,
            status=ex.status,
            response_headers=dict(ex.response_headers),
            response=ex.response_body.decode("utf-8", "replace"),
            stream=ex.stream,
        )
        try:
            body = json.loads(ex.request_body) if ex.request_body else None
        except (ValueError, UnicodeDecodeError):
            record.body_text = ex.request_body.decode("utf-8", "replace")
            body = None
        if isinstance(body, dict):
            record.body = builder.blob({k: v for k, v in body.items() if not isinstance(v, list)})
            record.body_lists = {k: [_blob(builder, [item]) for item in v] for k, v in body.items() if isinstance(v, list)}
        elif body is not None:  # a JSON body that is not an object: kept whole, wrapped in a list
            record.body = _blob(builder, [body])
        records.append(record)
    return records


def _blob(builder: CassetteBuilder, value: Any) -> int:
    index = builder.blob(value)
    assert index is not None  # only None interns to None
    return index


def request_body(cassette: Cassette, record: WireRecord) -> Any:
    """The JSON body (or text) as it was sent."""
    if record.body_text is not None:
        return record.body_text
    base = cassette.blob(record.body)
    if isinstance(base, list):
        return base[0] if base else None
    if not isinstance(base, dict):
        return None
    body: dict[str, Any] = dict(base)
    for key, ids in record.body_lists.items():
        body[key] = [_unwrap(cassette.blob(i)) for i in ids]
    return body


def _unwrap(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else None


def answers(records: Iterable[WireRecord]) -> list[HttpExchange]:
    """Recorded answers, in the form the transport serves them."""
    return [
        HttpExchange(
            method=r.method,
            url=r.url,
            request_headers=dict(r.request_headers),
            request_body=b"",
            status=r.status,
            response_headers=dict(r.response_headers),
            response_body=r.response.encode("utf-8"),
            stream=r.stream,
            complete=True,
        )
        for r in records
    ]
