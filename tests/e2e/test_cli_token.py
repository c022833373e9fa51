"""``gpucap token create|list|revoke`` end to end against a server with authorization on,
and ``gpucap daemon --demo --auth``: its token files, named in its banner, one per role."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog.testing

from controlplane.api import ControlPlaneService
from controlplane.authz import ADMIN
from controlplane.grpc.server import serve
from controlplane.store.db import Store
from tests.e2e.conftest import Gpucap
from tests.e2e.test_daemon import GPUCAP, cli, start
from tests.policy_texts import edited, engines_policy

ACME = engines_policy({"chat-a": ("vllm", 8000)})
GLOBEX = edited(
    edited(edited(ACME, "customer: acme", "customer: globex"), "acme-aws", "globex-aws"),
    "name: chat-a",
    "name: chat-g",
)


@pytest.fixture
def secured(store: Store) -> Iterator[tuple[Gpucap, str]]:
    """``gpucap`` against a server with authorization on, and the store's URL."""
    svc = ControlPlaneService(store)
    svc.apply_policy(ACME, source="acme.yaml", applied_by="t")
    svc.apply_policy(GLOBEX, source="globex.yaml", applied_by="t")
    with structlog.testing.capture_logs():
        server = serve(svc, "127.0.0.1:0", auth=True, token_cache_s=0)
        yield Gpucap(f"127.0.0.1:{server.port}"), store.engine.url.render_as_string(False)
        server.stop(grace=0)


def test_token_create_list_revoke_end_to_end(secured: tuple[Gpucap, str], tmp_path: Path) -> None:
    gpucap, url = secured
    made = gpucap("token", "create", "--role", "customer:acme", "--description", "ci", "--url", url)
    assert made.exit_code == 0, made.output
    token = made.stdout.strip()
    assert re.fullmatch(r"gpct_[0-9a-f]{16}_\S+", token)
    token_id = token.split("_")[1]

    listed = gpucap("token", "list", "--url", url, "-o", "json")
    [row] = json.loads(listed.stdout)["tokens"]
    assert (row["id"], row["role"], row["state"], row["description"]) == (
        token_id,
        "customer:acme",
        "active",
        "ci",
    )
    assert token.split("_", 2)[2] not in listed.stdout  # the secret is never shown again

    refused = gpucap("models", "-o", "json")  # no token
    assert refused.exit_code == 1 and "refused the token" in refused.output
    models = gpucap("models", "-o", "json", "--token", token)
    assert models.exit_code == 0, models.output
    assert {m["customer"] for m in json.loads(models.stdout)["models"]} == {"acme"}
    denied = gpucap("status", "--token", token)
    assert denied.exit_code == 1 and "needs the admin role" in denied.output

    # The token from a file ($GPUCAP_TOKEN_FILE), as --demo --auth hands them out.
    holder = tmp_path / "acme.token"
    holder.write_text(token + "\n")
    gpucap.env["GPUCAP_TOKEN_FILE"] = str(holder)
    assert gpucap("models").exit_code == 0

    revoked = gpucap("token", "revoke", token_id, "--url", url)
    assert revoked.exit_code == 0 and f"revoked token {token_id}" in revoked.output
    again = gpucap("token", "revoke", token_id, "--url", url)
    assert again.exit_code == 0 and "already revoked" in again.output
    after = gpucap("models")
    assert after.exit_code == 1 and "refused the token" in after.output
    [row] = json.loads(gpucap("token", "list", "--url", url, "-o", "json").stdout)["tokens"]
    assert row["state"] == "revoked" and row["revoked_at"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--role", "root"], "--role"),
        (["--role", "customer:Acme"], "--role"),
        (["--role", "admin", "--expires-in", "soon"], "--expires-in"),
        (["--role", "admin", "--expires-in", "0d"], "--expires-in"),
        (["--role", "admin", "--expires-in", "999999999w"], "--expires-in"),
        (["--role", "admin", "--description", "x" * 300], "--description"),
        (["--role", "admin", "--description", "a\x00b"], "--description"),
    ],
)
def test_token_create_refuses_bad_input_naming_the_option(
    secured: tuple[Gpucap, str], args: list[str], field: str
) -> None:
    gpucap, url = secured
    out = gpucap("token", "create", *args, "--url", url)
    assert out.exit_code == 2 and out.output.startswith(f"error: {field}: ")
    assert json.loads(gpucap("token", "list", "--url", url, "-o", "json").stdout) == {"tokens": []}


def test_token_revoke_of_an_unknown_id(secured: tuple[Gpucap, str]) -> None:
    gpucap, url = secured
    out = gpucap("token", "revoke", "0123456789abcdef", "--url", url)
    assert out.exit_code == 1 and "no token '0123456789abcdef'" in out.output


def test_demo_tokens_of_an_earlier_start_are_revoked(store: Store, tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from controlplane import api_tokens
    from controlplane.demo.auth import write_demo_tokens

    ControlPlaneService(store).apply_policy(ACME, source="acme.yaml", applied_by="t")
    kept = api_tokens.create(store, ADMIN, now=datetime.now(UTC), description="on-call")
    first = write_demo_tokens(store, tmp_path, datetime.now(UTC))
    first_ids = {p.read_text().split("_")[1] for p in first.values()}
    second = write_demo_tokens(store, tmp_path, datetime.now(UTC))
    assert set(second) == set(first) == {"admin", "customer:acme"}
    states = {v.id: v.state(datetime.now(UTC)) for v in api_tokens.list_tokens(store)}
    assert {states[i] for i in first_ids} == {"revoked"}
    assert {states[p.read_text().split("_")[1]] for p in second.values()} == {"active"}
    assert states[kept.view.id] == "active"  # (not one of the demo's)


@pytest.mark.slow
@pytest.mark.xdist_group("daemon")
def test_demo_auth_writes_a_token_per_role_and_names_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens = tmp_path / "state" / "demo" / "tokens"
    # (start() waits on `gpucap status`, which needs the admin's token once it is written)
    monkeypatch.setenv("GPUCAP_TOKEN_FILE", str(tokens / "admin.token"))
    monkeypatch.setenv("GPUCAP_DEMO_PROMETHEUS", "")
    d = start(tmp_path, "--demo", "--auth")
    try:
        banner = d.log.read_text()
        named = dict(re.findall(r"^\s+(admin|customer:[a-z0-9-]+)\s+(\S+)$", banner, re.M))
        assert "admin" in named and len(named) >= 2, banner
        for role, path in named.items():
            file = Path(path)
            assert file.parent == tokens and stat.S_IMODE(file.stat().st_mode) == 0o600
            assert file.read_text().startswith("gpct_"), role
        customers = sorted(r.removeprefix("customer:") for r in named if r != "admin")

        everything = cli(d.addr, "models")["models"]
        assert sorted({m["customer"] for m in everything}) == customers
        first = customers[0]
        monkeypatch.setenv("GPUCAP_TOKEN_FILE", named[f"customer:{first}"])
        own = cli(d.addr, "models")["models"]
        assert own and {m["customer"] for m in own} == {first}
        status = subprocess.run(
            [*GPUCAP, "status", "--addr", d.addr], capture_output=True, text=True, timeout=30
        )
        assert status.returncode == 1 and "needs the admin role" in status.stderr
        monkeypatch.delenv("GPUCAP_TOKEN_FILE")
        out = subprocess.run(
            [*GPUCAP, "models", "--addr", d.addr],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "GPUCAP_TOKEN": ""},
        )
        assert out.returncode == 1 and "refused the token" in out.stderr
    finally:
        assert d.stop() == 0
