"""A gang's placement on OCI: one availability domain and one fault domain, no object.

OCI has no placement object to create for this: a gang is kept together by launching all its
nodes into the request's availability domain and into one fault domain chosen from the gang's
key. "Each availability domain contains three fault domains"; without ``faultDomain`` "the
system selects one for you" (oci ``LaunchInstanceDetails.fault_domain``), which could split
the gang, so every node sends the same one. The choice is a digest of the key, not Python's
``hash`` (salted per process): nodes launched by different processes must agree.
"""

from __future__ import annotations

import hashlib

FAULT_DOMAINS = 3  # per availability domain (LaunchInstanceDetails.fault_domain)


def fault_domain(key: str) -> str:
    """``FAULT-DOMAIN-n`` for a gang, the same for each of its nodes."""
    n = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    return f"FAULT-DOMAIN-{1 + n % FAULT_DOMAINS}"


def delete_placement_group(region: str, key: str) -> None:
    """Nothing to release: the fault domain is a launch parameter, not a resource."""
    del region, key
