"""Tenant isolation under random requests: every unary RPC, with request values drawn from
its proto descriptor (tests/component/test_grpc_fuzz.py's strategies), sent with another
customer's token to a store that holds acme's models, nodes, decisions and events. No
answer may carry acme's data, no call may end in a bug's code, and no refused write may
change acme's resources."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controlplane import api_tokens
from controlplane.grpc.client import ControlPlaneClient
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from tests.component.test_grpc_authz import World, world  # noqa: F401  (fixture)
from tests.component.test_grpc_fuzz import BAD, UNARY, _request

EXAMPLES = 200
# acme's names that no drawn request contains (tests/component/test_grpc_fuzz.py's KNOWN
# values are the example policy's): finding one in an answer to globex is a leak.
ACME_ONLY = ("chat-a", "api-m", "del-admin", "acme-aws", "10.0.0.5")


def _customers(message: Message) -> Iterator[str]:
    """Every ``customer`` field's value in ``message``, at any depth."""
    for field, value in message.ListFields():
        if field.name == "customer" and isinstance(value, str):
            yield value
        elif field.message_type is not None and not field.message_type.GetOptions().map_entry:
            for item in value if field.is_repeated else [value]:
                yield from _customers(item)


def test_another_customers_random_requests_see_nothing_of_acme(world: World) -> None:  # noqa: F811
    with ControlPlaneClient(world.addr, token=world.tokens["admin"]) as admin:
        before = admin.stub.ListModels(pb.ListModelsRequest(customer="acme")).models
    seen: dict[str, set[str]] = {}

    with ControlPlaneClient(world.addr, token=world.tokens["other"], timeout=10) as c:

        def one(name: str, request: Message) -> None:
            try:
                answer = getattr(c.stub, name)(request, timeout=10)
            except grpc.RpcError as err:
                assert err.code() not in BAD, f"{name}: {err.code().name} {err.details()}"
                seen.setdefault(name, set()).add(err.code().name)
                return
            seen.setdefault(name, set()).add("OK")
            leaked = set(_customers(answer)) - {"", "globex"}
            assert not leaked, f"{name} answered globex with {leaked}:\n{request}"[:3000]
            text = str(answer)
            assert not [n for n in ACME_ONLY if n in text], f"{name}: {text}"[:3000]

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=[
                HealthCheck.too_slow,
                HealthCheck.data_too_large,
                HealthCheck.function_scoped_fixture,
            ],
        )
        @given(st.one_of([_request(m) for m in UNARY]))
        def call(named: tuple[str, Message]) -> None:
            one(*named)

        call()
        for m in UNARY:  # (each RPC at least once: an empty request is the caller's own)
            one(m.name, GetMessageClass(m.input_type)())
    assert set(seen) == {m.name for m in UNARY}
    assert sum("OK" in codes for codes in seen.values()) >= len(UNARY) // 3  # (not all refused)

    with ControlPlaneClient(world.addr, token=world.tokens["admin"]) as admin:
        after = admin.stub.ListModels(pb.ListModelsRequest(customer="acme")).models
    assert [(m.name, m.spec, m.deleted_at) for m in after] == [
        (m.name, m.spec, m.deleted_at) for m in before
    ]
    assert api_tokens.list_tokens(world.store)  # (the store is intact)
