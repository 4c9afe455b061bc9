"""Build the client's VCR.py cassettes from real OpenRouter bodies.

No machine here reaches openrouter.ai, so the cassettes are not recorded live: each one is built from
a real body in ``../shared/captures/`` (kept byte-exact) or, where no capture exists, from the shapes
and messages documented in ``../shared/OPENROUTER.md`` (named below). A user with a key re-records them
with ``pytest --record-mode=rewrite`` (see the README's Development section).

Run from the repository root: ``python tests/cassettes/build_cassettes.py [CAPTURES_DIR]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
# A byte-exact copy of ../shared/captures lives in tests/data/captures so the tests stand alone.
CAPTURES = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "data" / "captures"
OUT = Path(__file__).resolve().parent / "api" / "test_client"  # tests/api/test_client.py's
API = "https://openrouter.ai/api/v1"


def interaction(uri: str, status: int, body: str, *, headers: dict | None = None) -> dict:
    messages = {
        200: "OK",
        401: "Unauthorized",
        404: "Not Found",
        429: "Too Many Requests",
        502: "Bad Gateway",
        503: "Service Unavailable",
    }
    return {
        "request": {"body": None, "headers": {}, "method": "GET", "uri": uri},
        "response": {
            "body": {"string": body},
            "headers": {"Content-Type": ["application/json"], **(headers or {})},
            "status": {"code": status, "message": messages.get(status, "")},
        },
    }


def write(name: str, *interactions: dict) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {"interactions": list(interactions), "version": 1}
    path = OUT / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=True, allow_unicode=True, width=10**9))
    print("wrote", path.relative_to(ROOT))


def main() -> None:
    k3 = (CAPTURES / "kimi-k3-endpoints-2026-08-25-reduced.json").read_text()
    models = (CAPTURES / "models-list-2026-01-28.json").read_text()
    k3_url = f"{API}/models/moonshotai/kimi-k3/endpoints"
    # Real body: captures/kimi-k3-endpoints-2026-08-25-reduced.json.
    write("test_endpoints_real_k3_body", interaction(k3_url, 200, k3))
    # Real body: captures/models-list-2026-01-28.json (347 models).
    write("test_models_real_list", interaction(f"{API}/models", 200, models))
    # Message recorded by a third party (OPENROUTER.md §1.1).
    write(
        "test_unknown_model_is_no_route_error",
        interaction(
            f"{API}/models/x/y/endpoints",
            404,
            '{"error":{"message":"No endpoints found for x/y.","code":404}}',
        ),
    )
    # Real 401 body (OPENROUTER.md §9.1).
    write(
        "test_bad_key_is_401",
        interaction(k3_url, 401, '{"error":{"message":"User not found.","code":401}}'),
    )
    # A 429 with Retry-After (OPENROUTER.md §9.4), then the real K3 body.
    write(
        "test_retries_429_then_succeeds",
        interaction(
            k3_url,
            429,
            '{"error":{"message":"Rate limit exceeded: limit_rpm/moonshotai/kimi-k3","code":429}}',
            headers={"Retry-After": ["1"]},
        ),
        interaction(k3_url, 200, k3),
    )
    # Two 502s then the real body: 5xx are transient.
    bad_gateway = '{"error":{"message":"Provider returned error","code":502}}'
    write(
        "test_retries_5xx_then_succeeds",
        interaction(k3_url, 502, bad_gateway),
        interaction(k3_url, 502, bad_gateway),
        interaction(k3_url, 200, k3),
    )
    # A 429 asking for an hour (OPENROUTER.md §9.4: Retry-After in seconds on 429/503): the client
    # must not sleep an hour but fail at once, saying when to retry.
    rate_limited = (
        '{"error":{"message":"Rate limit exceeded: limit_rpm/moonshotai/kimi-k3","code":429}}'
    )
    write(
        "test_retry_after_longer_than_wait_max_fails_at_once",
        interaction(k3_url, 429, rate_limited, headers={"Retry-After": ["3600"]}),
    )
    # A 429 asking for 3 s, within the cap: waited exactly, then the real K3 body.
    write(
        "test_retry_after_within_the_cap_is_waited",
        interaction(k3_url, 429, rate_limited, headers={"Retry-After": ["3"]}),
        interaction(k3_url, 200, k3),
    )
    # The real models list split into two pages the way newer lists page (OPENROUTER.md §2:
    # total_count and links.next); each model's JSON is byte-for-byte the capture's.
    all_models = json.loads(models)["data"]
    first, rest = all_models[:200], all_models[200:]
    page1 = {
        "data": first,
        "total_count": len(all_models),
        "links": {"next": "/api/v1/models?offset=200&limit=200"},
    }
    page2 = {"data": rest, "total_count": len(all_models), "links": {"next": None}}
    write(
        "test_models_follows_links_next",
        interaction(f"{API}/models", 200, json.dumps(page1, ensure_ascii=False)),
        interaction(
            f"{API}/models?offset=200&limit=200", 200, json.dumps(page2, ensure_ascii=False)
        ),
    )
    # A gateway page that is not JSON.
    html = "<html><body><h1>502 Bad Gateway</h1></body></html>"
    write("test_malformed_json_body", interaction(k3_url, 200, html))
    # GET /providers: the spec's shape with real slugs from OPENROUTER.md §3.
    providers = {
        "data": [
            {
                "name": "AtlasCloud",
                "slug": "atlas-cloud",
                "privacy_policy_url": "https://www.atlascloud.ai/privacy",
                "headquarters": "US",
                "datacenters": ["US"],
            },
            {
                "name": "Moonshot AI",
                "slug": "moonshotai",
                "privacy_policy_url": "https://platform.moonshot.ai/docs/agreement/userprivacy",
                "headquarters": "CN",
            },
            {
                "name": "Z.AI",
                "slug": "z-ai",
                "privacy_policy_url": "https://z.ai/privacy",
                "terms_of_service_url": "https://z.ai/terms",
                "status_page_url": None,
                "headquarters": "SG",
                "datacenters": ["SG", "US"],
            },
        ]
    }
    write("test_providers_slugs", interaction(f"{API}/providers", 200, json.dumps(providers)))
    # GET /key: the fields of OPENROUTER.md §5 (spec shape; values invented).
    key = {
        "data": {
            "label": "sk-or-v1-abc...xyz",
            "limit": 100,
            "limit_remaining": 61.25,
            "limit_reset": None,
            "include_byok_in_limit": False,
            "usage": 38.75,
            "usage_daily": 12.5,
            "usage_weekly": 38.75,
            "usage_monthly": 38.75,
            "byok_usage": 0,
            "is_free_tier": False,
            "is_management_key": False,
            "rate_limit": {"requests": -1, "interval": "10s"},
        }
    }
    key_body = json.dumps(key).replace("sk-or-v1-abc...xyz", "probe key (label)")
    write("test_key_limits", interaction(f"{API}/key", 200, key_body))
    # GET /generation: 404 while the generation is not yet visible (OPENROUTER.md §4), then the
    # record; figures from the real Inceptron K2.5 chat (captures/kimi-k2.5-chat-inceptron.yaml).
    gen_id = "gen-1777319885-pLuUvaQdB3l6lRlhlKuv"
    gen_url = f"{API}/generation?id={gen_id}"
    gen = {
        "data": {
            "id": gen_id,
            "model": "moonshotai/kimi-k2.5-0127",
            "provider_name": "Inceptron",
            "total_cost": 0.00045364,
            "tokens_prompt": 21,
            "tokens_completion": 202,
            "native_tokens_prompt": 21,
            "native_tokens_completion": 202,
            "native_tokens_reasoning": 166,
            "finish_reason": "stop",
            "native_finish_reason": "stop",
            "streamed": False,
            "is_byok": False,
            "provider_responses": [
                {
                    "provider_name": "Inceptron",
                    "status": 200,
                    "model_permaslug": "moonshotai/kimi-k2.5-0127",
                }
            ],
        }
    }
    write(
        "test_generation_retries_404",
        interaction(
            gen_url,
            404,
            json.dumps({"error": {"message": f"Generation {gen_id} not found", "code": 404}}),
        ),
        interaction(
            gen_url,
            404,
            json.dumps({"error": {"message": f"Generation {gen_id} not found", "code": 404}}),
        ),
        interaction(gen_url, 200, json.dumps(gen)),
    )


if __name__ == "__main__":
    main()
