"""Real clients against the fake: the openai SDK, the project's own ``Client``, the shipped pytest
fixture, and the ``fake-server`` command in a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from decimal import Decimal

import pytest
import requests
from click.testing import CliRunner

from openrouter_probe import Client, probe
from openrouter_probe.cli import cli
from openrouter_probe.fake import serve

MODEL = "moonshotai/kimi-k2.5"
CHUTES = {"order": ["chutes/int4"], "allow_fallbacks": False}


def test_the_openai_sdk_works_against_it() -> None:
    openai = pytest.importorskip("openai")
    with serve(speed=0) as fake:
        client = openai.OpenAI(base_url=fake.base_url, api_key="sk-fake-test", max_retries=0)
        reply = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "What is 37 * 41?"}],
            max_tokens=2000,
            extra_body={"provider": CHUTES},
        )
        assert reply.choices[0].message.content == " 37 * 41 = 1517"
        assert reply.model == "moonshotai/kimi-k2.5-0127"
        assert reply.model_extra["provider"] == "Chutes"
        assert reply.usage.model_extra["cost"] > 0
        chunks = list(
            client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "What is 37 * 41?"}],
                max_tokens=2000,
                stream=True,
                extra_body={"provider": CHUTES},
            )
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == " 37 * 41 = 1517"
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 5
        assert len(fake.ledger) == 2
        assert (
            Decimal(str(reply.usage.model_extra["cost"]))
            + Decimal(str(chunks[-1].usage.model_extra["cost"]))
            == fake.ledger.total_usd
        )
        with pytest.raises(openai.NotFoundError) as info:
            client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "hi"}],
                extra_body={"provider": {"only": ["nobody"]}},
            )
        assert "No allowed providers are available" in str(info.value)


def test_the_project_client_works_against_it() -> None:
    with serve(speed=0, credit_usd=5) as fake, Client(base_url=fake.base_url) as client:
        endpoints = client.endpoints(MODEL)
        assert len(endpoints.endpoints) == 11
        assert endpoints.endpoints[0].pricing.completion_usd_per_m == Decimal("2.2")
        assert client.models().data[0].canonical_slug == "moonshotai/kimi-k2.5-0127"
        assert {p.slug for p in client.providers().data} >= {"chutes", "fireworks"}
        body = requests.post(
            f"{fake.base_url}/chat/completions",
            json={
                "model": MODEL,
                "messages": [{"role": "user", "content": "2 + 2"}],
                "max_tokens": 900,
            },
            headers={"Authorization": "Bearer sk-fake-test"},
            timeout=10,
        ).json()
        generation = client.generation(body["id"])
        assert generation.total_cost == body["usage"]["cost"]
        assert generation.provider_name == body["provider"]
        key = client.key()
        assert key.limit == 5
        assert Decimal(str(key.usage)) == fake.ledger.total_usd
        snap = probe(MODEL, client=client, use_page=False)
        assert snap.source == "api" and len(snap.endpoints) == 11


def test_the_project_client_sees_the_401() -> None:
    from openrouter_probe.errors import APIStatusError

    with (
        serve(speed=0, api_key="sk-right") as fake,
        Client(base_url=fake.base_url, api_key="sk-wrong") as client,
        pytest.raises(APIStatusError) as info,
    ):
        client.key()
    assert info.value.status_code == 401
    assert "User not found." in str(info.value)


@pytest.mark.fake_openrouter(credit_usd=0.5, faults="upstream_429=@1")
def test_the_shipped_fixture(fake_openrouter) -> None:
    assert os.environ["OPENROUTER_BASE_URL"] == fake_openrouter.base_url
    url = f"{fake_openrouter.base_url}/chat/completions"
    body = {"model": MODEL, "messages": [{"role": "user", "content": "5 * 5"}], "max_tokens": 900}
    headers = {"Authorization": "Bearer sk-fake-test"}
    first = requests.post(url, json={**body, "provider": CHUTES}, headers=headers, timeout=10)
    second = requests.post(url, json=body, headers=headers, timeout=10)
    assert first.status_code == 429
    assert second.status_code == 200 and "25" in second.json()["choices"][0]["message"]["content"]
    assert fake_openrouter.credit.limit_usd == Decimal("0.5")


#: The server started as a shell's background job is: with SIGINT and SIGTERM ignored by its
#: parent (an exec keeps what was ignored, and Python then keeps SIGINT ignored).
_IGNORED_BY_THE_PARENT = (
    "import os, signal, sys\n"
    "for sig in (signal.SIGINT, signal.SIGTERM):\n"
    "    signal.signal(sig, signal.SIG_IGN)\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'openrouter_probe', 'fake-server',\n"
    "                          '--offline', '--port', '0', '--speed', '0'])\n"
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_fake_server_command_serves_until_interrupted(signum: signal.Signals) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _IGNORED_BY_THE_PARENT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base_url = proc.stdout.readline().strip()  # blocks until the server is up
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/api/v1")
        r = requests.post(
            f"{base_url}/chat/completions",
            json={
                "model": MODEL,
                "messages": [{"role": "user", "content": "What is 37 * 41?"}],
                "max_tokens": 900,
                "provider": CHUTES,
            },
            headers={"Authorization": "Bearer sk-fake-test"},
            timeout=10,
        )
        assert r.json()["provider"] == "Chutes"
        usage = r.json()["usage"]
        cost = usage["cost"]
        # exactly its tokens at Chutes' prices in the bundled snapshot ($0.45/M in, $2.20/M out)
        assert (
            Decimal(str(cost))
            == Decimal("0.00000045") * usage["prompt_tokens"]
            + Decimal("0.0000022") * usage["completion_tokens"]
        )
        ledger = requests.get(base_url.replace("/api/v1", "/_fake/ledger"), timeout=5).json()
        assert ledger["total_usd"] == cost
    finally:
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"billed ${cost:.6f} in 1 generations" in err
    assert "sk-fake-test" not in err  # keys never logged


def test_fake_server_command_rejects_a_bad_spec_in_one_line() -> None:
    result = CliRunner().invoke(cli, ["fake-server", "--offline", "--faults", "drop=lots"])
    assert result.exit_code == 2  # a usage error (issue 26)
    assert result.output.splitlines()[-1] == (
        "Error: --faults entry 'drop=lots': rate 'lots' is not a number between 0 and 1"
    )


def test_fake_server_command_rejects_a_bad_snapshot(tmp_path) -> None:
    bad = tmp_path / "snap.json"
    bad.write_text("{}")
    result = CliRunner().invoke(cli, ["fake-server", "--snapshot", str(bad)])
    assert result.exit_code == 1
    assert result.output == (
        f"Error: {bad}: not a snapshot: expected 'format': 'openrouter-probe.snapshot/1' or an "
        "/endpoints body with data.endpoints; save one with "
        "`openrouter-probe endpoints MODEL --save PATH`\n"
    )


def _python_block(path: str, after: str) -> str:
    import re

    from tests.conftest import ROOT

    text = (ROOT / path).read_text(encoding="utf-8")
    match = re.search(r"```python\n(.*?)```", text[text.index(after) :], re.S)
    assert match is not None
    return match.group(1)


def test_the_docs_dry_run_prints_what_the_docs_show(capsys, monkeypatch) -> None:
    from tests.conftest import ROOT

    monkeypatch.chdir(ROOT)
    exec(_python_block("docs/fake-server.md", "## Dry-run a policy"), {})
    assert capsys.readouterr().out.splitlines() == [
        "Chutes  37 * 41 = 1517",
        "Chutes  12 * 12 = 144",
        "Chutes  99 * 3 = 297",
        "client counted $0.002425; the server billed $0.002425",
    ]


def test_the_readme_example_runs(capsys) -> None:
    exec(_python_block("README.md", "## A fake OpenRouter"), {})
    assert Decimal(capsys.readouterr().out.strip()) > 0


def test_a_port_in_use_is_one_clear_error() -> None:
    from openrouter_probe.errors import ConfigError

    with serve(speed=0) as first:
        taken = rf"cannot serve on 127.0.0.1:{first.port}: "
        with pytest.raises(ConfigError, match=taken), serve(speed=0, port=first.port):
            pass  # pragma: no cover
        assert requests.get(f"{first.base_url}/models", timeout=5).status_code == 200
