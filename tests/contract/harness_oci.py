"""OCI contract harness: the real ``oci`` SDK clients, signing with a key pair generated for
the test session, against the wire fake in ``tests/fakes/oci_server.py``.

The account is referenced the way production references it: a profile in an OCI config
file (written to a temp dir, key file and pass phrase included), never key material in the
account itself.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from providers.base import TAG_INTENT, Provider
from providers.oci import OciProvider
from providers.retry import RetryPolicy
from schema.policy import Account, Credentials
from schema.types import Cloud, Owner
from tests.contract.harness import Fault
from tests.fakes.oci_server import FakeOci, generate_key_pair

REGION = "us-ashburn-1"
INSTANCE_TYPE = "BM.GPU.H100.8"
BUCKET = "gpucap-weights"
# Fast but bounded: the contract checks the bound, not the wall time.
TEST_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05, max_total_s=10.0)
_FAULTS: dict[str, str] = {
    "capacity": "capacity",  # 500 InternalError "Out of host capacity."
    "quota": "quota",  # 400 LimitExceeded
    "throttle": "throttle",  # 429 TooManyRequests
    "transient": "transient",  # 503 ServiceUnavailable
    "auth": "auth",  # 401 NotAuthenticated
}


@dataclass
class OciIdentity:
    """A tenancy with an uploaded API key, and the config-file profile that uses it."""

    tenancy: str
    user: str
    compartment: str
    fingerprint: str
    private_pem: str = field(repr=False)
    pass_phrase: str = field(repr=False)
    profile: str

    @property
    def key_id(self) -> str:
        return f"{self.tenancy}/{self.user}/{self.fingerprint}"


def new_identity(fake: FakeOci, name: str, pass_phrase: str) -> OciIdentity:
    """Register a tenancy + compartment + API key in the fake (what a console user would do)."""
    private_pem, public_pem, fingerprint = generate_key_pair(pass_phrase)
    ident = OciIdentity(
        tenancy=f"ocid1.tenancy.oc1..aaaa{name}",
        user=f"ocid1.user.oc1..aaaa{name}",
        compartment=f"ocid1.compartment.oc1..aaaa{name}",
        fingerprint=fingerprint,
        private_pem=private_pem,
        pass_phrase=pass_phrase,
        profile=name.upper(),
    )
    fake.add_tenancy(
        ident.tenancy,
        compartments=[ident.compartment],
        key_id=ident.key_id,
        public_key_pem=public_pem,
    )
    return ident


def write_config(directory: Path, identities: list[OciIdentity], region: str = REGION) -> Path:
    """An OCI config file (one profile per identity) with key files beside it."""
    sections = []
    for ident in identities:
        key_file = directory / f"{ident.profile.lower()}.pem"
        key_file.write_text(ident.private_pem)
        key_file.chmod(0o600)
        sections.append(
            f"[{ident.profile}]\n"
            f"user={ident.user}\n"
            f"fingerprint={ident.fingerprint}\n"
            f"tenancy={ident.tenancy}\n"
            f"region={region}\n"
            f"key_file={key_file}\n"
            f"pass_phrase={ident.pass_phrase}\n"
        )
    path = directory / "config"
    path.write_text("\n".join(sections))
    path.chmod(0o600)
    return path


def oci_account(
    name: str, ident: OciIdentity, *, owner: Owner = Owner.SHARED, regions: list[str] | None = None
) -> Account:
    return Account(
        name=name,
        cloud=Cloud.OCI,
        owner=owner,
        regions=regions or [REGION],
        credentials=Credentials(
            profile=ident.profile, tenancy=ident.tenancy, compartment_id=ident.compartment
        ),
    )


@dataclass
class OciWorld:
    fake: FakeOci
    ident: OciIdentity
    config_file: Path


@pytest.fixture(scope="session")
def oci_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OciWorld]:
    fake = FakeOci(regions=(REGION, "us-phoenix-1"), hosts_per_shape=512).start()
    try:
        ident = new_identity(fake, "contract", pass_phrase="contract-pass-phrase-7f3a")
        fake.create_bucket(ident.tenancy, REGION, BUCKET, ident.compartment)
        config = write_config(tmp_path_factory.mktemp("oci"), [ident])
        yield OciWorld(fake, ident, config)
    finally:
        fake.stop()


class OciHarness:
    instance_type = INSTANCE_TYPE
    region = REGION
    retry_budget = TEST_RETRY.max_attempts
    # Well-formed, in the region's OCID form, never issued by the fake.
    unknown_instance_id = "ocid1.instance.oc1.iad.neverissued0000000000000000000000"
    has_placement_objects = False  # a gang is one AD and one fault domain, no object

    def __init__(self, world: OciWorld) -> None:
        self.world = world
        self.fake = world.fake
        self.zone = self.fake.ad_name(world.ident.tenancy, REGION, 1)
        self.provider: Provider = OciProvider(
            oci_account("oci-contract", world.ident),
            endpoint_url=self.fake.endpoint_template,
            config_file=str(world.config_file),
            retry=TEST_RETRY,
        )

    def inject(self, fault: Fault, *, count: int = 1, zone: str | None = None) -> None:
        self.fake.inject(_FAULTS[fault], operation="LaunchInstance", count=count, ad=zone)

    def inject_start(self, fault: Fault, *, count: int = 1) -> None:
        self.fake.inject(_FAULTS[fault], operation="InstanceAction.START", count=count)

    def create_requests(self) -> int:
        return len(self.fake.requests("LaunchInstance"))

    def instances_with_intent(self, intent_id: str) -> int:
        return len(self.fake.live_instances_with_tag(TAG_INTENT, intent_id))

    def user_data_of(self, instance_id: str) -> str:
        for i in self.fake.instances():
            if i["id"] == instance_id:
                value = (i.get("metadata") or {}).get("user_data")
                return base64.b64decode(value).decode() if value else ""
        return ""

    def placement_of(self, instance_id: str) -> str | None:
        for i in self.fake.instances():
            if i["id"] == instance_id:
                return f"{i['availabilityDomain']}/{i['faultDomain']}"
        return None

    def placement_objects(self) -> Mapping[str, Mapping[str, str]]:
        return {}

    def drop_next_placement_create(self) -> bool:
        return False

    def crash_after_create(self) -> None:
        self.fake.drop_next_response("LaunchInstance")

    def object_uri(self, key: str) -> str:
        return f"oci://{BUCKET}@{self.fake.namespace(self.world.ident.tenancy)}/{key}"

    def _parse(self, uri: str) -> tuple[str, str, str, str]:
        m = re.match(r"^oci://([^@/]+)@([^/]+)/(.+)$", uri)
        assert m, uri
        return REGION, m.group(2), m.group(1), m.group(3)

    def put_object(self, uri: str, data: bytes) -> None:
        self.fake.put_object(*self._parse(uri), data)

    def get_object(self, uri: str) -> bytes | None:
        return self.fake.get_object(*self._parse(uri))


@pytest.fixture
def oci_harness(oci_world: OciWorld) -> Iterator[OciHarness]:
    oci_world.fake.clear_faults()
    yield OciHarness(oci_world)
    oci_world.fake.clear_faults()
