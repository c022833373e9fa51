"""The GCP adapter (google-cloud-compute, REST transport).

Same modules as every cloud package (``tests/contract/test_provider_shape.py``): ``provider``
(the composed ``Provider`` and ``build_provider``; the one place retries are applied),
``session`` (credentials incl. service-account impersonation, REST clients, our own
operation polling), ``instances`` (find-or-create, describe, list, terminate),
``offerings``, ``images``, ``objects`` (GCS server-side copy), ``quotas`` (regional GPU quota
headroom), ``tags`` (names, labels, request ids derived from the intent), ``check``, and
``errors`` (the only place that knows GCP error codes).

Importing this package loads no Google SDK; building a provider does, on first use, so a
deployment that never uses GCP never imports google-cloud-compute.
"""

from providers.gcp.provider import GcpProvider, build_provider

__all__ = ["GcpProvider", "build_provider"]
