"""OpenAIClient over the official ``openai`` SDK, against the loopback recorder: what is sent (Responses and
Chat Completions), auth and base URLs (the SDK's, Azure's too), retries (the SDK's, bounded by its
``max_retries``), the mapping of every SDK failure to a tractkv error, tool-call parsing and the commit."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import openai
import pytest

from tractkv import ToolCall, Tract
from tractkv.engine.content import Message
from tractkv.errors import InvalidInput, LLMError, LLMHTTPError, MalformedResponse
from tractkv.llm import LLMClient, LLMResponse, OpenAIClient

from .conftest import RETRY_NOW, Recorder, openai_completion, output_message, response_body
from .test_sdk_acceptance import WEATHER_ANTHROPIC, WEATHER_OPENAI, build_tract, expected_openai_messages

HELLO = [Message(role="user", content="hi")]
WEATHER_CALL = {
    "id": "call_7",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Oslo", "units": ["C"]}'},
}
WEATHER_ITEM = {
    "type": "function_call",
    "id": "fc_7",
    "call_id": "call_7",
    "name": "get_weather",
    "arguments": '{"city": "Oslo", "units": ["C"]}',
    "status": "completed",
}
WEATHER_RESPONSES = {
    "type": "function",
    "name": "get_weather",
    "description": WEATHER_OPENAI["function"]["description"],
    "parameters": WEATHER_OPENAI["function"]["parameters"],
    "strict": None,  # required by the SDK's FunctionToolParam: None leaves it to the API
}
PATHS = {"responses": "/v1/responses", "chat": "/v1/chat/completions"}


def reply(api: str, text: str | None = "ok", *, model: str = "m") -> dict[str, object]:
    """A success body of ``api`` saying ``text``."""
    if api == "chat":
        return openai_completion(text, model=model)
    return response_body([output_message(text or "")], model=model)


@pytest.fixture(params=["responses", "chat"])
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def client(recorder: Recorder, api: str) -> Iterator[OpenAIClient]:
    with OpenAIClient(
        "gpt-test", api=api, base_url=f"{recorder.url}/v1", api_key="sk-test", max_retries=3
    ) as c:
        yield c


def test_responses_is_the_default_api(recorder: Recorder) -> None:
    recorder.reply(reply("responses"))
    with OpenAIClient("gpt-test", base_url=f"{recorder.url}/v1", api_key="k") as client:
        assert client.api == "responses"
        client.chat(HELLO)
    assert recorder.requests[0].path == "/v1/responses"


def test_request_shape_and_auth(recorder: Recorder, client: OpenAIClient, api: str) -> None:
    recorder.reply(reply(api, "Hi there", model="gpt-test-0613"))
    with build_tract("anthropic") as t:
        ctx = t.compile()

    response = client.chat(ctx.messages, tools=ctx.tools, temperature=0.2, seed=None)

    [request] = recorder.requests
    assert (request.method, request.path) == ("POST", PATHS[api])
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["content-type"] == "application/json"
    rendered = ctx.to_openai_params() if api == "chat" else ctx.to_responses_params()
    assert request.body == {
        "model": "gpt-test",
        **rendered,
        "temperature": 0.2,
    }  # None-valued params not sent
    if api == "chat":
        assert request.body["messages"] == expected_openai_messages()
        assert request.body["tools"][0] == WEATHER_OPENAI  # converted from Anthropic's shape
    else:
        assert request.body["tools"][0] == WEATHER_RESPONSES  # flat function tools
    assert response == LLMResponse(
        text="Hi there", model="gpt-test-0613", finish_reason="stop" if api == "chat" else "completed"
    )
    assert response.usage is not None
    assert (response.usage["input_tokens"], response.usage["output_tokens"]) == (10, 2)  # normalized
    assert response.raw["id"] in ("chatcmpl-1", "resp_1")  # the JSON the API sent
    assert isinstance(client, LLMClient)


def test_call_params_override_model_and_tools_are_converted(recorder: Recorder, api: str) -> None:
    recorder.reply(reply(api))
    with build_tract("openai") as t:
        messages = t.compile().messages
    with OpenAIClient("gpt-test", api=api, base_url=f"{recorder.url}/v1", api_key="k") as client:
        client.chat(messages, model="other-model", tools=[WEATHER_ANTHROPIC])

    body = recorder.requests[0].body
    assert body["model"] == "other-model"
    if api == "chat":
        assert body["messages"][2]["tool_calls"] == expected_openai_messages()[2]["tool_calls"]
        assert body["tools"] == [WEATHER_OPENAI]
    else:
        calls = [i for i in body["input"] if i.get("type") == "function_call"]
        assert [c["call_id"] for c in calls] == ["call_1", "call_2"]
        assert body["tools"] == [WEATHER_RESPONSES]


def test_params_the_sdk_does_not_type_reach_the_api_as_given(recorder: Recorder, api: str) -> None:
    """A param the SDK's method has no argument for goes in its extra_body (merged with the call's own)."""
    recorder.reply(reply(api))
    with OpenAIClient("m", api=api, base_url=f"{recorder.url}/v1", api_key="k") as client:
        client.chat(HELLO, top_k=5, extra_body={"min_p": 0.1})
    body = recorder.requests[0].body
    assert (body["top_k"], body["min_p"]) == (5, 0.1)
    assert "extra_body" not in body


def test_parses_tool_calls(recorder: Recorder, client: OpenAIClient, api: str) -> None:
    if api == "chat":
        second = {**WEATHER_CALL, "id": "call_8", "function": {"name": "get_time", "arguments": ""}}
        recorder.reply(openai_completion(None, [WEATHER_CALL, second]))
    else:
        second = {**WEATHER_ITEM, "id": "fc_8", "call_id": "call_8", "name": "get_time", "arguments": ""}
        recorder.reply(response_body([WEATHER_ITEM, second]))

    response = client.chat([Message(role="user", content="Oslo?")])

    assert response.text == ""
    assert response.finish_reason == ("tool_calls" if api == "chat" else "completed")
    assert response.tool_calls == (
        ToolCall(id="call_7", name="get_weather", arguments={"city": "Oslo", "units": ["C"]}),
        ToolCall(id="call_8", name="get_time", arguments={}),
    )
    assert response.tool_calls[0].arguments == {"city": "Oslo", "units": ["C"]}  # hash=False: compare it too


def test_env_configuration_is_the_sdks(recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"{recorder.url}/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    recorder.reply(reply("chat"))
    with OpenAIClient("m", api="chat") as client:
        client.chat(HELLO)
    assert recorder.requests[0].path == "/v1/chat/completions"
    assert recorder.requests[0].headers["authorization"] == "Bearer sk-env"


def test_a_client_you_pass_is_used_as_it_is_and_left_open(recorder: Recorder) -> None:
    sdk = openai.OpenAI(
        base_url=f"{recorder.url}/v1", api_key="sk-own", max_retries=0, default_headers={"x-team": "a"}
    )
    recorder.reply(reply("responses"))
    with OpenAIClient("m", sdk) as client:
        assert client.client is sdk
        client.chat(HELLO)
    assert recorder.requests[0].headers["x-team"] == "a"
    assert recorder.requests[0].headers["authorization"] == "Bearer sk-own"
    assert not sdk.is_closed()  # yours to close
    sdk.close()


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_azure_openai_is_served_through_its_sdk_client(recorder: Recorder, api: str) -> None:
    azure = openai.AzureOpenAI(
        azure_endpoint=recorder.url, api_version="2024-10-21", api_key="az-key", max_retries=0
    )
    recorder.reply(reply(api))
    with OpenAIClient("my-deployment", azure, api=api) as client:
        assert client.chat(HELLO).text == "ok"
    request = recorder.requests[0]
    path = "/openai/responses" if api == "responses" else "/openai/deployments/my-deployment/chat/completions"
    assert request.path == f"{path}?api-version=2024-10-21"
    assert request.headers["api-key"] == "az-key"
    azure.close()


def test_retries_429_and_5xx_are_the_sdks(recorder: Recorder, client: OpenAIClient, api: str) -> None:
    recorder.reply({"error": {"message": "slow down"}}, status=429, headers=RETRY_NOW)
    recorder.reply({"error": {"message": "oops"}}, status=500, headers=RETRY_NOW)
    recorder.reply(raw=b"<html>bad gateway</html>", status=502, headers=RETRY_NOW)
    recorder.reply(reply(api, "finally"))

    assert client.chat(HELLO).text == "finally"
    assert len(recorder.requests) == 4
    assert recorder.bodies[0] == recorder.bodies[3]  # the same request each time
    assert [r.headers["x-stainless-retry-count"] for r in recorder.requests] == ["0", "1", "2", "3"]


def test_retries_are_bounded_and_the_last_answer_is_the_error(
    recorder: Recorder, client: OpenAIClient
) -> None:
    for _ in range(5):
        recorder.reply({"error": {"message": "overloaded"}}, status=503, headers=RETRY_NOW)

    with pytest.raises(LLMHTTPError) as info:
        client.chat(HELLO)

    assert info.value.status == 503
    assert info.value.attempts == 4  # 1 + max_retries (3)
    assert "overloaded" in str(info.value)
    assert len(recorder.requests) == 4
    assert not isinstance(info.value.__cause__, LLMHTTPError)  # the SDK's error, chained for debugging


def test_zero_retries(recorder: Recorder) -> None:
    recorder.reply(status=429, headers=RETRY_NOW)
    with (
        OpenAIClient("m", base_url=f"{recorder.url}/v1", api_key="k", max_retries=0) as client,
        pytest.raises(LLMHTTPError) as info,
    ):
        client.chat(HELLO)
    assert len(recorder.requests) == 1
    assert (info.value.status, info.value.attempts) == (429, 1)


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_fail_at_once(recorder: Recorder, client: OpenAIClient, api: str, status: int) -> None:
    recorder.reply(
        {"error": {"message": "Invalid 'input[1].content'", "type": "invalid_request_error"}}, status=status
    )

    with pytest.raises(LLMHTTPError) as info:
        client.chat(HELLO)

    assert info.value.status == status
    assert info.value.attempts == 1
    assert "Invalid 'input[1].content'" in str(info.value)
    assert info.value.url.endswith(PATHS[api])
    assert len(recorder.requests) == 1
    if status == 404 and api == "responses":  # the likely cause: a server without the Responses API
        assert "api='chat'" in str(info.value)


CHAT_MALFORMED = [
    b"{not json",
    b"",
    b"[1, 2]",
    b'{"choices": []}',
    b'{"choices": [{"index": 0}]}',
    b'{"choices": [{"message": {"role": "assistant", "content": 42}}]}',
    json.dumps(  # arguments neither a string nor an object (a string that is not JSON is kept: below)
        openai_completion(None, [{**WEATHER_CALL, "function": {"name": "f", "arguments": [1]}}])
    ).encode(),
    json.dumps(openai_completion(None, [{"type": "function", "function": {"name": "f"}}])).encode(),
]
RESPONSES_MALFORMED = [
    b"{not json",
    b"",
    b"[1, 2]",
    b'{"object": "response", "output": "all of it"}',
    json.dumps(response_body([{k: v for k, v in WEATHER_ITEM.items() if k != "call_id"}])).encode(),
    json.dumps(response_body([{"type": "reasoning", "summary": []}])).encode(),  # no id
    json.dumps(response_body([], status="failed", error={"code": "server_error", "message": "x"})).encode(),
]


@pytest.mark.parametrize(
    ("api", "raw"),
    [("chat", raw) for raw in CHAT_MALFORMED] + [("responses", raw) for raw in RESPONSES_MALFORMED],
)
def test_malformed_bodies(recorder: Recorder, client: OpenAIClient, raw: bytes) -> None:
    recorder.reply(raw=raw)
    with pytest.raises(MalformedResponse) as info:
        client.chat(HELLO)
    assert info.value.url is not None
    assert len(recorder.requests) == 1  # a malformed success is not retried


@pytest.mark.parametrize("api", ["chat"])
@pytest.mark.parametrize("written", ["{oops", "[1]"])
def test_arguments_that_are_not_a_json_object_come_back_as_written(
    recorder: Recorder, client: OpenAIClient, written: str
) -> None:
    """Once refused as malformed: now the call is read, its arguments kept as the exact string."""
    recorder.reply(
        openai_completion(None, [{**WEATHER_CALL, "function": {"name": "f", "arguments": written}}])
    )
    (call,) = client.chat(HELLO).tool_calls
    assert (call.name, call.arguments, call.invalid_arguments) == ("f", {}, written)


def test_unreachable_server_is_an_llm_error() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OpenAIClient("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=1)
    with client, pytest.raises(LLMError, match="cannot reach") as info:
        client.chat(HELLO)
    assert not isinstance(info.value, LLMHTTPError)


def test_a_timeout_is_an_llm_error(recorder: Recorder) -> None:
    recorder.reply(reply("responses"), delay=1.0)
    with (
        OpenAIClient("m", base_url=f"{recorder.url}/v1", api_key="k", max_retries=0, timeout=0.2) as client,
        pytest.raises(LLMError, match="APITimeoutError"),
    ):
        client.chat(HELLO)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("",), {"api_key": "k"}, "model must be"),
        (("m",), {"api": "completions", "api_key": "k"}, "api must be"),
        (("m", object()), {}, "not an OpenAI SDK client"),
        (("m", "sdk"), {"api_key": "k"}, "got a client and the keyword arguments"),
        (("m",), {"api_key": "k", "backoff": 0.5}, "could not make its openai client"),  # not the SDK's
    ],
)
def test_bad_settings(args: tuple[object, ...], kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        OpenAIClient(*args, **kwargs)  # type: ignore[arg-type]


def test_no_key_is_the_sdks_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(InvalidInput, match="api_key"):
        OpenAIClient("m", base_url="http://127.0.0.1:9/v1")


def test_bad_messages_and_streaming(recorder: Recorder, client: OpenAIClient) -> None:
    with pytest.raises(InvalidInput, match=r"messages\[1\] must be a tractkv Message"):
        client.chat([*HELLO, "not a message"])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match="sequence of Message"):
        client.chat("hi")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="role 'developer'"):
        client.chat([*HELLO, Message(role="developer", content="x")])
    with pytest.raises(InvalidInput, match="without the tool_call_id"):
        client.chat([*HELLO, Message(role="tool", content="42")])
    assert recorder.requests == []
    with pytest.raises(InvalidInput, match="streaming"):
        client.chat(HELLO, stream=True)


def test_an_async_sdk_client_serves_only_the_async_calls(recorder: Recorder) -> None:
    sdk = openai.AsyncOpenAI(base_url=f"{recorder.url}/v1", api_key="k", max_retries=0)
    client = OpenAIClient("m", sdk)
    with pytest.raises(InvalidInput, match="wraps an async SDK client"):
        client.chat(HELLO)
    assert recorder.requests == []


def test_generate_commits_the_reply(recorder: Recorder, client: OpenAIClient, api: str) -> None:
    """End to end: Tract.generate sends the compiled context and commits the parsed tool calls."""
    if api == "chat":
        recorder.reply(openai_completion(None, [WEATHER_CALL], model="gpt-test-0613"))
    else:
        recorder.reply(response_body([WEATHER_ITEM], model="gpt-test-0613"))
    with Tract.open() as t:
        t.system("Be brief.")
        t.user("Weather in Oslo?", tools=[WEATHER_OPENAI])
        info = t.generate(client, temperature=0)
        ctx = t.compile()

    body = recorder.requests[0].body
    if api == "chat":
        assert body["messages"] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Oslo?"},
        ]
        assert body["tools"] == [WEATHER_OPENAI]
    else:
        assert (body["instructions"], body["input"]) == (
            "Be brief.",
            [{"role": "user", "content": "Weather in Oslo?"}],
        )
        assert body["tools"] == [WEATHER_RESPONSES]
    assert body["temperature"] == 0
    assert ctx.messages[-1].tool_calls == (
        ToolCall(id="call_7", name="get_weather", arguments={"city": "Oslo", "units": ["C"]}),
    )
    assert ctx.messages[-1].tool_calls[0].arguments == {"city": "Oslo", "units": ["C"]}
    assert info.generation_config is not None
    assert info.generation_config["temperature"] == 0
    assert info.generation_config["model"] == "gpt-test-0613"


def test_async_with_closes_the_async_client_made_on_first_use(recorder: Recorder) -> None:
    import asyncio

    recorder.reply(reply("responses"))

    async def main() -> OpenAIClient:
        async with OpenAIClient("gpt-test", base_url=f"{recorder.url}/v1", api_key="k") as client:
            await client.achat(HELLO)
            assert client._async is not None
            assert not client._async.is_closed()
        return client

    client = asyncio.run(main())
    assert client._async is not None
    assert client._async.is_closed()
    assert client._sync is not None
    assert client._sync.is_closed()
