"""A simulated cloud behind the same :class:`providers.base.Provider` interface the real
adapters implement. The demo, the daemon's end-to-end tests and the contract suite use it.

:class:`SimCloud` is the world: every region and zone of the catalog's three clouds, a
capacity limit per (cloud, region, instance type), instances, images, objects, and fault
injection. :class:`SimProvider` is one account's view of it: it sees and touches only the
instances its account created, exactly as a real cloud account would.
"""

from providers.sim.cloud import SimCloud, SimTimings
from providers.sim.provider import SimProvider

__all__ = ["SimCloud", "SimProvider", "SimTimings"]
