"""Every cloud API operation the adapters call, and the permission each one needs.

One row per SDK method (or REST call) that ``providers/aws``, ``providers/gcp`` and
``providers/oci`` make. ``tests/unit/test_cloud_permissions.py`` scans the adapters' code
and fails when they call an operation missing here (or this lists one they no longer call),
and when the policies in ``docs/operators.md`` grant anything other than these permissions.

Permissions are written the way each cloud's policy language names them:

- AWS: IAM actions (``ec2:RunInstances``); an EC2 action is ``ec2:`` + the operation name.
- GCP: IAM permissions (``compute.instances.create``), for a custom role.
- OCI: a policy verb and resource-type (``manage instances``); a statement grants, per
  resource-type, the strongest verb any operation needs (:func:`oci_statements`).

Sources: AWS "Actions, resources, and condition keys" for EC2, S3, STS and Service Quotas;
the Compute Engine and Cloud Storage API references ("IAM permissions" of each method);
OCI "Details for the Core Services", "Details for Object Storage", "Details for IAM"
(``ListAvailabilityDomains``: COMPARTMENT_INSPECT) and the service limits' policy
(``resource-availability``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from schema.types import Cloud


class Principal(StrEnum):
    """Who needs the permission."""

    ACCOUNT = "account"  # the identity gpucap acts as in the account (role, SA, OCI group)
    DAEMON = "daemon"  # gpucap's own identity, to become the account's (AssumeRole, ...)
    SERVICE = "service"  # the cloud's own service acting for gpucap (OCI Object Storage)


@dataclass(frozen=True)
class Operation:
    cloud: Cloud
    client: str  # boto3 service, compute_v1 client class, OCI client, or REST API
    method: str  # the SDK method called (or "VERB /path" for REST calls)
    api: str  # the cloud's name for the operation
    permissions: tuple[str, ...]
    principal: Principal = Principal.ACCOUNT
    note: str = ""


def _aws(client: str, method: str, api: str, *perms: str, note: str = "") -> Operation:
    return Operation(Cloud.AWS, client, method, api, perms, note=note)


def _ec2(method: str, api: str, *extra: str, note: str = "") -> Operation:
    return _aws("ec2", method, api, f"ec2:{api}", *extra, note=note)


def _gcp(client: str, method: str, api: str, *perms: str, note: str = "") -> Operation:
    return Operation(Cloud.GCP, client, method, api, perms, note=note)


def _oci(client: str, method: str, api: str, *perms: str, note: str = "") -> Operation:
    return Operation(Cloud.OCI, client, method, api, perms, note=note)


_TAGS = "ec2:CreateTags"

OPERATIONS: tuple[Operation, ...] = (
    # --- AWS ---------------------------------------------------------------------------
    Operation(
        Cloud.AWS,
        "sts",
        "assume_role",
        "AssumeRole",
        ("sts:AssumeRole",),
        Principal.DAEMON,
        "customer accounts: on the customer's role, whose trust policy requires the ExternalId",
    ),
    _aws("sts", "get_caller_identity", "GetCallerIdentity", note="needs no permission"),
    _ec2(
        "run_instances",
        "RunInstances",
        _TAGS,
        "iam:PassRole",
        note="instance and volume tagged at launch; PassRole for the nodes' instance_profile",
    ),
    _ec2("describe_instances", "DescribeInstances"),
    _ec2("terminate_instances", "TerminateInstances"),
    _ec2("stop_instances", "StopInstances", note="warm pools"),
    _ec2("start_instances", "StartInstances", note="warm pools"),
    _ec2("create_placement_group", "CreatePlacementGroup", _TAGS, note="gangs"),
    _ec2("delete_placement_group", "DeletePlacementGroup", note="gangs"),
    _ec2("describe_availability_zones", "DescribeAvailabilityZones"),
    _ec2("describe_instance_type_offerings", "DescribeInstanceTypeOfferings"),
    _ec2("describe_account_attributes", "DescribeAccountAttributes", note="quota fallback"),
    _ec2("create_image", "CreateImage", _TAGS, note="baked images"),
    _ec2("create_tags", "CreateTags", note="a baked AMI's snapshots"),
    _ec2("describe_images", "DescribeImages"),
    _ec2("deregister_image", "DeregisterImage", note="baked images"),
    _ec2("delete_snapshot", "DeleteSnapshot", note="baked images"),
    _aws("service-quotas", "get_service_quota", "GetServiceQuota", "servicequotas:GetServiceQuota"),
    _aws("s3", "head_object", "HeadObject", "s3:GetObject", note="staging"),
    _aws("s3", "list_objects_v2", "ListObjectsV2", "s3:ListBucket", note="staging"),
    _aws(
        "s3",
        "copy",
        "CopyObject",
        "s3:GetObject",
        "s3:GetObjectTagging",
        "s3:PutObject",
        "s3:PutObjectTagging",
        "s3:AbortMultipartUpload",
        note="boto3's managed copy (HeadObject, CopyObject or a multipart UploadPartCopy)",
    ),
    _aws(
        "s3",
        "copy_object",
        "CopyObject",
        "s3:GetObject",
        "s3:PutObject",
        "s3:PutObjectTagging",
        note="staging",
    ),
    _aws(
        "s3",
        "create_multipart_upload",
        "CreateMultipartUpload",
        "s3:PutObject",
        "s3:PutObjectTagging",
        note="staging",
    ),
    _aws("s3", "upload_part_copy", "UploadPartCopy", "s3:GetObject", "s3:PutObject"),
    _aws("s3", "complete_multipart_upload", "CompleteMultipartUpload", "s3:PutObject"),
    _aws("s3", "list_multipart_uploads", "ListMultipartUploads", "s3:ListBucketMultipartUploads"),
    _aws("s3", "list_parts", "ListParts", "s3:ListMultipartUploadParts"),
    _aws("s3", "delete_objects", "DeleteObjects", "s3:DeleteObject"),
    _aws("s3", "abort_multipart_upload", "AbortMultipartUpload", "s3:AbortMultipartUpload"),
    # --- GCP ---------------------------------------------------------------------------
    Operation(
        Cloud.GCP,
        "iamcredentials",
        "generateAccessToken",
        "projects.serviceAccounts.generateAccessToken",
        ("iam.serviceAccounts.getAccessToken",),
        Principal.DAEMON,
        "customer projects: on the customer's service account (impersonation)",
    ),
    _gcp(
        "InstancesClient",
        "insert_unary",
        "instances.insert",
        "compute.instances.create",
        "compute.disks.create",
        "compute.images.useReadOnly",
        "compute.instances.setLabels",
        "compute.instances.setMetadata",
        "compute.subnetworks.use",
        "compute.resourcePolicies.use",
        "iam.serviceAccounts.actAs",
        note="boot disk from the image, labels, tags and user-data metadata, default network; "
        "actAs for the nodes' node_service_account",
    ),
    _gcp("InstancesClient", "get", "instances.get", "compute.instances.get"),
    _gcp(
        "InstancesClient", "aggregated_list", "instances.aggregatedList", "compute.instances.list"
    ),
    _gcp("InstancesClient", "delete_unary", "instances.delete", "compute.instances.delete"),
    _gcp("InstancesClient", "stop_unary", "instances.stop", "compute.instances.stop"),
    _gcp("InstancesClient", "start_unary", "instances.start", "compute.instances.start"),
    _gcp("ZoneOperationsClient", "wait", "zoneOperations.wait", "compute.zoneOperations.get"),
    _gcp("RegionOperationsClient", "wait", "regionOperations.wait", "compute.regionOperations.get"),
    _gcp("GlobalOperationsClient", "wait", "globalOperations.wait", "compute.globalOperations.get"),
    _gcp("ResourcePoliciesClient", "get", "resourcePolicies.get", "compute.resourcePolicies.get"),
    _gcp(
        "ResourcePoliciesClient",
        "insert_unary",
        "resourcePolicies.insert",
        "compute.resourcePolicies.create",
        note="gangs",
    ),
    _gcp(
        "ResourcePoliciesClient",
        "delete_unary",
        "resourcePolicies.delete",
        "compute.resourcePolicies.delete",
        note="gangs",
    ),
    _gcp(
        "MachineTypesClient",
        "aggregated_list",
        "machineTypes.aggregatedList",
        "compute.machineTypes.list",
    ),
    _gcp("ZonesClient", "list", "zones.list", "compute.zones.list"),
    _gcp("RegionsClient", "get", "regions.get", "compute.regions.get"),
    _gcp("ProjectsClient", "get", "projects.get", "compute.projects.get"),
    _gcp(
        "ImagesClient",
        "insert_unary",
        "images.insert",
        "compute.images.create",
        "compute.disks.useReadOnly",
        "compute.images.setLabels",
        note="baked images, from the builder's boot disk",
    ),
    _gcp("ImagesClient", "get", "images.get", "compute.images.get"),
    _gcp("ImagesClient", "get_from_family", "images.getFromFamily", "compute.images.getFromFamily"),
    _gcp("ImagesClient", "list", "images.list", "compute.images.list"),
    _gcp("ImagesClient", "delete_unary", "images.delete", "compute.images.delete"),
    _gcp("storage", "GET /storage/v1/b/{}/o", "objects.list", "storage.objects.list"),
    _gcp("storage", "GET /storage/v1/b/{}/o/{}", "objects.get", "storage.objects.get"),
    _gcp(
        "storage",
        "POST /storage/v1/b/{}/o/{}/rewriteTo/b/{}/o/{}",
        "objects.rewrite",
        "storage.objects.get",
        "storage.objects.create",
        "storage.objects.delete",
        note="delete: when the destination object exists",
    ),
    _gcp("storage", "DELETE /storage/v1/b/{}/o/{}", "objects.delete", "storage.objects.delete"),
    # --- OCI ---------------------------------------------------------------------------
    _oci(
        "compute",
        "launch_instance",
        "LaunchInstance",
        "manage instances",
        "read instance-images",
        "use vnics",
        "use subnets",
        "use compute-capacity-reservations",
        note="compute-capacity-reservations: a commitment's reservation",
    ),
    _oci("compute", "get_instance", "GetInstance", "read instances"),
    _oci("compute", "list_instances", "ListInstances", "read instances"),
    _oci("compute", "instance_action", "InstanceAction", "use instances", note="warm pools"),
    _oci(
        "compute",
        "terminate_instance",
        "TerminateInstance",
        "manage instances",
        "use vnics",
        "use subnets",
    ),
    _oci(
        "compute",
        "list_vnic_attachments",
        "ListVnicAttachments",
        "inspect vnic-attachments",
        "inspect instances",
    ),
    _oci("compute", "list_shapes", "ListShapes", "inspect instances"),
    _oci(
        "compute",
        "create_compute_capacity_report",
        "CreateComputeCapacityReport",
        "manage compute-capacity-reports",
    ),
    _oci("compute", "list_images", "ListImages", "inspect instance-images"),
    _oci("compute", "get_image", "GetImage", "inspect instance-images"),
    _oci(
        "compute",
        "create_image",
        "CreateImage",
        "manage instance-images",
        "use instances",
        note="baked images",
    ),
    _oci("compute", "delete_image", "DeleteImage", "manage instance-images", note="baked images"),
    _oci("network", "list_subnets", "ListSubnets", "inspect subnets"),
    _oci("network", "list_private_ips", "ListPrivateIps", "inspect private-ips"),
    _oci(
        "identity",
        "list_availability_domains",
        "ListAvailabilityDomains",
        "inspect compartments",
    ),
    _oci("limits", "list_limit_values", "ListLimitValues", "inspect resource-availability"),
    _oci(
        "limits",
        "get_resource_availability",
        "GetResourceAvailability",
        "read resource-availability",
    ),
    _oci("object_storage", "head_object", "HeadObject", "inspect objects", note="staging"),
    _oci("object_storage", "list_objects", "ListObjects", "inspect objects", note="staging"),
    _oci(
        "object_storage",
        "copy_object",
        "CopyObject",
        "read objects",
        "manage objects",
        note="read the origin, create the copy",
    ),
    Operation(
        Cloud.OCI,
        "object_storage",
        "copy_object",
        "CopyObject",
        ("manage object-family",),
        Principal.SERVICE,
        "Object Storage copies on the caller's behalf: objectstorage-<region> of the origin",
    ),
    _oci("object_storage", "get_work_request", "GetWorkRequest", "read objects"),
    _oci("object_storage", "delete_object", "DeleteObject", "manage objects", note="staging"),
)

# OCI resource-types whose statements name the tenancy: compartments are inspected from
# the tenancy down, and service limits are the tenancy's.
OCI_TENANCY_SCOPED = frozenset({"compartments", "resource-availability"})
_OCI_VERBS = ("inspect", "read", "use", "manage")


def operations(cloud: Cloud, principal: Principal | None = None) -> list[Operation]:
    return [
        op
        for op in OPERATIONS
        if op.cloud == cloud and (principal is None or op.principal == principal)
    ]


def permissions(cloud: Cloud, principal: Principal = Principal.ACCOUNT) -> set[str]:
    """Every permission ``principal`` needs on ``cloud``."""
    return {p for op in operations(cloud, principal) for p in op.permissions}


def oci_statements(principal: Principal = Principal.ACCOUNT) -> list[tuple[str, str, str]]:
    """(verb, resource-type, "tenancy" | "compartment"): per resource-type, the strongest
    verb any operation needs (a verb includes the weaker ones)."""
    best: dict[str, str] = {}
    for perm in permissions(Cloud.OCI, principal):
        verb, resource = perm.split(" ", 1)
        if verb not in _OCI_VERBS:
            raise ValueError(f"not an OCI verb: {perm!r}")
        if resource not in best or _OCI_VERBS.index(verb) > _OCI_VERBS.index(best[resource]):
            best[resource] = verb
    return sorted(
        (verb, res, "tenancy" if res in OCI_TENANCY_SCOPED else "compartment")
        for res, verb in best.items()
    )
