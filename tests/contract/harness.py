"""The contract harness: what every cloud's emulator-backed test fixture provides.

Each cloud has ``tests/contract/harness_<cloud>.py`` with a pytest fixture named
``<cloud>_harness`` (function-scoped, so injected faults never leak between tests) that
yields an object satisfying :class:`Harness`. The shared contract tests in
``test_contract.py`` are written against this protocol only, so the simulated cloud and the
three real adapters are held to exactly the same behaviour.

Ground truth (``instances_with_intent``, ``get_object``) is read from the emulator directly,
never through the adapter under test: a test that asks the adapter whether the adapter
worked cannot fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol, runtime_checkable

from providers.base import Provider
from providers.retry import RetryPolicy

Fault = Literal["capacity", "quota", "throttle", "transient", "auth"]
FAULTS: tuple[Fault, ...] = ("capacity", "quota", "throttle", "transient", "auth")

# The retry policy every harness builds its provider with: fast, but bounded, because the
# contract checks the *number* of attempts (``retry_budget``), not the waiting.
CONTRACT_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.01, max_total_s=10)


@runtime_checkable
class Harness(Protocol):
    provider: Provider  # built through the real SDK client against the emulator
    region: str  # a region the emulator serves
    zone: str  # a zone / AD in it
    instance_type: str  # an H100 instance type of that cloud
    # How many create attempts the adapter makes on a throttled/transient failure before it
    # gives up (the provider's retry policy as the harness built it: fast, but bounded).
    # With fewer than ``retry_budget`` injected faults a create must succeed; with
    # ``retry_budget`` of them it must raise.
    retry_budget: int
    # A well-formed instance id that the emulator has never issued (terminate must accept it).
    unknown_instance_id: str
    # Whether the cloud has a placement object for a gang (AWS placement group, GCP compact
    # placement policy, the simulator's group); OCI has none (fault domain + AD instead).
    has_placement_objects: bool

    def inject(self, fault: Fault, *, count: int = 1, zone: str | None = None) -> None:
        """Make the next ``count`` create calls (only those in ``zone`` when given) fail with
        ``fault``, one of :data:`FAULTS`. Injected at the HTTP level (emulator), so the SDK's
        own retry behaviour is exercised. "create call" means one request on the wire."""
        ...

    def inject_start(self, fault: Fault, *, count: int = 1) -> None:
        """Make the next ``count`` start requests (StartInstances, instances.start,
        InstanceAction START) fail with ``fault``, injected where :meth:`inject` injects a
        create's (the simulator: its one fault queue, which a start draws from too)."""
        ...

    def create_requests(self) -> int:
        """How many create requests (RunInstances, instances.insert, LaunchInstance) the
        *emulator* has received so far: counted on its side of the wire, so an SDK-level
        retry underneath the provider's own would show up here."""
        ...

    def instances_with_intent(self, intent_id: str) -> int:
        """How many live (not terminated) instances the *emulator* holds for this intent
        (ground truth, not through the adapter), for the no-duplicate checks."""
        ...

    def user_data_of(self, instance_id: str) -> str:
        """The user data the cloud holds for the instance, decoded (ground truth)."""
        ...

    def placement_of(self, instance_id: str) -> str | None:
        """Where the cloud says the instance is placed, read from the emulator with the
        cloud's own API shape: AWS ``Placement.GroupName``, GCP the names of the instance's
        ``resourcePolicies``, the simulator its group; ``None`` when it is in none. OCI:
        ``"<availability domain>/<fault domain>"`` (every OCI instance has both)."""
        ...

    def placement_objects(self) -> Mapping[str, Mapping[str, str]]:
        """Every placement object the emulator holds for this account, by name, with the
        ownership tags it carries (AWS tags, GCP the JSON in ``description``); OCI: none."""
        ...

    def drop_next_placement_create(self) -> bool:
        """The next placement-object create succeeds at the emulator but its response is
        lost. False (and nothing armed) where no such request exists on a wire (OCI makes no
        object; the simulator has no wire)."""
        ...

    def crash_after_create(self) -> None:
        """The next create succeeds at the emulator but the response is lost (connection
        dropped), so the adapter sees a transient failure: a retry must find, not create."""
        ...

    def object_uri(self, key: str) -> str:
        """A URI (``s3://…``, ``gs://…``, ``oci://…``) in a bucket the emulator holds, that
        the provider's ``copy_object`` may read and write."""
        ...

    def put_object(self, uri: str, data: bytes) -> None:
        """Write an object straight into the emulator (test setup, not through the adapter)."""
        ...

    def get_object(self, uri: str) -> bytes | None:
        """Read an object straight from the emulator; ``None`` when it does not exist."""
        ...
