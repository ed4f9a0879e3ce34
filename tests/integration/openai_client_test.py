"""openai_client_test.py: the official OpenAI Python client against `troupe serve` with the
bundled model: completions, chat completions, streaming; greedy text equals
`troupe generate --json`; structured output (the client's parse() with a pydantic model,
json_object streamed, unsupported schema keywords refused); tools (a named function and
"required", parsed and streamed by the client); the Responses API (create, stream, parse into a pydantic model, a
function call the client parses, previous_response_id, retrieve and delete); the official Anthropic client against
/v1/messages (create, stream, a forced tool, count_tokens, errors as its exceptions); SIGTERM drains and exits 0; a stream whose steps
come slower than --sse-keepalive carries ": keep-alive" comment lines, which the client skips.

Usage: python openai_client_test.py PATH/TO/troupe
"""
import json
import subprocess
import sys
import unittest
import urllib.request
from typing import Annotated, List, Literal, Optional, Union

import anthropic
import openai
import pydantic

from serve_util import Server

TROUPE = sys.argv.pop(1)


class OpenAIClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(TROUPE)
        cls.client = openai.OpenAI(base_url=cls.server.url + "/v1", api_key="unused")

    @classmethod
    def tearDownClass(cls):
        rc = cls.server.stop()
        assert rc == 0, f"serve exited {rc}"

    def reference(self, prompt, n):
        out = subprocess.run([TROUPE, "generate", "--json", "-n", str(n), prompt], capture_output=True, text=True,
                             check=True)
        return json.loads(out.stdout)["text"]

    def test_models(self):
        ids = [m.id for m in self.client.models.list().data]
        self.assertEqual(ids, ["stories"])

    def test_completion_matches_generate(self):
        r = self.client.completions.create(model="stories", prompt="Once upon a time", max_tokens=24, temperature=0)
        self.assertEqual(r.choices[0].text, self.reference("Once upon a time", 24))
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 24)
        self.assertEqual(r.usage.prompt_tokens, 5)

    def test_streaming_completion(self):
        stream = self.client.completions.create(model="stories", prompt="The little dog", max_tokens=20,
                                                temperature=0, stream=True)
        text, finish = "", None
        for chunk in stream:
            text += chunk.choices[0].text
            finish = chunk.choices[0].finish_reason or finish
        self.assertEqual(text, self.reference("The little dog", 20))
        self.assertEqual(finish, "length")

    def test_chat_and_chat_stream(self):
        msgs = [{"role": "system", "content": "You tell stories."}, {"role": "user", "content": "A story about a cat"}]
        r = self.client.chat.completions.create(model="stories", messages=msgs, max_tokens=16, temperature=0)
        full = r.choices[0].message.content
        self.assertEqual(r.choices[0].message.role, "assistant")
        self.assertTrue(len(full) > 0)
        stream = self.client.chat.completions.create(model="stories", messages=msgs, max_tokens=16, temperature=0,
                                                     stream=True)
        parts = [c.choices[0].delta.content or "" for c in stream if c.choices]
        self.assertEqual("".join(parts), full)

    def test_sampling_seed_repeats(self):
        a = self.client.completions.create(model="stories", prompt="Lily", max_tokens=16, temperature=1.5, seed=7)
        b = self.client.completions.create(model="stories", prompt="Lily", max_tokens=16, temperature=1.5, seed=7)
        self.assertEqual(a.choices[0].text, b.choices[0].text)

    def test_stop_and_n(self):
        r = self.client.completions.create(model="stories", prompt="Once upon a time", max_tokens=30, temperature=0,
                                           stop=["girl"])
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertNotIn("girl", r.choices[0].text)
        r = self.client.completions.create(model="stories", prompt="Once upon a time", max_tokens=8, n=3,
                                           temperature=2.0, seed=1)
        self.assertEqual(sorted(c.index for c in r.choices), [0, 1, 2])

    def test_echo_logprobs_and_extension_fields(self):
        r = self.client.completions.create(model="stories", prompt="Once upon a time", max_tokens=4, temperature=0,
                                           echo=True, logprobs=1, user="u", extra_body={"min_tokens": 4})
        c = r.choices[0]
        self.assertTrue(c.text.startswith("Once upon a time"))
        self.assertEqual("".join(c.logprobs.tokens), c.text)
        self.assertIsNone(c.logprobs.token_logprobs[0])
        self.assertEqual(len(c.logprobs.tokens), r.usage.prompt_tokens + r.usage.completion_tokens)
        chat = self.client.chat.completions.create(
            model="stories", max_tokens=6, temperature=0, logprobs=True, top_logprobs=2, store=False,
            metadata={"k": "v"}, service_tier="auto", parallel_tool_calls=False,
            messages=[{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
            stream=True, stream_options={"include_usage": True})
        parts, usage = [], None
        for chunk in chat:
            if chunk.usage:
                usage = chunk.usage
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
        self.assertGreater(len(parts), 0)
        self.assertEqual(usage.completion_tokens, 6)

    def test_a_named_or_required_tool_is_a_call_the_client_parses(self):
        # the client's strict function tool from a pydantic model; the bundled model's template
        # takes no tools, so tool_choice auto is refused, a named function or "required" holds
        # the reply to the call's JSON
        class GetTime(pydantic.BaseModel):
            zone: Literal["UTC", "CET"]

        tool = openai.pydantic_function_tool(GetTime)
        msgs = [{"role": "user", "content": "What time is it?"}]
        r = self.client.chat.completions.parse(model="stories", messages=msgs, tools=[tool], max_tokens=96,
                                               tool_choice={"type": "function", "function": {"name": "GetTime"}},
                                               temperature=1.0, seed=1)
        self.assertEqual(r.choices[0].finish_reason, "stop")
        call = r.choices[0].message.tool_calls[0]
        self.assertTrue(call.id.startswith("call_"))
        self.assertEqual(call.function.name, "GetTime")
        self.assertIsInstance(call.function.parsed_arguments, GetTime)
        with self.client.chat.completions.stream(model="stories", messages=msgs, tools=[tool], max_tokens=96,
                                                 tool_choice="required", parallel_tool_calls=False,
                                                 temperature=1.0, seed=2) as stream:
            kinds = [event.type for event in stream]
            final = stream.get_final_completion()
        # the call comes in a chunk before the finish, so the client closes its arguments
        self.assertIn("tool_calls.function.arguments.done", kinds)
        self.assertEqual(final.choices[0].finish_reason, "tool_calls")
        [call] = final.choices[0].message.tool_calls
        self.assertIsInstance(call.function.parsed_arguments, GetTime)
        with self.assertRaises(openai.BadRequestError):
            self.client.chat.completions.create(model="stories", messages=msgs, tools=[tool], max_tokens=8)

    def test_structured_output_parses_into_the_pydantic_model(self):
        # the client's own strict schema ($defs, $ref, enum, anyOf string | null, maxLength,
        # maxItems, additionalProperties false); pydantic validates what comes back
        class Pet(pydantic.BaseModel):
            kind: Literal["cat", "dog"]
            name: str = pydantic.Field(max_length=6)

        class Person(pydantic.BaseModel):
            name: str = pydantic.Field(max_length=8)
            age: int
            pets: List[Pet] = pydantic.Field(max_length=2)
            email: Optional[str] = pydantic.Field(max_length=8)

        msgs = [{"role": "user", "content": "Describe a person"}]
        for seed in range(3):
            r = self.client.chat.completions.parse(model="stories", messages=msgs, response_format=Person,
                                                   max_tokens=96, temperature=1.0, seed=seed)
            self.assertEqual(r.choices[0].finish_reason, "stop")
            person = r.choices[0].message.parsed
            self.assertIsInstance(person, Person)
            self.assertLessEqual(len(person.pets), 2)
        # unions: plain Union[Cat, Dog] (anyOf of two objects) and a discriminated one (oneOf
        # with OpenAPI's discriminator), each reply one of the models, never a mix
        class Cat(pydantic.BaseModel):
            kind: Literal["cat"]
            meows: bool

        class Dog(pydantic.BaseModel):
            kind: Literal["dog"]
            barks: int

        class Owner(pydantic.BaseModel):
            pet: Union[Cat, Dog]
            other: Annotated[Union[Cat, Dog], pydantic.Field(discriminator="kind")]

        parsed = 0
        for seed in range(4):
            try:
                r = self.client.chat.completions.parse(model="stories", messages=msgs, response_format=Owner,
                                                       max_tokens=100, temperature=1.0, seed=seed)
            except openai.LengthFinishReasonError:  # out of tokens: a cut document, no error
                continue
            self.assertEqual(r.choices[0].finish_reason, "stop")
            owner = r.choices[0].message.parsed
            self.assertIsInstance(owner.pet, (Cat, Dog))
            self.assertIsInstance(owner.other, (Cat, Dog))
            parsed += 1
        self.assertGreater(parsed, 0)
        # json_object, streamed: the chunks join into one JSON object
        stream = self.client.chat.completions.create(model="stories", messages=msgs, max_tokens=96, temperature=0.7,
                                                     seed=1, stream=True, response_format={"type": "json_object"})
        chunks = [c for c in stream if c.choices]
        text = "".join(c.choices[0].delta.content or "" for c in chunks)
        if chunks[-1].choices[0].finish_reason == "stop":
            self.assertIsInstance(json.loads(text), dict)
        else:  # out of tokens inside a string: still a prefix of JSON, never anything else
            self.assertEqual(chunks[-1].choices[0].finish_reason, "length")
            self.assertTrue(text.lstrip().startswith("{"), text)
        # a keyword it cannot hold to is a 400 naming it
        with self.assertRaises(openai.BadRequestError) as ctx:
            self.client.chat.completions.create(
                model="stories", messages=msgs, max_tokens=8,
                response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {
                    "type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}}})
        self.assertIn("pattern", str(ctx.exception))

    def test_responses_api(self):
        # the same reply as the chat endpoint gives to the same messages
        msgs = [{"role": "system", "content": "You tell stories."}, {"role": "user", "content": "A story about a cat"}]
        chat = self.client.chat.completions.create(model="stories", messages=msgs, max_tokens=16, temperature=0)
        r = self.client.responses.create(model="stories", instructions="You tell stories.",
                                         input="A story about a cat", max_output_tokens=16, temperature=0)
        self.assertEqual(r.output_text, chat.choices[0].message.content)
        self.assertEqual(r.status, "incomplete")
        self.assertEqual(r.incomplete_details.reason, "max_output_tokens")
        self.assertEqual(r.usage.output_tokens, 16)
        self.assertEqual(r.usage.input_tokens, chat.usage.prompt_tokens)
        # streamed: the client's own event stream; the deltas join into the same text
        with self.client.responses.stream(model="stories", instructions="You tell stories.",
                                          input="A story about a cat", max_output_tokens=16, temperature=0) as stream:
            events = list(stream)
        self.assertEqual(events[0].type, "response.created")
        self.assertEqual(events[-1].type, "response.incomplete")
        self.assertEqual("".join(e.delta for e in events if e.type == "response.output_text.delta"), r.output_text)
        self.assertEqual(events[-1].response.output_text, r.output_text)
        # stored: continued by previous_response_id, read back, deleted
        more = self.client.responses.create(model="stories", previous_response_id=r.id, input="And then?",
                                            max_output_tokens=4, temperature=0)
        self.assertEqual(more.previous_response_id, r.id)
        self.assertGreater(more.usage.input_tokens, r.usage.input_tokens + r.usage.output_tokens)
        self.assertEqual(self.client.responses.retrieve(r.id).output_text, r.output_text)
        # its input listed back through the client's pager
        items = list(self.client.responses.input_items.list(more.id))
        self.assertEqual(len(items), 1)
        self.assertEqual(items[0].role, "user")
        self.assertEqual(items[0].content[0].text, "And then?")
        self.client.responses.delete(r.id)
        with self.assertRaises(openai.NotFoundError):
            self.client.responses.retrieve(r.id)

        # structured output into the client's pydantic model
        class Pet(pydantic.BaseModel):
            kind: Literal["cat", "dog"]
            name: str = pydantic.Field(max_length=6)

        parsed = 0
        for seed in range(3):
            p = self.client.responses.parse(model="stories", input="Describe a pet", text_format=Pet,
                                            max_output_tokens=60, extra_body={"seed": seed})
            if p.status == "completed":
                self.assertIsInstance(p.output_parsed, Pet)
                parsed += 1
        self.assertGreater(parsed, 0)

        # a named function's call, its arguments parsed by the client
        class GetTime(pydantic.BaseModel):
            zone: Literal["UTC", "CET"]

        from openai.lib._tools import pydantic_responses_function_tool
        call = self.client.responses.parse(model="stories", input="What time is it?",
                                           tools=[pydantic_responses_function_tool(GetTime)],
                                           tool_choice={"type": "function", "name": "GetTime"},
                                           max_output_tokens=96, extra_body={"seed": 1})
        [item] = call.output
        self.assertEqual(item.type, "function_call")
        self.assertIsInstance(item.parsed_arguments, GetTime)
        self.assertTrue(item.call_id.startswith("call_"))
        with self.assertRaises(openai.BadRequestError) as ctx:
            self.client.responses.create(model="stories", input="x", tools=[{"type": "web_search"}])
        self.assertIn("web_search", str(ctx.exception))

    def test_anthropic_messages(self):
        # the Anthropic client (it sends its key as x-api-key); no temperature argument in its
        # newest releases, so greedy decoding goes in the body as an extension
        client = anthropic.Anthropic(base_url=self.server.url, api_key="unused")
        greedy = {"temperature": 0}
        msgs = [{"role": "user", "content": "A story about a cat"}]
        chat = self.client.chat.completions.create(
            model="stories", max_tokens=16, temperature=0,
            messages=[{"role": "system", "content": "You tell stories."}] + msgs)
        m = client.messages.create(model="stories", max_tokens=16, system="You tell stories.", messages=msgs,
                                   extra_body=greedy)
        self.assertEqual(m.content[0].text, chat.choices[0].message.content)
        self.assertEqual(m.stop_reason, "max_tokens")
        # Anthropic's input_tokens leave out what the (prefix) cache read
        self.assertEqual(m.usage.input_tokens + m.usage.cache_read_input_tokens, chat.usage.prompt_tokens)
        with client.messages.stream(model="stories", max_tokens=16, system="You tell stories.", messages=msgs,
                                    extra_body=greedy) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        self.assertEqual(text, m.content[0].text)
        self.assertEqual(final.stop_reason, "max_tokens")
        self.assertEqual(client.messages.count_tokens(model="stories", system="You tell stories.",
                                                      messages=msgs).input_tokens, chat.usage.prompt_tokens)
        # a forced tool: one tool_use block whose input fits the schema
        tools = [{"name": "get_time", "description": "The time.",
                  "input_schema": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}},
                                   "required": ["zone"], "additionalProperties": False}}]
        used = None
        for seed in range(4):
            t = client.messages.create(model="stories", max_tokens=96, messages=[{"role": "user", "content": "Time?"}],
                                       tools=tools, tool_choice={"type": "tool", "name": "get_time"},
                                       extra_body={"seed": seed})
            if t.stop_reason == "tool_use":
                used = t.content[0]
                break
        self.assertIsNotNone(used, "every reply was cut off by max_tokens")
        self.assertEqual(used.type, "tool_use")
        self.assertIn(used.input["zone"], ("UTC", "CET"))
        with self.assertRaises(anthropic.NotFoundError):
            client.messages.create(model="nope", max_tokens=4, messages=msgs)
        with self.assertRaises(anthropic.BadRequestError) as ctx:
            client.messages.create(model="stories", max_tokens=4, messages=[
                {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "http://x/y.png"}}]}])
        self.assertIn("image", str(ctx.exception))

    def test_errors_are_openai_errors(self):
        with self.assertRaises(openai.NotFoundError):
            self.client.completions.create(model="nope", prompt="x", max_tokens=4)
        with self.assertRaises(openai.BadRequestError) as ctx:
            self.client.completions.create(model="stories", prompt="x", max_tokens=-4)
        self.assertIn("max_tokens", str(ctx.exception))


class KeepAlive(unittest.TestCase):
    def test_slow_streams_carry_comment_lines_the_client_skips(self):
        # every step 300 ms late, a keep-alive after 100 ms of silence: comments between tokens
        with Server(TROUPE, "--sse-keepalive", "0.1", "--inject",
                    "delay:from=engine,to=stage0.rank0,ms=300") as srv:
            body = json.dumps({"model": "stories", "prompt": "Once upon a time", "max_tokens": 4,
                               "temperature": 0, "stream": True, "ignore_eos": True}).encode()
            req = urllib.request.Request(srv.url + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as r:
                raw = r.read().decode()
            self.assertIn("\n: keep-alive\n\n", "\n" + raw)
            events = [json.loads(l[6:]) for l in raw.split("\n") if l.startswith("data: {")]
            self.assertEqual("".join(e["choices"][0]["text"] for e in events),
                             OpenAIClient.reference(self, "Once upon a time", 4))
            client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused")
            stream = client.completions.create(model="stories", prompt="Once upon a time", max_tokens=4,
                                               temperature=0, stream=True)
            text = "".join(chunk.choices[0].text for chunk in stream)
            self.assertEqual(text, OpenAIClient.reference(self, "Once upon a time", 4))


if __name__ == "__main__":
    unittest.main(verbosity=2)
