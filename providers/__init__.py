"""Cloud adapters behind one interface (:class:`providers.base.Provider`).

Only ``providers/<cloud>/`` imports a cloud SDK, and only lazily, so a deployment that uses
one cloud never loads the others. ``providers.sim`` is the simulated cloud used by the demo,
the simulator and the tests; it implements the same interface and passes the same contract
suite as the real adapters."""
