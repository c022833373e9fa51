"""gpucap contracts: policy and fleet file models, the GPU shape catalog, shared value types
and the gRPC API (``gpucap.v1``). Nothing in this package does I/O beyond parsing text it is
handed, and it imports no other gpucap package."""
