"""A tiny scripted OpenAI-compatible Chat Completions server for offline tests.

Why: mocking `pydantic_ai` internals (or using `TestModel`/`FunctionModel`) skips the
provider code path that harness-replay records in real life -- request serialisation in
`OpenAIChatModel`, the `openai` SDK, httpx, SSE parsing. This server lets tests drive a
*real* `OpenAIChatModel` end to end while no traffic leaves the machine: it binds
`127.0.0.1` on an ephemeral port and answers `POST /v1/chat/completions` from a script.

Every id and timestamp it emits is a fixed function of the request number, so two runs of
the same script produce byte-identical responses (and therefore identical recordings).

Usage::

    with FakeOpenAI([Reply.tool_call('get_weather', {'city': 'Paris'}, id='call_1'),
                     Reply.text('Sunny in Paris')]) as srv:
        model = OpenAIChatModel('gpt-4o-mini',
                                provider=OpenAIProvider(base_url=srv.base_url, api_key='k'))
        ...
        assert srv.requests[1]['messages'][-1]['role'] == 'tool'
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

__all__ = ['FAKE_CREATED', 'FakeOpenAI', 'HttpError', 'Reply', 'ToolCall']

FAKE_CREATED = 1_700_000_000
"""The fixed `created` timestamp on every response, so recordings are deterministic."""

_CHAT_PATH = '/v1/chat/completions'
_RESPONSES_PATH = '/v1/responses'
_ANTHROPIC_PATH = '/v1/messages'
_INPUT_TOKENS_PATH = '/v1/responses/input_tokens'
_STREAM_PIECES = 3
"""Text and tool arguments are streamed in this many deltas, to exercise delta joining."""


@dataclass(frozen=True)
class ToolCall:
    """One function call the fake model asks for. `id=None` gets a deterministic id."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict[str, Any])
    id: str | None = None

    def arguments_json(self) -> str:
        """Arguments as the JSON string OpenAI sends (a `str` is passed through verbatim)."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, separators=(',', ':'), sort_keys=True)


@dataclass(frozen=True)
class Reply:
    """One scripted assistant turn: text, tool calls, or both (combine with `+`)."""

    content: str | None = None
    calls: tuple[ToolCall, ...] = ()

    @classmethod
    def text(cls, content: str) -> Reply:
        """A plain text answer (finish_reason `stop`)."""
        return cls(content=content)

    @classmethod
    def tool_call(cls, name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None) -> Reply:
        """A turn with a single tool call; `a + b` puts several calls in one turn."""
        return cls(calls=(ToolCall(name, {} if arguments is None else arguments, id),))

    @classmethod
    def tool_calls(cls, *calls: ToolCall) -> Reply:
        """A turn with several parallel tool calls."""
        return cls(calls=tuple(calls))

    def __add__(self, other: Reply) -> Reply:
        content = (
            None if self.content is None and other.content is None else (self.content or '') + (other.content or '')
        )
        return Reply(content=content, calls=self.calls + other.calls)

    @property
    def finish_reason(self) -> str:
        return 'tool_calls' if self.calls else 'stop'


@dataclass(frozen=True)
class HttpError:
    """One scripted error answer (a 429 with `retry-after`, a 503…), with the headers the SDK reads."""

    status: int
    headers: dict[str, str] = field(default_factory=dict[str, str])
    message: str = 'scripted error'


def _split(s: str, pieces: int = _STREAM_PIECES) -> list[str]:
    """Split `s` into up to `pieces` non-empty consecutive slices (deterministic)."""
    if not s:
        return []
    size = -(-len(s) // pieces)  # ceil division
    return [s[i : i + size] for i in range(0, len(s), size)]


class FakeOpenAI:
    """Scripted OpenAI-compatible server on `127.0.0.1`, in a daemon thread.

    Each `POST /v1/chat/completions` consumes the next turn of the script (a `Reply`, or a
    `str` as shorthand for `Reply.text`). `"stream": true` requests get SSE chunks, others a
    `chat.completion` object. Once the script is exhausted the server answers HTTP 500 with
    `x-should-retry: false`, so the openai SDK fails at once instead of retrying.
    Every parsed request body is appended to `requests`, including unanswerable ones.
    """

    def __init__(
        self,
        turns: Iterable[Reply | HttpError | str] = (),
        responder: Callable[[dict[str, Any]], Reply] | None = None,
    ) -> None:
        self._turns: list[Reply | HttpError] = [Reply.text(t) if isinstance(t, str) else t for t in turns]
        self._responder = responder
        """Answers every request from its body instead of a script (long or concurrent conversations)."""
        self._next = 0
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> Self:
        """Bind an ephemeral port and serve in the background; returns `self`."""
        if self._server is not None:
            raise RuntimeError('FakeOpenAI already started')
        server = ThreadingHTTPServer(('127.0.0.1', 0), _make_handler(self))
        server.daemon_threads = True
        self._server = server
        # A short poll interval keeps stop() fast (shutdown() waits for the next poll).
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={'poll_interval': 0.05}, name='fake-openai', daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port; safe to call twice."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- script ----------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The URL to give `OpenAIProvider(base_url=...)`, e.g. `http://127.0.0.1:54321/v1`."""
        if self._server is None:
            raise RuntimeError('FakeOpenAI not started')
        return f'http://127.0.0.1:{self._server.server_port}/v1'

    @property
    def root_url(self) -> str:
        """The server root, for SDKs that add `/v1` themselves (`AnthropicProvider(base_url=...)`)."""
        return self.base_url.removesuffix('/v1')

    def add(self, *turns: Reply | str) -> None:
        """Append turns to the script (e.g. between agent runs)."""
        with self._lock:
            self._turns.extend(Reply.text(t) if isinstance(t, str) else t for t in turns)

    @property
    def remaining(self) -> int:
        """How many scripted turns have not been served yet."""
        with self._lock:
            return len(self._turns) - self._next

    def _take(self, body: dict[str, Any]) -> tuple[int, Reply | HttpError | None]:
        """Record `body` and pop the next turn; returns (request number, turn or None)."""
        with self._lock:
            self.requests.append(body)
            number = len(self.requests)
            if self._responder is not None:
                return number, self._responder(body)
            if self._next >= len(self._turns):
                return number, None
            turn = self._turns[self._next]
            self._next += 1
            return number, turn

    # -- payloads --------------------------------------------------------------------

    @staticmethod
    def _usage(turn: Reply) -> dict[str, int]:
        """Deterministic fake token counts (rough length-based, never zero)."""
        out = len((turn.content or '').split()) + sum(len(c.arguments_json()) // 4 + 1 for c in turn.calls)
        completion = max(out, 1)
        return {'prompt_tokens': 10, 'completion_tokens': completion, 'total_tokens': 10 + completion}

    @staticmethod
    def _call_id(number: int, index: int, call: ToolCall) -> str:
        return call.id if call.id is not None else f'call_{number}_{index}'

    def completion(self, number: int, model: str, turn: Reply) -> dict[str, Any]:
        """The non-streamed `chat.completion` object for request `number`."""
        message: dict[str, Any] = {'role': 'assistant', 'content': turn.content, 'refusal': None}
        if turn.calls:
            message['tool_calls'] = [
                {
                    'id': self._call_id(number, i, c),
                    'type': 'function',
                    'function': {'name': c.name, 'arguments': c.arguments_json()},
                }
                for i, c in enumerate(turn.calls)
            ]
        return {
            'id': f'chatcmpl-fake-{number}',
            'object': 'chat.completion',
            'created': FAKE_CREATED,
            'model': model,
            'system_fingerprint': 'fp_fake',
            'choices': [{'index': 0, 'message': message, 'logprobs': None, 'finish_reason': turn.finish_reason}],
            'usage': self._usage(turn),
        }

    def chunks(self, number: int, model: str, turn: Reply, include_usage: bool) -> Iterator[dict[str, Any]]:
        """The `chat.completion.chunk` objects for a streamed answer, in OpenAI's order."""
        usage_field: dict[str, Any] = {'usage': None} if include_usage else {}

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {
                'id': f'chatcmpl-fake-{number}',
                'object': 'chat.completion.chunk',
                'created': FAKE_CREATED,
                'model': model,
                'system_fingerprint': 'fp_fake',
                'choices': [{'index': 0, 'delta': delta, 'logprobs': None, 'finish_reason': finish_reason}],
                **usage_field,
            }

        yield chunk({'role': 'assistant', 'content': '', 'refusal': None})
        for piece in _split(turn.content or ''):
            yield chunk({'content': piece})
        for i, c in enumerate(turn.calls):
            head = {'index': i, 'id': self._call_id(number, i, c), 'type': 'function'}
            yield chunk({'tool_calls': [{**head, 'function': {'name': c.name, 'arguments': ''}}]})
            for piece in _split(c.arguments_json()):
                yield chunk({'tool_calls': [{'index': i, 'function': {'arguments': piece}}]})
        yield chunk({}, turn.finish_reason)
        if include_usage:
            last = chunk({})
            last['choices'] = []
            last['usage'] = self._usage(turn)
            yield last

    # -- OpenAI Responses ------------------------------------------------------------

    def response_object(self, number: int, model: str, turn: Reply) -> dict[str, Any]:
        """The non-streamed `response` object of the Responses API for request `number`."""
        output: list[dict[str, Any]] = []
        if turn.content is not None:
            output.append(
                {
                    'type': 'message',
                    'id': f'msg_fake_{number}',
                    'role': 'assistant',
                    'status': 'completed',
                    'content': [{'type': 'output_text', 'text': turn.content, 'annotations': []}],
                }
            )
        for i, c in enumerate(turn.calls):
            output.append(
                {
                    'type': 'function_call',
                    'id': f'fc_fake_{number}_{i}',
                    'call_id': self._call_id(number, i, c),
                    'name': c.name,
                    'arguments': c.arguments_json(),
                    'status': 'completed',
                }
            )
        usage = self._usage(turn)
        return {
            'id': f'resp_fake_{number}',
            'object': 'response',
            'created_at': FAKE_CREATED,
            'model': model,
            'status': 'completed',
            'output': output,
            'parallel_tool_calls': True,
            'tool_choice': 'auto',
            'tools': [],
            'usage': {
                'input_tokens': usage['prompt_tokens'],
                'input_tokens_details': {'cached_tokens': 0},
                'output_tokens': usage['completion_tokens'],
                'output_tokens_details': {'reasoning_tokens': 0},
                'total_tokens': usage['total_tokens'],
            },
        }

    def response_events(self, number: int, model: str, turn: Reply) -> Iterator[dict[str, Any]]:
        """The events of a streamed Responses API answer (`stream: true`), in OpenAI's order."""
        whole = self.response_object(number, model, turn)
        seq = iter(range(1_000_000))

        def event(type_: str, **fields: Any) -> dict[str, Any]:
            return {'type': type_, 'sequence_number': next(seq), **fields}

        yield event('response.created', response={**whole, 'status': 'in_progress', 'output': [], 'usage': None})
        for index, item in enumerate(whole['output']):
            if item['type'] == 'message':
                text = item['content'][0]['text']
                yield event('response.output_item.added', output_index=index, item={**item, 'status': 'in_progress', 'content': []})
                part = {'type': 'output_text', 'text': '', 'annotations': []}
                yield event('response.content_part.added', item_id=item['id'], output_index=index, content_index=0, part=part)
                for piece in _split(text):
                    yield event('response.output_text.delta', item_id=item['id'], output_index=index, content_index=0,
                                delta=piece, logprobs=[])
                yield event('response.output_text.done', item_id=item['id'], output_index=index, content_index=0,
                            text=text, logprobs=[])
                yield event('response.content_part.done', item_id=item['id'], output_index=index, content_index=0,
                            part={**part, 'text': text})
            else:
                yield event('response.output_item.added', output_index=index,
                            item={**item, 'status': 'in_progress', 'arguments': ''})
                for piece in _split(item['arguments']):
                    yield event('response.function_call_arguments.delta', item_id=item['id'], output_index=index, delta=piece)
                yield event('response.function_call_arguments.done', item_id=item['id'], output_index=index,
                            arguments=item['arguments'], name=item['name'])
            yield event('response.output_item.done', output_index=index, item=item)
        yield event('response.completed', response=whole)

    # -- Anthropic Messages ----------------------------------------------------------

    def anthropic_message(self, number: int, model: str, turn: Reply) -> dict[str, Any]:
        """The non-streamed Messages API answer for request `number`."""
        content: list[dict[str, Any]] = []
        if turn.content is not None:
            content.append({'type': 'text', 'text': turn.content})
        for i, c in enumerate(turn.calls):
            args = json.loads(c.arguments_json()) if c.arguments_json() else {}
            content.append({'type': 'tool_use', 'id': c.id or f'toolu_fake_{number}_{i}', 'name': c.name, 'input': args})
        usage = self._usage(turn)
        return {
            'id': f'msg_fake_{number}',
            'type': 'message',
            'role': 'assistant',
            'model': model,
            'content': content,
            'stop_reason': 'tool_use' if turn.calls else 'end_turn',
            'stop_sequence': None,
            'usage': {
                'input_tokens': usage['prompt_tokens'],
                'output_tokens': usage['completion_tokens'],
                'cache_creation_input_tokens': 0,
                'cache_read_input_tokens': 0,
            },
        }

    def anthropic_events(self, number: int, model: str, turn: Reply) -> Iterator[tuple[str, dict[str, Any]]]:
        """(event name, data) of a streamed Messages API answer, in Anthropic's order."""
        whole = self.anthropic_message(number, model, turn)
        start = {**whole, 'content': [], 'stop_reason': None, 'usage': {**whole['usage'], 'output_tokens': 1}}
        yield 'message_start', {'type': 'message_start', 'message': start}
        for index, block in enumerate(whole['content']):
            if block['type'] == 'text':
                yield 'content_block_start', {'type': 'content_block_start', 'index': index,
                                              'content_block': {'type': 'text', 'text': ''}}
                for piece in _split(block['text']):
                    yield 'content_block_delta', {'type': 'content_block_delta', 'index': index,
                                                  'delta': {'type': 'text_delta', 'text': piece}}
            else:
                yield 'content_block_start', {'type': 'content_block_start', 'index': index,
                                              'content_block': {**block, 'input': {}}}
                for piece in _split(json.dumps(block['input'], sort_keys=True)):
                    yield 'content_block_delta', {'type': 'content_block_delta', 'index': index,
                                                  'delta': {'type': 'input_json_delta', 'partial_json': piece}}
            yield 'content_block_stop', {'type': 'content_block_stop', 'index': index}
        yield 'message_delta', {'type': 'message_delta',
                                'delta': {'stop_reason': whole['stop_reason'], 'stop_sequence': None},
                                'usage': {'output_tokens': whole['usage']['output_tokens']}}
        yield 'message_stop', {'type': 'message_stop'}


def _make_handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    """Build a handler class bound to `fake` (http.server instantiates it per request)."""

    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0 semantics: one request per connection, the SSE body ends at close.
        protocol_version = 'HTTP/1.0'

        def log_message(self, format: str, *args: Any) -> None:
            """Silence the default stderr access log; tests assert on `fake.requests` instead."""

        def _read_body(self) -> bytes:
            if self.headers.get('Transfer-Encoding', '').lower() == 'chunked':
                data = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b';')[0].strip() or b'0', 16)
                    if size == 0:
                        while self.rfile.readline().strip():  # trailers
                            pass
                        return bytes(data)
                    data += self.rfile.read(size)
                    self.rfile.readline()  # CRLF after each chunk
            length = int(self.headers.get('Content-Length') or 0)
            return self.rfile.read(length) if length > 0 else b''

        def _send_json(
            self,
            status: HTTPStatus | int,
            payload: dict[str, Any],
            *,
            no_retry: bool = False,
            headers: dict[str, str] | None = None,
        ) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(data)))
            self.send_header('Connection', 'close')
            if no_retry:
                self.send_header('x-should-retry', 'false')
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: HTTPStatus, message: str, code: str) -> None:
            error = {'message': message, 'type': 'fake_openai_error', 'param': None, 'code': code}
            self._send_json(status, {'error': error}, no_retry=True)

        def _start_sse(self) -> None:
            self.send_response(HTTPStatus.OK)
            self.send_header('Content-Type', 'text/event-stream')
            self.send_header('Cache-Control', 'no-cache')
            self.send_header('Connection', 'close')
            self.end_headers()

        def do_GET(self) -> None:
            self._error(HTTPStatus.NOT_FOUND, f'no route for GET {self.path}', 'not_found')

        def do_POST(self) -> None:
            path = self.path.split('?', 1)[0].rstrip('/')
            if path.endswith('/chat/completions'):  # OpenAI-compatible APIs under other prefixes (Groq: /openai/v1)
                path = _CHAT_PATH
            if path == _INPUT_TOKENS_PATH:  # count_tokens of the Responses API: a length-based count, not a turn
                body = json.loads(self._read_body() or b'null')
                with fake._lock:
                    fake.requests.append(body)
                tokens = max(1, len(json.dumps(body.get('input'))) // 4)
                self._send_json(HTTPStatus.OK, {'object': 'response.input_tokens', 'input_tokens': tokens})
                return
            if path not in (_CHAT_PATH, _RESPONSES_PATH, _ANTHROPIC_PATH):
                self._error(HTTPStatus.NOT_FOUND, f'no route for POST {self.path}', 'not_found')
                return
            try:
                body = json.loads(self._read_body() or b'null')
            except (ValueError, UnicodeDecodeError) as e:
                self._error(HTTPStatus.BAD_REQUEST, f'invalid JSON body: {e}', 'invalid_json')
                return
            if not isinstance(body, dict):
                self._error(HTTPStatus.BAD_REQUEST, 'request body must be a JSON object', 'invalid_json')
                return
            number, turn = fake._take(body)
            if turn is None:
                msg = f'FakeOpenAI script exhausted: request #{number} has no scripted reply'
                self._error(HTTPStatus.INTERNAL_SERVER_ERROR, msg, 'script_exhausted')
                return
            if isinstance(turn, HttpError):
                error = {'message': turn.message, 'type': 'fake_openai_error', 'param': None, 'code': None}
                self._send_json(turn.status, {'error': error}, headers=turn.headers)
                return
            model = str(body.get('model') or 'fake-model')
            if path == _RESPONSES_PATH:
                if not body.get('stream'):
                    self._send_json(HTTPStatus.OK, fake.response_object(number, model, turn))
                    return
                self._start_sse()
                for data in fake.response_events(number, model, turn):
                    self.wfile.write(f'event: {data["type"]}\ndata: {json.dumps(data)}\n\n'.encode())
                self.wfile.flush()
                return
            if path == _ANTHROPIC_PATH:
                if not body.get('stream'):
                    self._send_json(HTTPStatus.OK, fake.anthropic_message(number, model, turn))
                    return
                self._start_sse()
                for name, data in fake.anthropic_events(number, model, turn):
                    self.wfile.write(f'event: {name}\ndata: {json.dumps(data)}\n\n'.encode())
                self.wfile.flush()
                return
            if not body.get('stream'):
                self._send_json(HTTPStatus.OK, fake.completion(number, model, turn))
                return
            include_usage = bool((body.get('stream_options') or {}).get('include_usage'))
            self._start_sse()
            for c in fake.chunks(number, model, turn, include_usage):
                self.wfile.write(f'data: {json.dumps(c)}\n\n'.encode())
            self.wfile.write(b'data: [DONE]\n\n')
            self.wfile.flush()

    return Handler
