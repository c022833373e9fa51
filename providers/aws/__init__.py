"""The AWS adapter: one account (gpucap's shared one or a customer's, via an assumed role)
behind :class:`providers.base.Provider`.

Same modules as every cloud package (``tests/contract/test_provider_shape.py``): ``provider``
(the composed ``Provider`` and ``build_provider``; the one place retries are applied),
``session`` (credentials, fail-fast clients), ``instances``, ``offerings``, ``images``,
``objects``, ``quotas``, ``tags``, ``check``, and ``errors`` (the only place that knows AWS
error codes). boto3 is imported only when a client is first made, so importing this package
is cheap.
"""

from providers.aws.provider import AwsProvider, build_provider

__all__ = ["AwsProvider", "build_provider"]
