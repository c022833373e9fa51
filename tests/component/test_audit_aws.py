"""The audit against moto's EC2 (server mode) through the daemon's own resolver
(``CloudResolver``: real boto3 clients, the customer's role assumed), on SQLite and
PostgreSQL: it reads the EC2 listing by gpucap's tags. In the customer's account: a node
the store tracks, a stopped warm node, an instance with our tags and no row (leaked), a row
whose instance EC2 no longer has (lost), and an instance without our tags (not ours, not
listed). In gpucap's shared account, listed by ``gpucap-managed`` alone: an instance of a
customer the store does not know (leaked)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from sqlalchemy import select

from controlplane.api import ControlPlaneService, NotFoundError
from controlplane.audit import Category, Reason
from controlplane.resolvers import CloudResolver, account_model
from controlplane.store.db import Store
from controlplane.store.models import Account, Pool, Replica
from controlplane.store.models import Model as ModelRow
from controlplane.store.models import Node as NodeRow
from providers.aws.provider import AwsProvider
from providers.base import NodeRequest, ownership_tags
from providers.credentials import ExternalIdGenerator
from providers.retry import NO_RETRY
from schema.types import Cloud
from tests.contract.harness_aws import base_ami
from tests.fakes.moto_server import MotoEmulator, moto, moto_server

__all__ = ["moto", "moto_server"]

ROLE = "arn:aws:iam::111122223333:role/gpucap"  # (not moto's default account: the shared one)
POLICY = f"""\
customer: acme
accounts:
  - name: acme-aws
    cloud: aws
    regions: [us-east-1, us-west-2]
    credentials:
      role_arn: {ROLE}
  - name: gpucap-aws
    cloud: aws
    owner: shared
    regions: [us-east-1]
models:
  - name: chat
    shapes:
      - shape: 8xH100
        max_concurrency: 64
"""
AN_HOUR_AGO = datetime.now(UTC) - timedelta(hours=1)


def _provider(store: Store, moto: MotoEmulator, ami: str, name: str) -> AwsProvider:
    """The account's adapter for making instances (with moto's AMI as the base image)."""
    with store.session() as s:
        row = s.scalars(select(Account).where(Account.name == name)).one()
        model = account_model(row)
    return AwsProvider.for_account(
        model,
        customer="acme",
        external_id="audit-test",
        endpoint_url=moto.endpoint_url,
        images={"us-east-1": ami},
        retry=NO_RETRY,
    )


def _launch(provider: AwsProvider, customer: str = "acme") -> tuple[str, str]:
    intent = f"n-{uuid.uuid4().hex[:12]}"
    made = provider.create_node(
        NodeRequest(
            intent_id=intent,
            instance_type="p5.48xlarge",
            region="us-east-1",
            zone="us-east-1a",
            tags=ownership_tags(intent, customer, "p", "chat"),
        )
    )
    return intent, made.node.instance_id


def _track(store: Store, rows: list[tuple[str, str, str]]) -> None:
    """Node rows (intent, instance id, state) in acme-aws/us-east-1, as the reconciler
    writes them, accepted by the cloud an hour ago."""
    with store.session() as s:
        pool = s.scalars(
            select(Pool).where(Pool.account == "acme-aws", Pool.region == "us-east-1")
        ).first()
        model = s.scalars(select(ModelRow)).one()
        assert pool is not None
        for intent, instance_id, state in rows:
            s.add(
                Replica(
                    id=f"r-{intent}",
                    model_id=model.id,
                    pool_id=pool.id,
                    gpu_shape=pool.gpu_shape,
                    state=state,
                    created_at=AN_HOUR_AGO,
                    warm=state == "stopped",
                )
            )
            s.flush()
            s.add(
                NodeRow(
                    id=intent,
                    replica_id=f"r-{intent}",
                    pool_id=pool.id,
                    customer="acme",
                    account="acme-aws",
                    cloud="aws",
                    region="us-east-1",
                    zone="us-east-1a",
                    instance_type=pool.instance_type,
                    idempotency_token=intent,
                    instance_id=instance_id,
                    state=state,
                    pending_at=AN_HOUR_AGO,
                    provisioning_at=AN_HOUR_AGO,
                )
            )


def test_the_audit_reads_each_accounts_ec2_listing_by_our_tags(
    store: Store, moto: MotoEmulator
) -> None:
    moto.reset_state()
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto.direct_url)
    ami = base_ami(ec2)
    resolver = CloudResolver(
        ExternalIdGenerator(secret=b"audit-test-secret-0123456789abcdef"),
        {Cloud.AWS: moto.endpoint_url},
    )
    svc = ControlPlaneService(store, providers=resolver)
    svc.apply_policy(POLICY, source="acme.yaml", applied_by="t")
    acme = _provider(store, moto, ami, "acme-aws")
    shared = _provider(store, moto, ami, "gpucap-aws")

    serving, serving_id = _launch(acme)
    parked, parked_id = _launch(acme)
    acme.stop_node("us-east-1", parked_id)
    ghost, ghost_id = _launch(acme)  # our tags, no row
    stranger, stranger_id = _launch(shared, customer="gone-customer")
    _track(store, [(serving, serving_id, "ready"), (parked, parked_id, "stopped")])
    _track(store, [("n-lost", "i-0123456789abcdef0", "ready")])  # EC2 never had it
    # Not ours: no gpucap tags, in the customer's account (the role's).
    sts = boto3.client("sts", region_name="us-east-1", endpoint_url=moto.direct_url)
    creds = sts.assume_role(RoleArn=ROLE, RoleSessionName="ground-truth")["Credentials"]
    boto3.client(
        "ec2",
        region_name="us-east-1",
        endpoint_url=moto.direct_url,
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
    ).run_instances(ImageId=ami, InstanceType="p5.48xlarge", MinCount=1, MaxCount=1)

    report = svc.audit()
    sites = {(r.site.account, r.site.region, r.site.customer): r for r in report.sites}
    assert set(sites) == {
        ("acme-aws", "us-east-1", "acme"),
        ("acme-aws", "us-west-2", "acme"),
        ("gpucap-aws", "us-east-1", ""),
    }
    east = sites[("acme-aws", "us-east-1", "acme")]
    assert east.error is None
    assert (east.tracked, east.stopped, east.in_cloud) == (2, 1, 3)  # the untagged one: no
    found: dict[tuple[Category, Reason], list[Any]] = {}
    for f in east.findings:
        found.setdefault((f.category, f.reason), []).append(f)
    [leaked] = found.pop((Category.LEAKED, Reason.UNTRACKED))
    assert (leaked.intent_id, [n.instance_id for n in leaked.instances]) == (ghost, [ghost_id])
    [lost] = found.pop((Category.LOST, Reason.GONE))
    assert lost.intent is not None and lost.intent.instance_id == "i-0123456789abcdef0"
    assert found == {}

    west = sites[("acme-aws", "us-west-2", "acme")]
    assert (west.error, west.in_cloud, west.findings) == (None, 0, ())

    pool = sites[("gpucap-aws", "us-east-1", "")]
    [f] = pool.findings
    assert (f.category, f.reason, f.intent_id, f.customer) == (
        Category.LEAKED,
        Reason.UNTRACKED,
        stranger,
        "gone-customer",
    )
    assert [n.instance_id for n in f.instances] == [stranger_id]
    assert report.totals["leaked"] == 2 and report.totals["lost"] == 1 and not report.clean

    # The customer's own filter lists the shared account with its tag: the stranger is not
    # acme's, so not in its audit.
    mine = svc.audit(customer="acme")
    assert {r.site.customer for r in mine.sites} == {"acme"}
    assert mine.totals["leaked"] == 1
    with pytest.raises(NotFoundError):
        svc.audit(account="azure-main")
