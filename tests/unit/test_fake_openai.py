"""Drive a real pydantic-ai `OpenAIChatModel` against `tests/fake_openai.py`, fully offline."""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip('openai')

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.providers.openai import OpenAIProvider

try:  # renamed in pydantic-ai 1.0; keep the old name working for older installs
    from pydantic_ai.models.openai import OpenAIChatModel as _ChatModel
except ImportError:  # pragma: no cover
    from pydantic_ai.models.openai import OpenAIModel as _ChatModel  # type: ignore[attr-defined,no-redef]

# `tests/` has no __init__.py, so make the helper importable under either rootdir layout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fake_openai import FAKE_CREATED, FakeOpenAI, Reply, ToolCall


def _agent(srv: FakeOpenAI) -> Agent[None, str]:
    model = _ChatModel('gpt-4o-mini', provider=OpenAIProvider(base_url=srv.base_url, api_key='test-key'))
    agent: Agent[None, str] = Agent(model)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f'Sunny in {city}'

    return agent


def _tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body['messages'] if m.get('role') == 'tool']


def test_plain_text_run() -> None:
    with FakeOpenAI([Reply.text('hello there')]) as srv:
        result = asyncio.run(_agent(srv).run('hi'))
    assert result.output == 'hello there'
    assert len(srv.requests) == 1
    assert srv.requests[0]['model'] == 'gpt-4o-mini'
    assert not srv.requests[0].get('stream')
    response = result.all_messages()[-1]
    assert isinstance(response, ModelResponse)
    assert response.provider_response_id == 'chatcmpl-fake-1'
    usage = result.usage() if callable(result.usage) else result.usage  # method before pydantic-ai 2.x
    assert usage.output_tokens == 2


def test_tool_call_run() -> None:
    script: list[Reply | str] = [
        Reply.tool_call('get_weather', {'city': 'Paris'}, id='call_1'),
        'It is sunny in Paris.',
    ]
    with FakeOpenAI(script) as srv:
        result = asyncio.run(_agent(srv).run('Weather in Paris?'))
    assert result.output == 'It is sunny in Paris.'
    assert len(srv.requests) == 2
    assert [t['function']['name'] for t in srv.requests[0]['tools']] == ['get_weather']
    (tool_msg,) = _tool_messages(srv.requests[1])
    assert tool_msg == {'role': 'tool', 'tool_call_id': 'call_1', 'content': 'Sunny in Paris'}
    calls = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolCallPart)]
    assert [(c.tool_name, c.args_as_dict(), c.tool_call_id) for c in calls] == [
        ('get_weather', {'city': 'Paris'}, 'call_1')
    ]


def test_streamed_text_and_tool_call() -> None:
    script = [Reply.tool_call('get_weather', {'city': 'Paris'}, id='call_1'), Reply.text('It is sunny in Paris.')]

    async def go(srv: FakeOpenAI) -> tuple[str, list[str]]:
        async with _agent(srv).run_stream('Weather in Paris?') as result:
            deltas = [d async for d in result.stream_text(delta=True, debounce_by=None)]
            return await result.get_output(), deltas

    with FakeOpenAI(script) as srv:
        output, deltas = asyncio.run(go(srv))
    assert output == 'It is sunny in Paris.'
    assert len(deltas) > 1 and ''.join(deltas) == output  # really arrived in several chunks
    assert all(r['stream'] is True for r in srv.requests)
    assert srv.requests[0]['stream_options'] == {'include_usage': True}
    (tool_msg,) = _tool_messages(srv.requests[1])
    assert tool_msg['tool_call_id'] == 'call_1' and tool_msg['content'] == 'Sunny in Paris'


def test_parallel_tool_calls_and_default_ids() -> None:
    turn = Reply.tool_call('get_weather', {'city': 'Paris'}) + Reply.tool_call('get_weather', {'city': 'Rome'})
    with FakeOpenAI([turn, 'done']) as srv:
        result = asyncio.run(_agent(srv).run('two cities'))
    assert result.output == 'done'
    tool_msgs = _tool_messages(srv.requests[1])
    assert {(m['tool_call_id'], m['content']) for m in tool_msgs} == {
        ('call_1_0', 'Sunny in Paris'),
        ('call_1_1', 'Sunny in Rome'),
    }


def test_stream_chunks_are_deterministic_and_split() -> None:
    srv = FakeOpenAI()
    turn = Reply.tool_calls(ToolCall('f', {'a': 'xyz'}, id='c'))
    chunks = list(srv.chunks(1, 'm', turn, include_usage=True))
    assert chunks == list(srv.chunks(1, 'm', turn, include_usage=True))
    assert all(c['created'] == FAKE_CREATED and c['id'] == 'chatcmpl-fake-1' for c in chunks)
    arg_pieces = [
        tc['function']['arguments'] for c in chunks for ch in c['choices'] for tc in ch['delta'].get('tool_calls', [])
    ]
    assert len([p for p in arg_pieces if p]) > 1 and ''.join(arg_pieces) == '{"a":"xyz"}'
    assert chunks[-2]['choices'][0]['finish_reason'] == 'tool_calls'
    assert chunks[-1]['choices'] == [] and chunks[-1]['usage']['total_tokens'] > 0


def test_exhausted_script_is_http_500_without_retry() -> None:
    with FakeOpenAI([]) as srv:
        req = urllib.request.Request(
            srv.base_url + '/chat/completions',
            data=json.dumps({'model': 'm', 'messages': []}).encode(),
            headers={'Content-Type': 'application/json'},
        )
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(req, timeout=5)
        assert info.value.code == 500
        assert info.value.headers['x-should-retry'] == 'false'
        assert json.loads(info.value.read())['error']['code'] == 'script_exhausted'

        # The openai SDK must not retry (max_retries would otherwise triple the requests).
        with pytest.raises(Exception, match='script exhausted'):
            asyncio.run(_agent(srv).run('hi'))
        assert len(srv.requests) == 2


def test_start_stop_is_idempotent_and_frees_the_port() -> None:
    srv = FakeOpenAI(['x']).start()
    url = srv.base_url
    assert url.startswith('http://127.0.0.1:') and url.endswith('/v1')
    srv.stop()
    srv.stop()
    with pytest.raises(RuntimeError):
        _ = srv.base_url
