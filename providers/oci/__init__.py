"""Oracle Cloud (OCI) adapter: Core Services compute, Identity, Object Storage through the
``oci`` SDK. The SDK is imported only inside this package's functions, on first use, so a
deployment that never touches OCI never loads it (``providers.registry``).

Same modules as every cloud package (``tests/contract/test_provider_shape.py``): ``provider``
(the composed ``Provider`` and ``build_provider``; the one place retries are applied),
``session`` (identity from a reference, clients, the one call path with the SDK's retries
off), ``instances``, ``offerings``, ``images``, ``objects``, ``quotas``, ``tags``, ``check``,
and ``errors`` (the only place that knows OCI error codes).
"""

from providers.oci.provider import OciProvider, build_provider

__all__ = ["OciProvider", "build_provider"]
