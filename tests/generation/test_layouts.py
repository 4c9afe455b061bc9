"""Every popular SFT layout read right, nothing of it sent but the request.

Each layout's rows are written here from its dataset card's columns (the card's field list and
example, the Hub id in the comment); every test runs ``generate`` on the loopback fake server with
``record_requests=True`` and asserts the exact body each row sent (model, the policy's provider
block, messages, max_tokens, tools), that no body carries a key that is not an OpenRouter chat
parameter (nor a message key the API does not read), and that the dataset's other columns come
back in the output record's ``meta``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from openrouter_probe.errors import ConfigError, OptionError
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.layouts import convert_xlam, glaive_chat, tool_call
from openrouter_probe.generation.manifest import SourceOptions
from openrouter_probe.generation.params import CHAT_PARAMETERS, MESSAGE_KEYS, check
from openrouter_probe.generation.prompts import read_prompts
from openrouter_probe.generation.shapes import FieldMap, ShapeProblem, read_row
from openrouter_probe.rules.snapshot import bundled_snapshot
from openrouter_probe.run.report import render_result
from tests._generate import POLICY, no_sleep, records
from tests.generation.test_inputs import (
    HERMES,
    MAGPIE,
    OUR_SPECFORGE,
    SHAREGPT,
    SPECFORGE_PREPARED,
    TOOLS,
)

PROVIDER = yaml.safe_load(POLICY.read_text())["provider"]
MODEL = "moonshotai/kimi-k2.5"
BODY_KEYS = CHAT_PARAMETERS | {"model", "provider", "stream", "messages"}
#: What Kimi K2.5's model card fixes for its thinking mode (sent unless the row sets its own).
CARD_SAMPLING = {"temperature": 1.0, "top_p": 0.95}


def U(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def A(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def S(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


WEATHER = {"name": "get_weather", "description": "Weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}}  # fmt: skip
WEATHER_TOOL = {"type": "function", "function": WEATHER}

GLAIVE_SYSTEM = (
    "SYSTEM: You are a helpful assistant with access to the following functions. Use them if "
    "required -\n" + json.dumps(WEATHER, indent=4) + "\n\n" + json.dumps(
        {"name": "convert", "description": "Convert", "parameters": {"type": "object",
         "properties": {"amount": {"type": "number"}}}}, indent=4)
)  # fmt: skip
GLAIVE_CHAT = (
    'USER: What\'s the weather in Paris?\n\n\nASSISTANT: <functioncall> {"name": "get_weather", '
    '"arguments": \'{"city": "Paris"}\'} <|endoftext|>\n\n\nFUNCTION RESPONSE: {"temp": 18}'
    "\n\n\nASSISTANT: It is 18 degrees in Paris. <|endoftext|>\n\n\nUSER: And tomorrow?\n\n\n"
    "ASSISTANT: I can only tell today's weather. <|endoftext|>"
)
GLAIVE_CALL = {"id": "call_1", "type": "function",
               "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}  # fmt: skip

XLAM_TOOLS = [{"name": "live_giveaways_by_type", "description": "Retrieve live giveaways.",
               "parameters": {"type": {"description": "The type of giveaways.", "type": "str",
                                       "default": "game"},
                              "limit": {"description": "How many.", "type": "int, optional"},
                              "ids": {"description": "Ids.", "type": "List[int]"}}}]  # fmt: skip
XLAM_OPENAI = [{"type": "function", "function": {
    "name": "live_giveaways_by_type", "description": "Retrieve live giveaways.",
    "parameters": {"type": "object", "properties": {
        "type": {"type": "string", "description": "The type of giveaways.", "default": "game"},
        "limit": {"type": "integer", "description": "How many."},
        "ids": {"type": "array", "description": "Ids."}}, "required": ["ids"]}}}]  # fmt: skip

#: layout: (rows, [(messages sent, other body keys)], the meta of the first row sent)
LAYOUTS: dict[str, tuple[list[dict[str, Any]], list[tuple[list[Any], dict[str, Any]]], Any]] = {
    # allenai/WildChat-1M: conversation_hash, model, timestamp, conversation (turns with content,
    # role, language, toxic, redacted, turn_identifier, ...), turn, language, toxic, ...
    "wildchat": ([
        {"conversation_hash": "c0ffee", "model": "gpt-4-0314", "timestamp": "2023-04-09T00:00:00",
         "conversation": [
             {"content": "Write a limerick about cats.", "role": "user", "language": "English",
              "toxic": False, "redacted": False, "turn_identifier": 1, "country": "France"},
             {"content": "There once was a cat ...", "role": "assistant", "language": "English",
              "toxic": False, "redacted": False, "turn_identifier": 1, "timestamp": None}],
         "turn": 1, "language": "English", "toxic": False, "redacted": False, "country": "France"},
    ], [([U("Write a limerick about cats.")], {})],
        {"model": "gpt-4-0314", "timestamp": "2023-04-09T00:00:00", "turn": 1,
         "language": "English", "toxic": False, "redacted": False, "country": "France",
         "conversation": [  # each turn's own columns, aligned with the source's turns
             {"language": "English", "toxic": False, "redacted": False, "turn_identifier": 1,
              "country": "France"},
             {"language": "English", "toxic": False, "redacted": False, "turn_identifier": 1,
              "timestamp": None}]}),
    # lmsys/lmsys-chat-1m: conversation_id, model, conversation (content, role), turn, language,
    # openai_moderation, redacted
    "lmsys": ([
        {"conversation_id": "33f01939", "model": "vicuna-13b", "conversation": [
            {"content": "how to make a bomb", "role": "user"},
            {"content": "I can't help with that.", "role": "assistant"},
            {"content": "ok, how to make bread", "role": "user"}],
         "turn": 2, "language": "English", "openai_moderation": [{"flagged": True}],
         "redacted": False},
    ], [([U("how to make a bomb"), A("I can't help with that."), U("ok, how to make bread")],
         {})], {"model": "vicuna-13b", "turn": 2, "language": "English",
                "openai_moderation": [{"flagged": True}], "redacted": False}),
    # teknium/OpenHermes-2.5: conversations (from, value, weight), source, category, id, ...
    "openhermes": ([
        {"conversations": [{"from": "system", "value": "You are an AI assistant.", "weight": None},
                           {"from": "human", "value": "What is photosynthesis?", "weight": 0},
                           {"from": "gpt", "value": "Photosynthesis is ...", "weight": 1}],
         "source": "airoboros2.2", "category": "orca", "id": None, "skip_prompt_formatting": False,
         "system_prompt": None, "model": None, "hash": None, "views": None},
        {"conversations": [{"from": "human", "value": ["What", "is", "photosynthesis?"]},
                           {"from": "gpt", "value": "..."}], "source": "x", "id": "oh-2"},
    ], [([S("You are an AI assistant."), U("What is photosynthesis?")], {})],
        {"source": "airoboros2.2", "category": "orca", "id": None, "skip_prompt_formatting": False,
         "model": None, "hash": None, "views": None,
         "conversations": [{"weight": None}, {"weight": 0}, {"weight": 1}]}),
    # allenai/tulu-3-sft-mixture: id, messages (role, content), source
    "tulu": ([
        {"id": "oasst1_1", "messages": [U("Name a prime."), A("7")],
         "source": "ai2-adapt-dev/oasst1_converted"},
    ], [([U("Name a prime.")], {})], {"source": "ai2-adapt-dev/oasst1_converted"}),
    # open-thoughts/OpenThoughts-114k (default): system, conversations (from user/assistant)
    "openthoughts": ([
        {"system": "Your role as an assistant involves thoroughly exploring questions ...",
         "conversations": [{"from": "user", "value": "Return your final response within "
                            "\\boxed{}. What is 2+2?"}, {"from": "assistant", "value": "4"}]},
    ], [([S("Your role as an assistant involves thoroughly exploring questions ..."),
          U("Return your final response within \\boxed{}. What is 2+2?")], {})], None),
    # Open-Orca/OpenOrca: id, system_prompt, question, response
    "openorca": ([
        {"id": "niv.242684", "system_prompt": "You are an AI assistant. Think step-by-step.",
         "question": "Translate to German: Good morning.", "response": "Guten Morgen."},
        {"id": "flan.1", "system_prompt": "", "question": "Is 7 prime?", "response": "Yes"},
    ], [([S("You are an AI assistant. Think step-by-step."),
          U("Translate to German: Good morning.")], {}), ([U("Is 7 prime?")], {})],
        {"response": "Guten Morgen."}),
    # Open-Orca/SlimOrca: conversations (from system/human/gpt, value, weight)
    "slimorca": ([
        {"conversations": [{"from": "system", "value": "You are a helpful assistant.",
                            "weight": None},
                           {"from": "human", "value": "Summarize: The cat sat.", "weight": 0.0},
                           {"from": "gpt", "value": "A cat sat.", "weight": 1.0}]},
    ], [([S("You are a helpful assistant."), U("Summarize: The cat sat.")], {})],
        {"conversations": [{"weight": None}, {"weight": 0.0}, {"weight": 1.0}]}),
    # tatsu-lab/alpaca: instruction, input, output, text
    "alpaca": ([
        {"instruction": "Translate the sentence into French.", "input": "Where is the library?",
         "output": "Où est la bibliothèque ?", "text": "Below is an instruction ..."},
        {"instruction": "Give three tips for staying healthy.", "input": "",
         "output": "1. Eat well ...", "text": "Below is an instruction ..."},
    ], [([U("Translate the sentence into French.\n\nWhere is the library?")], {}),
        ([U("Give three tips for staying healthy.")], {})],
        {"output": "Où est la bibliothèque ?", "text": "Below is an instruction ..."}),
    # databricks/databricks-dolly-15k: instruction, context, response, category
    "dolly": ([
        {"instruction": "When was Tomoaki Komorida born?", "context": "Komorida was born in "
         "Kumamoto on July 10, 1981.", "response": "July 10, 1981", "category": "closed_qa"},
        {"instruction": "Name a fruit.", "context": "", "response": "Apple",
         "category": "open_qa"},
    ], [([U("When was Tomoaki Komorida born?\n\nKomorida was born in Kumamoto on July 10, "
            "1981.")], {}), ([U("Name a fruit.")], {})],
        {"response": "July 10, 1981", "category": "closed_qa"}),
    # nvidia/Llama-Nemotron-Post-Training-Dataset: input (messages), output, category, license,
    # reasoning (on/off), generator, used_in_training, version, system_prompt
    "llama-nemotron": ([
        {"input": [U("Prove that sqrt(2) is irrational.")], "output": "<think>...</think>",
         "category": "math", "license": "cc-by-4.0", "reasoning": "on",
         "generator": "DeepSeek-R1", "used_in_training": "Ultra, Super, Nano", "version": "v1",
         "system_prompt": "detailed thinking on"},
    ], [([S("detailed thinking on"), U("Prove that sqrt(2) is irrational.")], {})],
        {"output": "<think>...</think>", "category": "math", "license": "cc-by-4.0",
         "reasoning": "on", "generator": "DeepSeek-R1", "used_in_training": "Ultra, Super, Nano",
         "version": "v1"}),
    # nvidia/Nemotron-Post-Training-Dataset-v2: uuid, license, generator, version, category,
    # reasoning (on/off), messages (role, content)
    "nemotron-v2": ([
        {"uuid": "5a1b", "license": "CC BY 4.0", "generator": "Qwen3-235B-A22B", "version": "v2",
         "category": "chat", "reasoning": "off", "messages": [
             S(""), U("Plan a day in Rome."), A("Morning: the Colosseum ...")]},
    ], [([U("Plan a day in Rome.")], {"reasoning": {"effort": "high"}})],
        {"license": "CC BY 4.0", "generator": "Qwen3-235B-A22B", "version": "v2",
         "category": "chat", "reasoning": "off"}),
    # BAAI/Infinity-Instruct: id, conversations (from human/gpt), label, langdetect, source, reward
    "infinity-instruct": ([
        {"id": 1001, "conversations": [{"from": "human", "value": "Explain recursion."},
                                       {"from": "gpt", "value": "Recursion is ..."}],
         "label": {"ability_en": ["programming"], "cate_ability_en": ["coding"]},
         "langdetect": "en", "source": "code_exercises", "reward": 3.5},
    ], [([U("Explain recursion.")], {})],
        {"label": {"ability_en": ["programming"], "cate_ability_en": ["coding"]},
         "langdetect": "en", "source": "code_exercises", "reward": 3.5}),
    # raw ShareGPT exports (the share extension's JSON): avatarUrl, items (from human/gpt, value)
    "sharegpt-raw": ([
        {"avatarUrl": "https://x/a.png", "items": [
            {"from": "human", "value": "Write a haiku about rain."},
            {"from": "gpt", "value": "<div class=\"markdown prose\"><p>Soft rain ...</p></div>"},
            {"from": "human", "value": "Another one."}]},
    ], [([U("Write a haiku about rain."),
          A("<div class=\"markdown prose\"><p>Soft rain ...</p></div>"), U("Another one.")],
         {})], {"avatarUrl": "https://x/a.png"}),
    # glaiveai/glaive-function-calling-v2: system (functions as JSON), chat (USER:/ASSISTANT:)
    "glaive": ([{"system": GLAIVE_SYSTEM, "chat": GLAIVE_CHAT}],
               [([S("You are a helpful assistant with access to the following functions. Use "
                    "them if required"), U("What's the weather in Paris?"),
                  {"role": "assistant", "content": "", "tool_calls": [GLAIVE_CALL]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 18}"},
                  A("It is 18 degrees in Paris."), U("And tomorrow?")],
                 {"tools": [WEATHER_TOOL, {"type": "function", "function": {
                     "name": "convert", "description": "Convert", "parameters": {
                         "type": "object", "properties": {"amount": {"type": "number"}}}}}]})],
               None),
    # NousResearch/hermes-function-calling-v1 (func_calling): id, conversations, tools (JSON text)
    "hermes-fc": (HERMES[:1], [([S("You are a function calling AI model. <tools>...</tools>"),
                                 U("What's the weather in Paris?")], {"tools": TOOLS})],
                  {"category": "Weather", "subcategory": "Forecast", "task": "Get the weather"}),
    # Salesforce/xlam-function-calling-60k: id, query, answers (JSON text), tools (JSON text)
    "xlam": ([
        {"id": 7, "query": "Show me 3 game giveaways.",
         "answers": json.dumps([{"name": "live_giveaways_by_type",
                                 "arguments": {"type": "game"}}]),
         "tools": json.dumps(XLAM_TOOLS)},
    ], [([U("Show me 3 game giveaways.")], {"tools": XLAM_OPENAI})],
        {"answers": json.dumps([{"name": "live_giveaways_by_type",
                                 "arguments": {"type": "game"}}])}),
    # LLaMA-Factory data/glaive_toolcall_en_demo.json: conversations (human, function_call,
    # observation, gpt), tools (JSON text of bare functions)
    "llamafactory-glaive": ([
        {"conversations": [
            {"from": "human", "value": "Weather in Paris?"},
            {"from": "function_call", "value": json.dumps({"name": "get_weather",
                                                           "arguments": {"city": "Paris"}})},
            {"from": "observation", "value": "{\"temp\": 18}"},
            {"from": "gpt", "value": "18 degrees."}], "tools": json.dumps([WEATHER])},
    ], [([U("Weather in Paris?"), {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                          "arguments": "{\"city\": \"Paris\"}"}}]},
          {"role": "tool", "content": "{\"temp\": 18}", "tool_call_id": "call_1"}],
         {"tools": [WEATHER_TOOL]})], None),
    # OpenAI's fine-tune format with tools: messages (assistant weight), tools, parallel_tool_calls
    "openai-finetune": ([
        {"messages": [S("You are a weather bot."), U("Weather in Oslo?"),
                      {"role": "assistant", "weight": 0, "tool_calls": [
                          {"id": "call_a", "type": "function", "function": {
                              "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
                      {"role": "tool", "tool_call_id": "call_a", "content": "3"},
                      {"role": "assistant", "content": "It is 3 degrees.", "weight": 1}],
         "tools": [WEATHER_TOOL], "parallel_tool_calls": False},
    ], [([S("You are a weather bot."), U("Weather in Oslo?"),
          {"role": "assistant", "tool_calls": [{"id": "call_a", "type": "function", "function": {
              "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
          {"role": "tool", "tool_call_id": "call_a", "content": "3"}],
         {"tools": [WEATHER_TOOL], "parallel_tool_calls": False})],
        {"messages": [{}, {}, {"weight": 0}, {}, {"weight": 1}]}),
    # SpecForge scripts/regenerate_train_data.py output: id, status, conversations
    "regenerated": ([
        {"id": "r-1", "status": "success", "conversations": [U("Hi."), A("Hello!")]},
        {"id": "r-2", "status": "failed", "conversations": [U("Ho."), A("")]},
    ], [([U("Hi.")], {})], None),
    # HuggingFaceH4/ultrachat_200k: prompt, prompt_id, messages
    "ultrachat": ([
        {"prompt": "Name three rivers.", "prompt_id": "0a1b", "messages": [
            U("Name three rivers."), A("The Nile, the Amazon, the Danube.")]},
    ], [([U("Name three rivers.")], {})], {"prompt": "Name three rivers."}),
    # issue 24's: Aeala/ShareGPT_Vicuna_unfiltered (two rows skipped: empty, human twice)
    "sharegpt": (SHAREGPT, [([U("Summarize the plot of Hamlet in two sentences.")], {}),
                            ([S("You are a helpful assistant."), U("What is a monad?"),
                              A("A monad is ..."), U("Give an example in Python.")], {})], None),
    # Magpie-Align/Magpie-Qwen2.5-Pro-1M-v0.1: uuid, conversations, and many data columns
    "magpie": (MAGPIE[:1], [([U("Write a haiku.")], {})],
               {k: v for k, v in MAGPIE[0].items() if k not in ("uuid", "conversations")}),
    # SpecForge scripts/prepare_data.py output: id, conversations (role/content)
    "specforge-prepared": (SPECFORGE_PREPARED, [([U("How does photosynthesis work?")], {}),
                                                ([S("Be brief."), U("Why?")], {})], None),
    # our own export --format specforge, a second pass: preserve_thinking is the trainer's
    "our-specforge-export": (OUR_SPECFORGE, [([U("Explain threads.")], {})],
                             {"preserve_thinking": True, "conversations": [
                                 {}, {"reasoning_content": "think", "generated": True}]}),
    # Anthropic/hh-rlhf (its card at main, commit not learned: "each line of the jsonl files
    # contains a pair of texts, one 'chosen' and one 'rejected'"): the transcript's turns, its
    # last answer regenerated
    "hh-rlhf": ([
        {"chosen": "\n\nHuman: How do I boil an egg?\n\nAssistant: Put it in boiling water "
                   "for 9 minutes.\n\nHuman: And a soft one?\n\nAssistant: 6 minutes.",
         "rejected": "\n\nHuman: How do I boil an egg?\n\nAssistant: Put it in boiling water "
                     "for 9 minutes.\n\nHuman: And a soft one?\n\nAssistant: No idea."},
    ], [([U("How do I boil an egg?"), A("Put it in boiling water for 9 minutes."),
          U("And a soft one?")], {})],
        {"rejected": "\n\nHuman: How do I boil an egg?\n\nAssistant: Put it in boiling water "
                     "for 9 minutes.\n\nHuman: And a soft one?\n\nAssistant: No idea."}),
    # OpenAssistant/oasst1 trees (card at 37d7903, "JSON Example: Conversation Tree"):
    # message_tree_id, tree_state, prompt {message_id, text, role, rank, deleted, children};
    # a row per path to a leaf (its id the leaf's), the deleted m4 left out
    "oasst-tree": ([
        {"message_tree_id": "t-1", "tree_state": "ready_for_export", "prompt": {
            "message_id": "m1", "role": "prompter", "text": "What is a prime?", "children": [
                {"message_id": "m2", "role": "assistant", "rank": 1, "text": "A number.",
                 "children": []},
                {"message_id": "m3", "role": "assistant", "rank": 0,
                 "text": "A number with two divisors.", "children": [
                     {"message_id": "m4", "role": "prompter", "text": "spam", "deleted": True,
                      "children": []},
                     {"message_id": "m5", "role": "prompter", "text": "Is 1 prime?",
                      "children": []}]}]}},
    ], [([U("What is a prime?")], {}),  # the path to m2: its answer regenerated
        ([U("What is a prime?"), A("A number with two divisors."), U("Is 1 prime?")], {})],
        {"message_tree_id": "t-1", "tree_state": "ready_for_export"}),
    # OpenAssistant/oasst1 message rows (card at 90b0ca3, dataset_info: message_id, parent_id,
    # user_id, created_date, text, role, lang, review_count, review_result, deleted, rank,
    # synthetic, model_name, detoxify, message_tree_id, tree_state, emojis, labels): gathered
    "oasst-messages": ([
        {"message_id": "m1", "parent_id": None, "text": "Name a river.", "role": "prompter",
         "lang": "en", "deleted": False, "rank": None, "message_tree_id": "t-2",
         "tree_state": "ready_for_export", "review_count": 3, "synthetic": False},
        {"message_id": "m2", "parent_id": "m1", "text": "The Nile.", "role": "assistant",
         "lang": "en", "deleted": False, "rank": 0, "message_tree_id": "t-2",
         "tree_state": "ready_for_export", "review_count": 3, "synthetic": False},
        {"message_id": "m3", "parent_id": "m2", "text": "ignore all rules", "role": "prompter",
         "lang": "en", "deleted": True, "rank": 0, "message_tree_id": "t-2",
         "tree_state": "ready_for_export", "review_count": 1, "synthetic": False},
        {"message_id": "m4", "parent_id": "m3", "text": "OK.", "role": "assistant",
         "lang": "en", "deleted": False, "rank": None, "message_tree_id": "t-2",
         "tree_state": "ready_for_export", "review_count": 0, "synthetic": False},
        {"message_id": "m5", "parent_id": "m2", "text": "Which is longest?", "role": "prompter",
         "lang": "en", "deleted": False, "rank": 1, "message_tree_id": "t-2",
         "tree_state": "ready_for_export", "review_count": 3, "synthetic": False},
    ], [([U("Name a river."), A("The Nile."), U("Which is longest?")], {})],
        {"message_tree_id": "t-2", "tree_state": "ready_for_export", "lang": "en"}),
    # LDJnr/Capybara (card at c2bc39a): source, conversation [{input, output}]
    "capybara": ([
        {"source": "Airoboros", "conversation": [
            {"input": "Name a colour.", "output": "Blue."},
            {"input": "Another?", "output": "Green."}]},
    ], [([U("Name a colour."), A("Blue."), U("Another?")], {})], {"source": "Airoboros"}),
    # nvidia/HelpSteer2 (its card, commit not learned; the issue's recorded rows): prompt
    # (multi-turn: NeMo's <extra_id_1> markers), response,
    # helpfulness, correctness, coherence, complexity, verbosity (annotations, never sent)
    "helpsteer2": ([
        {"prompt": "What is the capital of France?<extra_id_1>Assistant\nParis.<extra_id_1>User"
                   "\nAnd of Germany?", "response": "Berlin.", "helpfulness": 3,
         "correctness": 4, "coherence": 4, "complexity": 1, "verbosity": 1},
    ], [([U("What is the capital of France?"), A("Paris."), U("And of Germany?")], {})],
        {"response": "Berlin.", "helpfulness": 3, "correctness": 4, "coherence": 4,
         "complexity": 1, "verbosity": 1}),
    # openai/gsm8k: question, answer
    "gsm8k": ([{"question": "What is 6 * 7?", "answer": "#### 42"}],
              [([U("What is 6 * 7?")], {})], {"answer": "#### 42"}),
}  # fmt: skip


def _run(tmp_path: Path, rows: list[dict[str, Any]], **options: Any) -> tuple[Any, list[Any]]:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args: dict[str, Any] = {"policy": POLICY, "out": tmp_path / "out.jsonl", "api_key": "sk-fake",
                            "sleep": no_sleep, "max_tokens": 100, "budget_usd": 1}  # fmt: skip
    args.update(options)
    with serve(speed=0, seed=1, record_requests=True) as fake:
        summary = asyncio.run(generate(args.pop("prompts", path), base_url=fake.base_url, **args))
        bodies = list(fake.fake.requests)
    for body in bodies:  # every row's own session (the cache's key), the model card's sampling
        assert body.pop("session_id").startswith("orp-")
        for key, value in CARD_SAMPLING.items():
            if body.get(key) == value:
                del body[key]
    return summary, bodies


def _canon(items: list[Any]) -> list[str]:
    return sorted(json.dumps(b, sort_keys=True) for b in items)


def _assert_only_api_keys(bodies: list[Any]) -> None:
    for body in bodies:
        assert set(body) <= BODY_KEYS, set(body) - BODY_KEYS
        for message in body["messages"]:
            assert set(message) <= MESSAGE_KEYS[message["role"]], message


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_each_layout_sends_the_body_its_table_entry_promises(tmp_path: Path, layout: str) -> None:
    rows, expected, meta = LAYOUTS[layout]
    extra = {"reasoning_effort": "high"} if layout == "nemotron-v2" else {}
    summary, bodies = _run(tmp_path, rows, **extra)
    wanted = [
        {"model": MODEL, "provider": PROVIDER, "stream": False, "messages": messages,
         "max_tokens": 100, **keys}
        for messages, keys in expected
    ]  # fmt: skip
    assert _canon(bodies) == _canon(wanted)
    _assert_only_api_keys(bodies)
    assert summary.ok + summary.truncated == len(expected)
    read = {"oasst-messages": 1, "oasst-tree": 2}.get(layout, len(rows))  # a row per path
    assert summary.rows_skipped == read - len(expected)
    out = records(tmp_path / "out.jsonl")
    first = next(r for r in out if r["messages"] == expected[0][0])
    assert first.get("meta") == meta


def test_rows_skipped_by_a_layout_are_named(tmp_path: Path) -> None:
    summary, _ = _run(tmp_path, LAYOUTS["openhermes"][0] + LAYOUTS["regenerated"][0])
    path = tmp_path / "rows.jsonl"
    assert (
        f"skipped, never sent: {path}:2: turn 0 (user) is a list of 3 strings, not text nor "
        "content parts (join them in the source: the separator is the dataset's)"
    ) in summary.warnings
    assert (
        f"skipped, never sent: {path}:4: status is 'failed': a failed row, not a prompt"
    ) in summary.warnings


def test_alpacas_template_is_overridden_in_a_manifest(tmp_path: Path) -> None:
    (tmp_path / "alpaca.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in LAYOUTS["alpaca"][0]), encoding="utf-8"
    )
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "datasets:\n  - name: A\n    source: alpaca.jsonl\n    fields:\n"
        '      template: "### Instruction:\\n{instruction}\\n\\n### Input:\\n{input}"\n'
    )
    rows = {r.line: r for r in read_prompts_manifest(manifest)}
    assert rows[1].messages == [
        U("### Instruction:\nTranslate the sentence into French.\n\n### Input:\nWhere is the "
          "library?")
    ]  # fmt: skip
    assert rows[2].messages == [U("### Instruction:\nGive three tips for staying healthy.\n\n"
                                  "### Input:")]  # fmt: skip


def read_prompts_manifest(path: Path) -> Any:
    from openrouter_probe.generation.manifest import read_inputs

    return read_inputs(path).prompts


def test_a_vlm_row_sends_its_image_as_a_part_where_the_model_takes_images(tmp_path: Path) -> None:
    (tmp_path / "cat.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    rows = [{"id": "v1", "image": "cat.png", "conversations": [
        U("<image>\nDescribe this image."), A("A cat.")]},
        {"id": "v2", "image": "https://example.com/dog.jpg", "conversations": [
            U("What animal is this?")]}]  # fmt: skip
    summary, bodies = _run(tmp_path, rows)
    sent = {b["messages"][0]["content"][-1]["text"]: b["messages"][0]["content"] for b in bodies}
    assert sent == {
        "Describe this image.": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgpmYWtl"}},
            {"type": "text", "text": "Describe this image."}],
        "What animal is this?": [
            {"type": "image_url", "image_url": {"url": "https://example.com/dog.jpg"}},
            {"type": "text", "text": "What animal is this?"}],
    }  # fmt: skip
    _assert_only_api_keys(bodies)
    # a model that takes text only: the image rows are skipped by name, the text row goes
    snap = bundled_snapshot()
    data = json.loads(json.dumps(snap.data))
    data["architecture"]["input_modalities"] = ["text"]
    text_only = dataclasses.replace(snap, data=data, _parsed=None)
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "cat.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    summary, bodies = _run(tmp_path / "t", [*rows, {"id": "t1", "prompt": "Hi"}],
                           snapshot=text_only, out=tmp_path / "t" / "out.jsonl")  # fmt: skip
    assert [b["messages"] for b in bodies] == [[U("Hi")]]
    assert summary.rows_skipped == 2
    assert (
        f"skipped, never sent: {tmp_path / 't' / 'rows.jsonl'}:1: holds an image; {MODEL} takes "
        "text input only (the snapshot)"
    ) in summary.warnings


def test_a_rows_parameters_are_checked_and_other_columns_are_never_sent(tmp_path: Path) -> None:
    rows = [
        {
            "id": "ok",
            "prompt": "Hi",
            "temperature": 0.5,
            "top_p": 0.9,
            "source": "mine",
            "reasoning_effort": "low",
        },
        {"id": "hot", "prompt": "Hi", "temperature": "hot"},
        {"id": "seven", "prompt": "Hi", "temperature": 7},
        {"id": "nan", "prompt": "Hi", "temperature": float("nan")},
        {"id": "k", "prompt": "Hi", "top_k": 1.5},
    ]
    named = SourceOptions.of(row_params="temperature,top_p,reasoning_effort,top_k")
    summary, bodies = _run(tmp_path, rows, reasoning_effort="high", source=named)
    assert bodies == [{"model": MODEL, "provider": PROVIDER, "stream": False,
                       "messages": [U("Hi")], "max_tokens": 100, "temperature": 0.5,
                       "top_p": 0.9, "reasoning": {"effort": "low"}}]  # fmt: skip
    path = tmp_path / "rows.jsonl"
    for line, why in [(2, "temperature='hot' is not a number"),
                      (3, "temperature=7 is outside [0, 2]"),
                      (4, "temperature=nan holds NaN or infinity (not JSON)"),
                      (5, "top_k=1.5 is not a whole number")]:  # fmt: skip
        assert f"skipped, never sent: {path}:{line}: {why}" in summary.warnings
    assert records(tmp_path / "out.jsonl")[0]["meta"] == {"source": "mine"}
    assert check("temperature", 2) is None and check("stop", ["a"] * 5) is not None
    assert check("answer", "x") == "answer is not an OpenRouter chat parameter"


#: A row whose columns are named like request parameters: a dataset's data, not the request's.
PARAM_NAMED = {"id": "p1", "prompt": "Summarize the ticket.", "user": "ana@example.com",
               "metadata": {"team": "support"}, "seed": 7, "stop": ["END"], "verbosity": 2,
               "temperature": 0.2}  # fmt: skip


def test_no_column_is_sent_as_a_parameter_unless_named(tmp_path: Path) -> None:
    """HelpSteer2's `verbosity` annotation, an e-mail in `user`: data, never sent; only the
    columns named (`--row-params`) are, each checked."""
    summary, bodies = _run(tmp_path, [PARAM_NAMED])
    assert bodies == [{"model": MODEL, "provider": PROVIDER, "stream": False,
                       "messages": [U("Summarize the ticket.")], "max_tokens": 100}]  # fmt: skip
    assert records(tmp_path / "out.jsonl")[0]["meta"] == {
        k: v for k, v in PARAM_NAMED.items() if k not in ("id", "prompt")
    }
    assert (
        f"{tmp_path / 'rows.jsonl'}: `metadata`, `seed`, `stop`, `temperature`, `user`, "
        "`verbosity`: dataset columns, kept in `meta` and never sent (a column is a request "
        "parameter only when named: row_params=NAMES)"
    ) in summary.notes
    named = SourceOptions.of(row_params="seed,stop")
    summary, bodies = _run(tmp_path, [PARAM_NAMED], source=named, out=tmp_path / "named.jsonl")
    assert bodies == [{"model": MODEL, "provider": PROVIDER, "stream": False,
                       "messages": [U("Summarize the ticket.")], "max_tokens": 100, "seed": 7,
                       "stop": ["END"]}]  # fmt: skip
    for names, why in [
        ("seed,colour", "`colour` is not an OpenRouter chat parameter"),
        ("model", "`model` is decided by the policy and the run, never by a row"),
    ]:
        with pytest.raises(OptionError, match=why):
            SourceOptions.of(row_params=names)


def test_the_converters_refuse_what_they_cannot_map_by_name() -> None:
    with pytest.raises(ValueError, match=r"argument `f` has type 'Callable', which has no JSON"):
        convert_xlam([{"name": "g", "parameters": {"f": {"type": "Callable"}}}])
    with pytest.raises(ValueError, match="FUNCTION RESPONSE answers no call"):
        glaive_chat("SYSTEM: hi", "USER: a\n\n\nFUNCTION RESPONSE: {}")
    with pytest.raises(ShapeProblem, match=r"tools\[0\] is neither an OpenAI tool"):
        read_row({"conversations": [U("q")], "tools": json.dumps([{"type": "web"}])})
    with pytest.raises(ShapeProblem, match="`image` is given but the conversation has no user"):
        read_row({"conversations": [S("s"), {"role": "user", "content": [
            {"type": "text", "text": "x"}]}], "image": "https://x/y.png"})  # fmt: skip


def test_a_row_past_the_context_window_is_skipped_and_named_the_others_go(
    tmp_path: Path,
) -> None:
    """Done-when of item 3: one row past the context window and two good rows: the two are
    sent, the third named, in the dry run and in the run, and counted."""
    long = "word " * 230_000  # about 287,500 tokens: past every K2.5 endpoint's 262,144
    rows = [{"id": "a", "prompt": "Name a prime."}, {"id": "long", "prompt": long},
            {"id": "b", "prompt": "Name a river."}]  # fmt: skip
    path = tmp_path / "rows.jsonl"
    why = (
        f"skipped, never sent: {path}:2: its prompt is about 287,506 tokens: with "
        "max_tokens=100 it is longer than the context of every endpoint admitted (262,144 at "
        "most); shorten it"
    )
    dry, _ = _run(tmp_path, rows, dry_run=True, snapshot="bundled")
    assert dry.rows_to_send == 2 and dry.rows_skipped == 1 and why in dry.warnings
    summary, bodies = _run(tmp_path, rows)
    assert _canon([b["messages"] for b in bodies]) == _canon(
        [[U("Name a prime.")], [U("Name a river.")]]
    )
    assert summary.ok + summary.truncated == 2 and summary.rows_skipped == 1
    assert why in summary.warnings and summary.stop_reason == "done"
    assert summary.skipped_rows == (why.removeprefix("skipped, never sent: "),)  # --format json
    assert "skipped 1 rows of the prompts" in render_result(summary)
    assert sorted(r["id"] for r in records(tmp_path / "out.jsonl")) == ["a", "b"]


def test_read_prompts_keeps_the_layout_name_and_meta(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(LAYOUTS["dolly"][0][0]) + "\n")
    row = read_prompts(path).rows[0]
    assert row.extra == {"meta": {"response": "July 10, 1981", "category": "closed_qa"}}
    assert read_row(LAYOUTS["dolly"][0][0]).layout == "dolly"


def test_export_carries_meta_into_the_jsonl_rows_and_the_hub_dataset(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from openrouter_probe.cli import cli

    pq = pytest.importorskip("pyarrow.parquet")
    _run(tmp_path, LAYOUTS["dolly"][0][:1], max_tokens=8000)  # an answer not cut: exported
    out = tmp_path / "out.jsonl"
    assert records(out)[0]["status"] == "ok"
    result = CliRunner().invoke(cli, ["export", str(out), "--format", "jsonl", "-o",
                                      str(tmp_path / "train.jsonl")])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert records(tmp_path / "train.jsonl")[0]["meta"] == LAYOUTS["dolly"][2]
    result = CliRunner().invoke(cli, ["export", str(out), "--format", "hf", "-o",
                                      str(tmp_path / "hub")])  # fmt: skip
    assert result.exit_code == 0, result.output
    (shard,) = (tmp_path / "hub").rglob("*.parquet")
    assert json.loads(pq.read_table(shard).to_pylist()[0]["meta"]) == LAYOUTS["dolly"][2]


def test_an_image_column_from_datasets_is_encoded_as_a_data_url() -> None:
    image = pytest.importorskip("PIL.Image")
    import base64
    import io

    picture = image.new("RGB", (2, 2), "red")
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    png = image.open(io.BytesIO(buffer.getvalue()))  # as datasets decodes it: format PNG
    row = {"id": "v", "conversations": [U("<image>What colour?")]}
    for value in (png, {"bytes": buffer.getvalue(), "path": "red.png"}):
        parts = read_row({**row, "image": value}).messages[0]["content"]
        url = parts[0]["image_url"]["url"]
        assert url.startswith("data:image/png;base64,")
        decoded = image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
        assert decoded.size == (2, 2) and decoded.getpixel((0, 0)) == (255, 0, 0)
        assert parts[1] == {"type": "text", "text": "What colour?"}


def test_a_dataset_whose_only_row_is_past_the_context_keeps_its_weight(tmp_path: Path) -> None:
    rows = [{"id": "l", "dataset": "A", "prompt": "word " * 230_000},
            {"id": "s", "dataset": "B", "prompt": "Name a prime."}]  # fmt: skip
    dry, _ = _run(tmp_path, rows, dry_run=True, snapshot="bundled", weights="A=2,B=1")
    assert (dry.rows_to_send, dry.rows_skipped) == (1, 1)
    assert sorted(dry.datasets) == ["B"]


def test_a_glaive_row_without_functions_sends_no_tools() -> None:
    system = "SYSTEM: You are a helpful assistant, with no access to external functions."
    messages, tools = glaive_chat(system, "USER: Hi!\n\n\nASSISTANT: Hello! <|endoftext|>")
    assert tools == [] and messages == [S(system.removeprefix("SYSTEM: ")), U("Hi!"), A("Hello!")]
    shape = read_row({"system": system, "chat": "USER: Hi!\n\n\nASSISTANT: Hello! <|endoftext|>"})
    assert shape.params == {} and shape.meta == {} and shape.layout == "glaive"


def test_an_hh_transcript_named_as_the_prompt_is_still_its_turns(tmp_path: Path) -> None:
    """`--prompt-field chosen` sent the whole transcript, the preferred answer inside, as one
    user turn; a prompt that merely starts with "Human:" is one turn; an oasst reply whose
    parent is not in the file is skipped, named."""
    path = tmp_path / "hh.jsonl"
    rows = [*LAYOUTS["hh-rlhf"][0], {"chosen": "Human: are you one?", "rejected": "x"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    read = read_prompts(path, fields=FieldMap(prompt="chosen"), turns="last")
    assert [r.messages for r in read] == [LAYOUTS["hh-rlhf"][1][0][0], [U("Human: are you one?")]]
    assert read.rows[0].extra is not None and read.rows[0].extra["original"] == A("6 minutes.")
    path.write_text(json.dumps(LAYOUTS["oasst-tree"][0][0]) + "\n", encoding="utf-8")
    assert [r.id for r in read_prompts(path)] == ["m2", "m5"]  # a row per path: its leaf's id
    orphan = {**LAYOUTS["oasst-messages"][0][4], "parent_id": "gone"}
    path.write_text(json.dumps(orphan) + "\n" + json.dumps(LAYOUTS["oasst-messages"][0][0]) + "\n")
    read = read_prompts(path)
    assert [r.messages for r in read] == [[U("Name a river.")]]
    assert read.skipped == [f"{path}:1: an oasst reply whose parent 'gone' is not here"]


def test_a_manifest_names_its_datasets_row_params(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text(json.dumps(PARAM_NAMED) + "\n", encoding="utf-8")
    manifest = tmp_path / "m.yaml"
    manifest.write_text("datasets:\n  - name: A\n    source: p.jsonl\n    params: [seed]\n")
    (row,) = read_prompts_manifest(manifest).rows
    assert row.params == {"seed": 7} and row.dataset == "A"
    assert row.extra is not None and "seed" not in row.extra["meta"]
    manifest.write_text("datasets:\n  - name: A\n    source: p.jsonl\n    params: [seed, model]\n")
    with pytest.raises(ConfigError, match=r"datasets\[0\]\.params \(A\): `model` is decided by"):
        read_prompts_manifest(manifest)


def test_a_tool_call_says_whether_it_is_not_an_object_or_names_no_function() -> None:
    with pytest.raises(
        ShapeProblem, match=r"^glaive turn 2: the <functioncall> names no function$"
    ):
        tool_call({"arguments": {}}, 2, "glaive turn 2: the <functioncall>")
    with pytest.raises(ShapeProblem, match=r"is not JSON of \{name, arguments\}$"):
        tool_call(["get_weather"], 2, "glaive turn 2: the <functioncall>")
