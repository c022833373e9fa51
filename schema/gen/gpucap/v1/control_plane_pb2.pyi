import datetime

from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PolicyProblem(_message.Message):
    __slots__ = ("file", "line", "column", "field", "reason")
    FILE_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    file: str
    line: int
    column: int
    field: str
    reason: str
    def __init__(self, file: _Optional[str] = ..., line: _Optional[int] = ..., column: _Optional[int] = ..., field: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class PolicyProblems(_message.Message):
    __slots__ = ("problems",)
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    problems: _containers.RepeatedCompositeFieldContainer[PolicyProblem]
    def __init__(self, problems: _Optional[_Iterable[_Union[PolicyProblem, _Mapping]]] = ...) -> None: ...

class ValidatePolicyRequest(_message.Message):
    __slots__ = ("yaml", "source")
    YAML_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    yaml: str
    source: str
    def __init__(self, yaml: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class ValidatePolicyResponse(_message.Message):
    __slots__ = ("valid", "problems", "customer", "sha256")
    VALID_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    problems: _containers.RepeatedCompositeFieldContainer[PolicyProblem]
    customer: str
    sha256: str
    def __init__(self, valid: _Optional[bool] = ..., problems: _Optional[_Iterable[_Union[PolicyProblem, _Mapping]]] = ..., customer: _Optional[str] = ..., sha256: _Optional[str] = ...) -> None: ...

class ApplyPolicyRequest(_message.Message):
    __slots__ = ("yaml", "source", "applied_by", "allow_deletes", "dry_run")
    YAML_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    APPLIED_BY_FIELD_NUMBER: _ClassVar[int]
    ALLOW_DELETES_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    yaml: str
    source: str
    applied_by: str
    allow_deletes: bool
    dry_run: bool
    def __init__(self, yaml: _Optional[str] = ..., source: _Optional[str] = ..., applied_by: _Optional[str] = ..., allow_deletes: _Optional[bool] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class ApplyPolicyResponse(_message.Message):
    __slots__ = ("policy", "changed", "diff", "refusals")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    DIFF_FIELD_NUMBER: _ClassVar[int]
    REFUSALS_FIELD_NUMBER: _ClassVar[int]
    policy: PolicyVersion
    changed: bool
    diff: PolicyDiff
    refusals: _containers.RepeatedCompositeFieldContainer[PolicyProblem]
    def __init__(self, policy: _Optional[_Union[PolicyVersion, _Mapping]] = ..., changed: _Optional[bool] = ..., diff: _Optional[_Union[PolicyDiff, _Mapping]] = ..., refusals: _Optional[_Iterable[_Union[PolicyProblem, _Mapping]]] = ...) -> None: ...

class PolicyFieldChange(_message.Message):
    __slots__ = ("path", "before", "after")
    PATH_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    path: str
    before: str
    after: str
    def __init__(self, path: _Optional[str] = ..., before: _Optional[str] = ..., after: _Optional[str] = ...) -> None: ...

class PolicyChange(_message.Message):
    __slots__ = ("kind", "name", "action", "fields", "detail", "drains")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    DRAINS_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    action: str
    fields: _containers.RepeatedCompositeFieldContainer[PolicyFieldChange]
    detail: str
    drains: bool
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ..., action: _Optional[str] = ..., fields: _Optional[_Iterable[_Union[PolicyFieldChange, _Mapping]]] = ..., detail: _Optional[str] = ..., drains: _Optional[bool] = ...) -> None: ...

class PolicyDiff(_message.Message):
    __slots__ = ("changes",)
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    changes: _containers.RepeatedCompositeFieldContainer[PolicyChange]
    def __init__(self, changes: _Optional[_Iterable[_Union[PolicyChange, _Mapping]]] = ...) -> None: ...

class GetPolicyRequest(_message.Message):
    __slots__ = ("customer", "version")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    customer: str
    version: int
    def __init__(self, customer: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class PolicyVersion(_message.Message):
    __slots__ = ("customer", "version", "sha256", "applied_by", "applied_at", "source", "yaml", "active")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    APPLIED_BY_FIELD_NUMBER: _ClassVar[int]
    APPLIED_AT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    YAML_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    customer: str
    version: int
    sha256: str
    applied_by: str
    applied_at: _timestamp_pb2.Timestamp
    source: str
    yaml: str
    active: bool
    def __init__(self, customer: _Optional[str] = ..., version: _Optional[int] = ..., sha256: _Optional[str] = ..., applied_by: _Optional[str] = ..., applied_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., source: _Optional[str] = ..., yaml: _Optional[str] = ..., active: _Optional[bool] = ...) -> None: ...

class ModelSpec(_message.Message):
    __slots__ = ("name", "shapes", "min_replicas", "max_replicas", "target", "latency_slo_ms", "clouds", "regions", "priority", "image", "weights", "scale_to_zero_grace_s", "scaling", "runtime", "staging", "baked_image", "warm_pool", "health")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHAPES_FIELD_NUMBER: _ClassVar[int]
    MIN_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    MAX_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    LATENCY_SLO_MS_FIELD_NUMBER: _ClassVar[int]
    CLOUDS_FIELD_NUMBER: _ClassVar[int]
    REGIONS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    SCALE_TO_ZERO_GRACE_S_FIELD_NUMBER: _ClassVar[int]
    SCALING_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    STAGING_FIELD_NUMBER: _ClassVar[int]
    BAKED_IMAGE_FIELD_NUMBER: _ClassVar[int]
    WARM_POOL_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    name: str
    shapes: _containers.RepeatedCompositeFieldContainer[ShapeOption]
    min_replicas: int
    max_replicas: int
    target: ScalingTarget
    latency_slo_ms: int
    clouds: _containers.RepeatedScalarFieldContainer[str]
    regions: _containers.RepeatedScalarFieldContainer[str]
    priority: int
    image: str
    weights: Weights
    scale_to_zero_grace_s: float
    scaling: ScalingBehavior
    runtime: Runtime
    staging: Staging
    baked_image: BakedImage
    warm_pool: WarmPool
    health: Health
    def __init__(self, name: _Optional[str] = ..., shapes: _Optional[_Iterable[_Union[ShapeOption, _Mapping]]] = ..., min_replicas: _Optional[int] = ..., max_replicas: _Optional[int] = ..., target: _Optional[_Union[ScalingTarget, _Mapping]] = ..., latency_slo_ms: _Optional[int] = ..., clouds: _Optional[_Iterable[str]] = ..., regions: _Optional[_Iterable[str]] = ..., priority: _Optional[int] = ..., image: _Optional[str] = ..., weights: _Optional[_Union[Weights, _Mapping]] = ..., scale_to_zero_grace_s: _Optional[float] = ..., scaling: _Optional[_Union[ScalingBehavior, _Mapping]] = ..., runtime: _Optional[_Union[Runtime, _Mapping]] = ..., staging: _Optional[_Union[Staging, _Mapping]] = ..., baked_image: _Optional[_Union[BakedImage, _Mapping]] = ..., warm_pool: _Optional[_Union[WarmPool, _Mapping]] = ..., health: _Optional[_Union[Health, _Mapping]] = ...) -> None: ...

class Staging(_message.Message):
    __slots__ = ("enabled", "regions_ahead")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    REGIONS_AHEAD_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    regions_ahead: int
    def __init__(self, enabled: _Optional[bool] = ..., regions_ahead: _Optional[int] = ...) -> None: ...

class BakedImage(_message.Message):
    __slots__ = ("enabled",)
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    def __init__(self, enabled: _Optional[bool] = ...) -> None: ...

class WarmPool(_message.Message):
    __slots__ = ("max_nodes", "mode", "disk_gb")
    MAX_NODES_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    DISK_GB_FIELD_NUMBER: _ClassVar[int]
    max_nodes: int
    mode: str
    disk_gb: int
    def __init__(self, max_nodes: _Optional[int] = ..., mode: _Optional[str] = ..., disk_gb: _Optional[int] = ...) -> None: ...

class Health(_message.Message):
    __slots__ = ("failure_threshold", "timeout_s", "drain_timeout_s")
    FAILURE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    DRAIN_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    failure_threshold: int
    timeout_s: float
    drain_timeout_s: float
    def __init__(self, failure_threshold: _Optional[int] = ..., timeout_s: _Optional[float] = ..., drain_timeout_s: _Optional[float] = ...) -> None: ...

class Runtime(_message.Message):
    __slots__ = ("engine", "image", "args", "env", "port", "tensor_parallel", "pipeline_parallel")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    TENSOR_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    engine: str
    image: str
    args: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.ScalarMap[str, str]
    port: int
    tensor_parallel: int
    pipeline_parallel: int
    def __init__(self, engine: _Optional[str] = ..., image: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ..., port: _Optional[int] = ..., tensor_parallel: _Optional[int] = ..., pipeline_parallel: _Optional[int] = ...) -> None: ...

class ScalingBehavior(_message.Message):
    __slots__ = ("scale_up_delay_s", "scale_down_delay_s", "max_scale_up_rate", "max_scale_down_rate")
    SCALE_UP_DELAY_S_FIELD_NUMBER: _ClassVar[int]
    SCALE_DOWN_DELAY_S_FIELD_NUMBER: _ClassVar[int]
    MAX_SCALE_UP_RATE_FIELD_NUMBER: _ClassVar[int]
    MAX_SCALE_DOWN_RATE_FIELD_NUMBER: _ClassVar[int]
    scale_up_delay_s: float
    scale_down_delay_s: float
    max_scale_up_rate: float
    max_scale_down_rate: float
    def __init__(self, scale_up_delay_s: _Optional[float] = ..., scale_down_delay_s: _Optional[float] = ..., max_scale_up_rate: _Optional[float] = ..., max_scale_down_rate: _Optional[float] = ...) -> None: ...

class ShapeOption(_message.Message):
    __slots__ = ("shape", "max_concurrency", "tokens_per_s")
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_S_FIELD_NUMBER: _ClassVar[int]
    shape: str
    max_concurrency: int
    tokens_per_s: float
    def __init__(self, shape: _Optional[str] = ..., max_concurrency: _Optional[int] = ..., tokens_per_s: _Optional[float] = ...) -> None: ...

class ScalingTarget(_message.Message):
    __slots__ = ("metric", "utilization")
    METRIC_FIELD_NUMBER: _ClassVar[int]
    UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    metric: str
    utilization: float
    def __init__(self, metric: _Optional[str] = ..., utilization: _Optional[float] = ...) -> None: ...

class Weights(_message.Message):
    __slots__ = ("uri", "size_gb", "mirrors")
    URI_FIELD_NUMBER: _ClassVar[int]
    SIZE_GB_FIELD_NUMBER: _ClassVar[int]
    MIRRORS_FIELD_NUMBER: _ClassVar[int]
    uri: str
    size_gb: float
    mirrors: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, uri: _Optional[str] = ..., size_gb: _Optional[float] = ..., mirrors: _Optional[_Iterable[str]] = ...) -> None: ...

class Model(_message.Message):
    __slots__ = ("customer", "name", "source", "spec", "desired_replicas", "reason", "ready_replicas", "starting_replicas", "provisioning_replicas", "draining_replicas", "pinned_replicas", "paused", "created_at", "updated_at", "deleted_at", "replicas_by_state")
    class ReplicasByStateEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    DESIRED_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    READY_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    STARTING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    PROVISIONING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    DRAINING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    PINNED_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    DELETED_AT_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_BY_STATE_FIELD_NUMBER: _ClassVar[int]
    customer: str
    name: str
    source: str
    spec: ModelSpec
    desired_replicas: int
    reason: str
    ready_replicas: int
    starting_replicas: int
    provisioning_replicas: int
    draining_replicas: int
    pinned_replicas: int
    paused: bool
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    deleted_at: _timestamp_pb2.Timestamp
    replicas_by_state: _containers.ScalarMap[str, int]
    def __init__(self, customer: _Optional[str] = ..., name: _Optional[str] = ..., source: _Optional[str] = ..., spec: _Optional[_Union[ModelSpec, _Mapping]] = ..., desired_replicas: _Optional[int] = ..., reason: _Optional[str] = ..., ready_replicas: _Optional[int] = ..., starting_replicas: _Optional[int] = ..., provisioning_replicas: _Optional[int] = ..., draining_replicas: _Optional[int] = ..., pinned_replicas: _Optional[int] = ..., paused: _Optional[bool] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., deleted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., replicas_by_state: _Optional[_Mapping[str, int]] = ...) -> None: ...

class DeployModelRequest(_message.Message):
    __slots__ = ("customer", "spec")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    customer: str
    spec: ModelSpec
    def __init__(self, customer: _Optional[str] = ..., spec: _Optional[_Union[ModelSpec, _Mapping]] = ...) -> None: ...

class UpdateModelRequest(_message.Message):
    __slots__ = ("customer", "spec", "update_mask")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    customer: str
    spec: ModelSpec
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, customer: _Optional[str] = ..., spec: _Optional[_Union[ModelSpec, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class DeleteModelRequest(_message.Message):
    __slots__ = ("customer", "name")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    customer: str
    name: str
    def __init__(self, customer: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class GetModelRequest(_message.Message):
    __slots__ = ("customer", "name")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    customer: str
    name: str
    def __init__(self, customer: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ("customer", "include_deleted", "page_size", "page_token")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_DELETED_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    customer: str
    include_deleted: bool
    page_size: int
    page_token: str
    def __init__(self, customer: _Optional[str] = ..., include_deleted: _Optional[bool] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models", "next_page_token")
    MODELS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[Model]
    next_page_token: str
    def __init__(self, models: _Optional[_Iterable[_Union[Model, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PinModelRequest(_message.Message):
    __slots__ = ("customer", "name", "replicas", "reason")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    customer: str
    name: str
    replicas: int
    reason: str
    def __init__(self, customer: _Optional[str] = ..., name: _Optional[str] = ..., replicas: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class PauseModelRequest(_message.Message):
    __slots__ = ("customer", "name", "paused", "reason")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    customer: str
    name: str
    paused: bool
    reason: str
    def __init__(self, customer: _Optional[str] = ..., name: _Optional[str] = ..., paused: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ("id", "customer", "model", "replica_id", "pool_id", "account", "cloud", "region", "zone", "instance_type", "instance_id", "state", "error", "attempts", "pending_at", "provisioning_at", "running_at", "ready_at", "draining_at", "terminating_at", "terminated_at", "failed_at", "private_ip", "probe_failures", "phases", "retiring_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    CLOUD_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    ZONE_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PENDING_AT_FIELD_NUMBER: _ClassVar[int]
    PROVISIONING_AT_FIELD_NUMBER: _ClassVar[int]
    RUNNING_AT_FIELD_NUMBER: _ClassVar[int]
    READY_AT_FIELD_NUMBER: _ClassVar[int]
    DRAINING_AT_FIELD_NUMBER: _ClassVar[int]
    TERMINATING_AT_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_AT_FIELD_NUMBER: _ClassVar[int]
    FAILED_AT_FIELD_NUMBER: _ClassVar[int]
    PRIVATE_IP_FIELD_NUMBER: _ClassVar[int]
    PROBE_FAILURES_FIELD_NUMBER: _ClassVar[int]
    PHASES_FIELD_NUMBER: _ClassVar[int]
    RETIRING_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    customer: str
    model: str
    replica_id: str
    pool_id: str
    account: str
    cloud: str
    region: str
    zone: str
    instance_type: str
    instance_id: str
    state: str
    error: str
    attempts: int
    pending_at: _timestamp_pb2.Timestamp
    provisioning_at: _timestamp_pb2.Timestamp
    running_at: _timestamp_pb2.Timestamp
    ready_at: _timestamp_pb2.Timestamp
    draining_at: _timestamp_pb2.Timestamp
    terminating_at: _timestamp_pb2.Timestamp
    terminated_at: _timestamp_pb2.Timestamp
    failed_at: _timestamp_pb2.Timestamp
    private_ip: str
    probe_failures: int
    phases: _containers.RepeatedCompositeFieldContainer[BootPhase]
    retiring_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., customer: _Optional[str] = ..., model: _Optional[str] = ..., replica_id: _Optional[str] = ..., pool_id: _Optional[str] = ..., account: _Optional[str] = ..., cloud: _Optional[str] = ..., region: _Optional[str] = ..., zone: _Optional[str] = ..., instance_type: _Optional[str] = ..., instance_id: _Optional[str] = ..., state: _Optional[str] = ..., error: _Optional[str] = ..., attempts: _Optional[int] = ..., pending_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., provisioning_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., running_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ready_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., draining_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., terminating_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., terminated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., failed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., private_ip: _Optional[str] = ..., probe_failures: _Optional[int] = ..., phases: _Optional[_Iterable[_Union[BootPhase, _Mapping]]] = ..., retiring_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class BootPhase(_message.Message):
    __slots__ = ("phase", "at", "detail")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    phase: str
    at: _timestamp_pb2.Timestamp
    detail: str
    def __init__(self, phase: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., detail: _Optional[str] = ...) -> None: ...

class ListNodesRequest(_message.Message):
    __slots__ = ("customer", "model", "states", "pool_id", "include_terminal", "page_size", "page_token", "node_id")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_TERMINAL_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    customer: str
    model: str
    states: _containers.RepeatedScalarFieldContainer[str]
    pool_id: str
    include_terminal: bool
    page_size: int
    page_token: str
    node_id: str
    def __init__(self, customer: _Optional[str] = ..., model: _Optional[str] = ..., states: _Optional[_Iterable[str]] = ..., pool_id: _Optional[str] = ..., include_terminal: _Optional[bool] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., node_id: _Optional[str] = ...) -> None: ...

class ListNodesResponse(_message.Message):
    __slots__ = ("nodes", "next_page_token")
    NODES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    next_page_token: str
    def __init__(self, nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class Pool(_message.Message):
    __slots__ = ("id", "customer", "account", "cloud", "owner", "region", "instance_type", "gpu_shape", "tier", "price_usd_per_hour", "committed", "reservation", "cordoned", "unavailable_until", "unavailable_reason", "active", "nodes_by_state", "zones", "zone_blocks")
    class NodesByStateEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    CLOUD_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    GPU_SHAPE_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    PRICE_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    RESERVATION_FIELD_NUMBER: _ClassVar[int]
    CORDONED_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_UNTIL_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_REASON_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    NODES_BY_STATE_FIELD_NUMBER: _ClassVar[int]
    ZONES_FIELD_NUMBER: _ClassVar[int]
    ZONE_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    id: str
    customer: str
    account: str
    cloud: str
    owner: str
    region: str
    instance_type: str
    gpu_shape: str
    tier: str
    price_usd_per_hour: float
    committed: int
    reservation: str
    cordoned: bool
    unavailable_until: _timestamp_pb2.Timestamp
    unavailable_reason: str
    active: bool
    nodes_by_state: _containers.ScalarMap[str, int]
    zones: _containers.RepeatedScalarFieldContainer[str]
    zone_blocks: _containers.RepeatedCompositeFieldContainer[ZoneBlock]
    def __init__(self, id: _Optional[str] = ..., customer: _Optional[str] = ..., account: _Optional[str] = ..., cloud: _Optional[str] = ..., owner: _Optional[str] = ..., region: _Optional[str] = ..., instance_type: _Optional[str] = ..., gpu_shape: _Optional[str] = ..., tier: _Optional[str] = ..., price_usd_per_hour: _Optional[float] = ..., committed: _Optional[int] = ..., reservation: _Optional[str] = ..., cordoned: _Optional[bool] = ..., unavailable_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., unavailable_reason: _Optional[str] = ..., active: _Optional[bool] = ..., nodes_by_state: _Optional[_Mapping[str, int]] = ..., zones: _Optional[_Iterable[str]] = ..., zone_blocks: _Optional[_Iterable[_Union[ZoneBlock, _Mapping]]] = ...) -> None: ...

class ZoneBlock(_message.Message):
    __slots__ = ("zone", "until", "reason", "source")
    ZONE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    zone: str
    until: _timestamp_pb2.Timestamp
    reason: str
    source: str
    def __init__(self, zone: _Optional[str] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class ListPoolsRequest(_message.Message):
    __slots__ = ("customer", "cloud", "include_inactive", "page_size", "page_token")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    CLOUD_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INACTIVE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    customer: str
    cloud: str
    include_inactive: bool
    page_size: int
    page_token: str
    def __init__(self, customer: _Optional[str] = ..., cloud: _Optional[str] = ..., include_inactive: _Optional[bool] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListPoolsResponse(_message.Message):
    __slots__ = ("pools", "next_page_token")
    POOLS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    pools: _containers.RepeatedCompositeFieldContainer[Pool]
    next_page_token: str
    def __init__(self, pools: _Optional[_Iterable[_Union[Pool, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ExplainModelRequest(_message.Message):
    __slots__ = ("customer", "model")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    customer: str
    model: str
    def __init__(self, customer: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class ColdStartPhase(_message.Message):
    __slots__ = ("name", "seconds", "source", "samples")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    name: str
    seconds: float
    source: str
    samples: int
    def __init__(self, name: _Optional[str] = ..., seconds: _Optional[float] = ..., source: _Optional[str] = ..., samples: _Optional[int] = ...) -> None: ...

class PoolEstimate(_message.Message):
    __slots__ = ("pool_id", "cloud", "region", "instance_type", "gpu_shape", "tier", "price_usd_per_hour", "expected_ready_s", "source", "launches", "phases", "cordoned", "blocked_until", "nodes_in_use")
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    CLOUD_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    GPU_SHAPE_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    PRICE_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_READY_S_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    LAUNCHES_FIELD_NUMBER: _ClassVar[int]
    PHASES_FIELD_NUMBER: _ClassVar[int]
    CORDONED_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    NODES_IN_USE_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    cloud: str
    region: str
    instance_type: str
    gpu_shape: str
    tier: str
    price_usd_per_hour: float
    expected_ready_s: float
    source: str
    launches: int
    phases: _containers.RepeatedCompositeFieldContainer[ColdStartPhase]
    cordoned: bool
    blocked_until: _timestamp_pb2.Timestamp
    nodes_in_use: int
    def __init__(self, pool_id: _Optional[str] = ..., cloud: _Optional[str] = ..., region: _Optional[str] = ..., instance_type: _Optional[str] = ..., gpu_shape: _Optional[str] = ..., tier: _Optional[str] = ..., price_usd_per_hour: _Optional[float] = ..., expected_ready_s: _Optional[float] = ..., source: _Optional[str] = ..., launches: _Optional[int] = ..., phases: _Optional[_Iterable[_Union[ColdStartPhase, _Mapping]]] = ..., cordoned: _Optional[bool] = ..., blocked_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., nodes_in_use: _Optional[int] = ...) -> None: ...

class ExplainModelResponse(_message.Message):
    __slots__ = ("customer", "model", "desired_replicas", "pools", "excluded")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DESIRED_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    EXCLUDED_FIELD_NUMBER: _ClassVar[int]
    customer: str
    model: str
    desired_replicas: int
    pools: _containers.RepeatedCompositeFieldContainer[PoolEstimate]
    excluded: _containers.RepeatedCompositeFieldContainer[PoolExclusion]
    def __init__(self, customer: _Optional[str] = ..., model: _Optional[str] = ..., desired_replicas: _Optional[int] = ..., pools: _Optional[_Iterable[_Union[PoolEstimate, _Mapping]]] = ..., excluded: _Optional[_Iterable[_Union[PoolExclusion, _Mapping]]] = ...) -> None: ...

class PoolExclusion(_message.Message):
    __slots__ = ("pool_id", "filter")
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    filter: str
    def __init__(self, pool_id: _Optional[str] = ..., filter: _Optional[str] = ...) -> None: ...

class CordonPoolRequest(_message.Message):
    __slots__ = ("pool_id", "cordoned", "reason")
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    CORDONED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    pool_id: str
    cordoned: bool
    reason: str
    def __init__(self, pool_id: _Optional[str] = ..., cordoned: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class PoolSelector(_message.Message):
    __slots__ = ("customer", "cloud", "region", "account")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    CLOUD_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    customer: str
    cloud: str
    region: str
    account: str
    def __init__(self, customer: _Optional[str] = ..., cloud: _Optional[str] = ..., region: _Optional[str] = ..., account: _Optional[str] = ...) -> None: ...

class CordonPoolsRequest(_message.Message):
    __slots__ = ("selector", "cordoned", "reason")
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    CORDONED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    selector: PoolSelector
    cordoned: bool
    reason: str
    def __init__(self, selector: _Optional[_Union[PoolSelector, _Mapping]] = ..., cordoned: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class CordonPoolsResponse(_message.Message):
    __slots__ = ("changed", "matched")
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    changed: _containers.RepeatedCompositeFieldContainer[Pool]
    matched: int
    def __init__(self, changed: _Optional[_Iterable[_Union[Pool, _Mapping]]] = ..., matched: _Optional[int] = ...) -> None: ...

class ListEndpointsRequest(_message.Message):
    __slots__ = ("customer", "model", "page_size", "page_token")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    customer: str
    model: str
    page_size: int
    page_token: str
    def __init__(self, customer: _Optional[str] = ..., model: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class Endpoint(_message.Message):
    __slots__ = ("customer", "model", "replica_id", "node_id", "pool_id", "address", "port", "engine", "metrics_path")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    METRICS_PATH_FIELD_NUMBER: _ClassVar[int]
    customer: str
    model: str
    replica_id: str
    node_id: str
    pool_id: str
    address: str
    port: int
    engine: str
    metrics_path: str
    def __init__(self, customer: _Optional[str] = ..., model: _Optional[str] = ..., replica_id: _Optional[str] = ..., node_id: _Optional[str] = ..., pool_id: _Optional[str] = ..., address: _Optional[str] = ..., port: _Optional[int] = ..., engine: _Optional[str] = ..., metrics_path: _Optional[str] = ...) -> None: ...

class ListEndpointsResponse(_message.Message):
    __slots__ = ("endpoints", "next_page_token")
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    endpoints: _containers.RepeatedCompositeFieldContainer[Endpoint]
    next_page_token: str
    def __init__(self, endpoints: _Optional[_Iterable[_Union[Endpoint, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListStagingRequest(_message.Message):
    __slots__ = ("customer", "model", "page_size", "page_token")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    customer: str
    model: str
    page_size: int
    page_token: str
    def __init__(self, customer: _Optional[str] = ..., model: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class WeightCopy(_message.Message):
    __slots__ = ("customer", "model", "account", "cloud", "region", "state", "reason", "source_uri", "dest_uri", "bytes_total", "bytes_done", "progress", "objects", "objects_done", "attempts", "error", "usd_per_month", "started_at", "ready_at", "verified_at", "last_used_at", "retry_at")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    CLOUD_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URI_FIELD_NUMBER: _ClassVar[int]
    DEST_URI_FIELD_NUMBER: _ClassVar[int]
    BYTES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    BYTES_DONE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_DONE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    USD_PER_MONTH_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    READY_AT_FIELD_NUMBER: _ClassVar[int]
    VERIFIED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_AT_FIELD_NUMBER: _ClassVar[int]
    RETRY_AT_FIELD_NUMBER: _ClassVar[int]
    customer: str
    model: str
    account: str
    cloud: str
    region: str
    state: str
    reason: str
    source_uri: str
    dest_uri: str
    bytes_total: int
    bytes_done: int
    progress: float
    objects: int
    objects_done: int
    attempts: int
    error: str
    usd_per_month: float
    started_at: _timestamp_pb2.Timestamp
    ready_at: _timestamp_pb2.Timestamp
    verified_at: _timestamp_pb2.Timestamp
    last_used_at: _timestamp_pb2.Timestamp
    retry_at: _timestamp_pb2.Timestamp
    def __init__(self, customer: _Optional[str] = ..., model: _Optional[str] = ..., account: _Optional[str] = ..., cloud: _Optional[str] = ..., region: _Optional[str] = ..., state: _Optional[str] = ..., reason: _Optional[str] = ..., source_uri: _Optional[str] = ..., dest_uri: _Optional[str] = ..., bytes_total: _Optional[int] = ..., bytes_done: _Optional[int] = ..., progress: _Optional[float] = ..., objects: _Optional[int] = ..., objects_done: _Optional[int] = ..., attempts: _Optional[int] = ..., error: _Optional[str] = ..., usd_per_month: _Optional[float] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ready_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., verified_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_used_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., retry_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class StagingSite(_message.Message):
    __slots__ = ("customer", "account", "cloud", "region", "prefix_uri", "budget_bytes", "used_bytes", "usd_per_gb_month", "usd_per_month")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    CLOUD_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    PREFIX_URI_FIELD_NUMBER: _ClassVar[int]
    BUDGET_BYTES_FIELD_NUMBER: _ClassVar[int]
    USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    USD_PER_GB_MONTH_FIELD_NUMBER: _ClassVar[int]
    USD_PER_MONTH_FIELD_NUMBER: _ClassVar[int]
    customer: str
    account: str
    cloud: str
    region: str
    prefix_uri: str
    budget_bytes: int
    used_bytes: int
    usd_per_gb_month: float
    usd_per_month: float
    def __init__(self, customer: _Optional[str] = ..., account: _Optional[str] = ..., cloud: _Optional[str] = ..., region: _Optional[str] = ..., prefix_uri: _Optional[str] = ..., budget_bytes: _Optional[int] = ..., used_bytes: _Optional[int] = ..., usd_per_gb_month: _Optional[float] = ..., usd_per_month: _Optional[float] = ...) -> None: ...

class ListStagingResponse(_message.Message):
    __slots__ = ("copies", "sites", "next_page_token")
    COPIES_FIELD_NUMBER: _ClassVar[int]
    SITES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    copies: _containers.RepeatedCompositeFieldContainer[WeightCopy]
    sites: _containers.RepeatedCompositeFieldContainer[StagingSite]
    next_page_token: str
    def __init__(self, copies: _Optional[_Iterable[_Union[WeightCopy, _Mapping]]] = ..., sites: _Optional[_Iterable[_Union[StagingSite, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListImagesRequest(_message.Message):
    __slots__ = ("customer", "cloud", "region", "page_size", "page_token")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    CLOUD_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    customer: str
    cloud: str
    region: str
    page_size: int
    page_token: str
    def __init__(self, customer: _Optional[str] = ..., cloud: _Optional[str] = ..., region: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class MachineImage(_message.Message):
    __slots__ = ("id", "customer", "account", "cloud", "region", "runtime_image", "image_id", "image_name", "state", "version", "source_digest", "instance_type", "in_use", "superseded_by", "error", "age_s", "created_at", "built_at", "ready_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    CLOUD_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_IMAGE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_ID_FIELD_NUMBER: _ClassVar[int]
    IMAGE_NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_DIGEST_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    IN_USE_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_BY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    AGE_S_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    BUILT_AT_FIELD_NUMBER: _ClassVar[int]
    READY_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    customer: str
    account: str
    cloud: str
    region: str
    runtime_image: str
    image_id: str
    image_name: str
    state: str
    version: int
    source_digest: str
    instance_type: str
    in_use: bool
    superseded_by: str
    error: str
    age_s: float
    created_at: _timestamp_pb2.Timestamp
    built_at: _timestamp_pb2.Timestamp
    ready_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., customer: _Optional[str] = ..., account: _Optional[str] = ..., cloud: _Optional[str] = ..., region: _Optional[str] = ..., runtime_image: _Optional[str] = ..., image_id: _Optional[str] = ..., image_name: _Optional[str] = ..., state: _Optional[str] = ..., version: _Optional[int] = ..., source_digest: _Optional[str] = ..., instance_type: _Optional[str] = ..., in_use: _Optional[bool] = ..., superseded_by: _Optional[str] = ..., error: _Optional[str] = ..., age_s: _Optional[float] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., built_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ready_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListImagesResponse(_message.Message):
    __slots__ = ("images", "next_page_token")
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    images: _containers.RepeatedCompositeFieldContainer[MachineImage]
    next_page_token: str
    def __init__(self, images: _Optional[_Iterable[_Union[MachineImage, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListWarmPoolsRequest(_message.Message):
    __slots__ = ("customer", "model", "page_size", "page_token")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    customer: str
    model: str
    page_size: int
    page_token: str
    def __init__(self, customer: _Optional[str] = ..., model: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class WarmReplica(_message.Message):
    __slots__ = ("id", "state", "replica_state", "nodes", "since", "usd_per_hour")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REPLICA_STATE_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    id: str
    state: str
    replica_state: str
    nodes: int
    since: _timestamp_pb2.Timestamp
    usd_per_hour: float
    def __init__(self, id: _Optional[str] = ..., state: _Optional[str] = ..., replica_state: _Optional[str] = ..., nodes: _Optional[int] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., usd_per_hour: _Optional[float] = ...) -> None: ...

class WarmPoolStatus(_message.Message):
    __slots__ = ("customer", "model", "pool_id", "cloud", "region", "instance_type", "mode", "max_nodes", "disk_gb", "nodes", "usd_per_hour", "node_usd_per_hour", "block_usd_per_gb_month", "replicas")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    POOL_ID_FIELD_NUMBER: _ClassVar[int]
    CLOUD_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MAX_NODES_FIELD_NUMBER: _ClassVar[int]
    DISK_GB_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    NODE_USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    BLOCK_USD_PER_GB_MONTH_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    customer: str
    model: str
    pool_id: str
    cloud: str
    region: str
    instance_type: str
    mode: str
    max_nodes: int
    disk_gb: int
    nodes: int
    usd_per_hour: float
    node_usd_per_hour: float
    block_usd_per_gb_month: float
    replicas: _containers.RepeatedCompositeFieldContainer[WarmReplica]
    def __init__(self, customer: _Optional[str] = ..., model: _Optional[str] = ..., pool_id: _Optional[str] = ..., cloud: _Optional[str] = ..., region: _Optional[str] = ..., instance_type: _Optional[str] = ..., mode: _Optional[str] = ..., max_nodes: _Optional[int] = ..., disk_gb: _Optional[int] = ..., nodes: _Optional[int] = ..., usd_per_hour: _Optional[float] = ..., node_usd_per_hour: _Optional[float] = ..., block_usd_per_gb_month: _Optional[float] = ..., replicas: _Optional[_Iterable[_Union[WarmReplica, _Mapping]]] = ...) -> None: ...

class ListWarmPoolsResponse(_message.Message):
    __slots__ = ("pools", "nodes", "usd_per_hour", "next_page_token")
    POOLS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    USD_PER_HOUR_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    pools: _containers.RepeatedCompositeFieldContainer[WarmPoolStatus]
    nodes: int
    usd_per_hour: float
    next_page_token: str
    def __init__(self, pools: _Optional[_Iterable[_Union[WarmPoolStatus, _Mapping]]] = ..., nodes: _Optional[int] = ..., usd_per_hour: _Optional[float] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class AuditRequest(_message.Message):
    __slots__ = ("account", "customer")
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    account: str
    customer: str
    def __init__(self, account: _Optional[str] = ..., customer: _Optional[str] = ...) -> None: ...

class AuditInstance(_message.Message):
    __slots__ = ("instance_id", "state", "zone", "instance_type", "customer")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ZONE_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    state: str
    zone: str
    instance_type: str
    customer: str
    def __init__(self, instance_id: _Optional[str] = ..., state: _Optional[str] = ..., zone: _Optional[str] = ..., instance_type: _Optional[str] = ..., customer: _Optional[str] = ...) -> None: ...

class AuditFinding(_message.Message):
    __slots__ = ("category", "reason", "customer", "cloud", "account", "region", "intent_id", "kind", "node_state", "tracked_instance_id", "instances", "age_s", "state_age_s", "detail")
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    CLOUD_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    INTENT_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NODE_STATE_FIELD_NUMBER: _ClassVar[int]
    TRACKED_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    AGE_S_FIELD_NUMBER: _ClassVar[int]
    STATE_AGE_S_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    category: str
    reason: str
    customer: str
    cloud: str
    account: str
    region: str
    intent_id: str
    kind: str
    node_state: str
    tracked_instance_id: str
    instances: _containers.RepeatedCompositeFieldContainer[AuditInstance]
    age_s: float
    state_age_s: float
    detail: str
    def __init__(self, category: _Optional[str] = ..., reason: _Optional[str] = ..., customer: _Optional[str] = ..., cloud: _Optional[str] = ..., account: _Optional[str] = ..., region: _Optional[str] = ..., intent_id: _Optional[str] = ..., kind: _Optional[str] = ..., node_state: _Optional[str] = ..., tracked_instance_id: _Optional[str] = ..., instances: _Optional[_Iterable[_Union[AuditInstance, _Mapping]]] = ..., age_s: _Optional[float] = ..., state_age_s: _Optional[float] = ..., detail: _Optional[str] = ...) -> None: ...

class AuditSite(_message.Message):
    __slots__ = ("cloud", "account", "region", "customer", "owner", "tracked", "in_cloud", "stopped", "settling", "leaked", "lost", "duplicated", "error", "findings")
    CLOUD_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    TRACKED_FIELD_NUMBER: _ClassVar[int]
    IN_CLOUD_FIELD_NUMBER: _ClassVar[int]
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    SETTLING_FIELD_NUMBER: _ClassVar[int]
    LEAKED_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    DUPLICATED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FINDINGS_FIELD_NUMBER: _ClassVar[int]
    cloud: str
    account: str
    region: str
    customer: str
    owner: str
    tracked: int
    in_cloud: int
    stopped: int
    settling: int
    leaked: int
    lost: int
    duplicated: int
    error: str
    findings: _containers.RepeatedCompositeFieldContainer[AuditFinding]
    def __init__(self, cloud: _Optional[str] = ..., account: _Optional[str] = ..., region: _Optional[str] = ..., customer: _Optional[str] = ..., owner: _Optional[str] = ..., tracked: _Optional[int] = ..., in_cloud: _Optional[int] = ..., stopped: _Optional[int] = ..., settling: _Optional[int] = ..., leaked: _Optional[int] = ..., lost: _Optional[int] = ..., duplicated: _Optional[int] = ..., error: _Optional[str] = ..., findings: _Optional[_Iterable[_Union[AuditFinding, _Mapping]]] = ...) -> None: ...

class AuditResponse(_message.Message):
    __slots__ = ("sites", "tracked", "in_cloud", "stopped", "settling", "leaked", "lost", "duplicated", "unreachable", "clean", "grace_s", "at")
    SITES_FIELD_NUMBER: _ClassVar[int]
    TRACKED_FIELD_NUMBER: _ClassVar[int]
    IN_CLOUD_FIELD_NUMBER: _ClassVar[int]
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    SETTLING_FIELD_NUMBER: _ClassVar[int]
    LEAKED_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    DUPLICATED_FIELD_NUMBER: _ClassVar[int]
    UNREACHABLE_FIELD_NUMBER: _ClassVar[int]
    CLEAN_FIELD_NUMBER: _ClassVar[int]
    GRACE_S_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    sites: _containers.RepeatedCompositeFieldContainer[AuditSite]
    tracked: int
    in_cloud: int
    stopped: int
    settling: int
    leaked: int
    lost: int
    duplicated: int
    unreachable: int
    clean: bool
    grace_s: float
    at: _timestamp_pb2.Timestamp
    def __init__(self, sites: _Optional[_Iterable[_Union[AuditSite, _Mapping]]] = ..., tracked: _Optional[int] = ..., in_cloud: _Optional[int] = ..., stopped: _Optional[int] = ..., settling: _Optional[int] = ..., leaked: _Optional[int] = ..., lost: _Optional[int] = ..., duplicated: _Optional[int] = ..., unreachable: _Optional[int] = ..., clean: _Optional[bool] = ..., grace_s: _Optional[float] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class WatchEndpointsRequest(_message.Message):
    __slots__ = ("customer", "model", "since_revision")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SINCE_REVISION_FIELD_NUMBER: _ClassVar[int]
    customer: str
    model: str
    since_revision: int
    def __init__(self, customer: _Optional[str] = ..., model: _Optional[str] = ..., since_revision: _Optional[int] = ...) -> None: ...

class EndpointsSnapshot(_message.Message):
    __slots__ = ("revision", "endpoints", "added", "removed")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    revision: int
    endpoints: _containers.RepeatedCompositeFieldContainer[Endpoint]
    added: _containers.RepeatedCompositeFieldContainer[Endpoint]
    removed: _containers.RepeatedCompositeFieldContainer[Endpoint]
    def __init__(self, revision: _Optional[int] = ..., endpoints: _Optional[_Iterable[_Union[Endpoint, _Mapping]]] = ..., added: _Optional[_Iterable[_Union[Endpoint, _Mapping]]] = ..., removed: _Optional[_Iterable[_Union[Endpoint, _Mapping]]] = ...) -> None: ...

class ReportNodePhaseRequest(_message.Message):
    __slots__ = ("node_id", "token", "phase", "at", "detail")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    token: str
    phase: str
    at: float
    detail: str
    def __init__(self, node_id: _Optional[str] = ..., token: _Optional[str] = ..., phase: _Optional[str] = ..., at: _Optional[float] = ..., detail: _Optional[str] = ...) -> None: ...

class ReportNodePhaseResponse(_message.Message):
    __slots__ = ("recorded",)
    RECORDED_FIELD_NUMBER: _ClassVar[int]
    recorded: bool
    def __init__(self, recorded: _Optional[bool] = ...) -> None: ...

class DrainNodeRequest(_message.Message):
    __slots__ = ("node_id", "reason", "immediate")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    IMMEDIATE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    reason: str
    immediate: bool
    def __init__(self, node_id: _Optional[str] = ..., reason: _Optional[str] = ..., immediate: _Optional[bool] = ...) -> None: ...

class DrainNodeResponse(_message.Message):
    __slots__ = ("node", "changed", "message", "drained")
    NODE_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DRAINED_FIELD_NUMBER: _ClassVar[int]
    node: Node
    changed: bool
    message: str
    drained: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node: _Optional[_Union[Node, _Mapping]] = ..., changed: _Optional[bool] = ..., message: _Optional[str] = ..., drained: _Optional[_Iterable[str]] = ...) -> None: ...

class Decision(_message.Message):
    __slots__ = ("id", "at", "kind", "customer", "model", "desired", "reason", "detail", "replayable", "inputs_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DESIRED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    REPLAYABLE_FIELD_NUMBER: _ClassVar[int]
    INPUTS_JSON_FIELD_NUMBER: _ClassVar[int]
    id: int
    at: _timestamp_pb2.Timestamp
    kind: str
    customer: str
    model: str
    desired: int
    reason: str
    detail: str
    replayable: bool
    inputs_json: str
    def __init__(self, id: _Optional[int] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., kind: _Optional[str] = ..., customer: _Optional[str] = ..., model: _Optional[str] = ..., desired: _Optional[int] = ..., reason: _Optional[str] = ..., detail: _Optional[str] = ..., replayable: _Optional[bool] = ..., inputs_json: _Optional[str] = ...) -> None: ...

class ListDecisionsRequest(_message.Message):
    __slots__ = ("customer", "model", "kind", "since_id", "since", "limit", "include_inputs", "page_size", "page_token")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SINCE_ID_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INPUTS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    customer: str
    model: str
    kind: str
    since_id: int
    since: _timestamp_pb2.Timestamp
    limit: int
    include_inputs: bool
    page_size: int
    page_token: str
    def __init__(self, customer: _Optional[str] = ..., model: _Optional[str] = ..., kind: _Optional[str] = ..., since_id: _Optional[int] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., limit: _Optional[int] = ..., include_inputs: _Optional[bool] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListDecisionsResponse(_message.Message):
    __slots__ = ("decisions", "next_page_token")
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    decisions: _containers.RepeatedCompositeFieldContainer[Decision]
    next_page_token: str
    def __init__(self, decisions: _Optional[_Iterable[_Union[Decision, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ReplayDecisionRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...

class DecisionOutcome(_message.Message):
    __slots__ = ("desired", "reason", "detail")
    DESIRED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    desired: int
    reason: str
    detail: str
    def __init__(self, desired: _Optional[int] = ..., reason: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class ReplayDecisionResponse(_message.Message):
    __slots__ = ("decision", "recorded", "replayed", "matches", "autoscaler", "recorded_decider", "recorded_code", "running_code", "same_code")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    RECORDED_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    AUTOSCALER_FIELD_NUMBER: _ClassVar[int]
    RECORDED_DECIDER_FIELD_NUMBER: _ClassVar[int]
    RECORDED_CODE_FIELD_NUMBER: _ClassVar[int]
    RUNNING_CODE_FIELD_NUMBER: _ClassVar[int]
    SAME_CODE_FIELD_NUMBER: _ClassVar[int]
    decision: Decision
    recorded: DecisionOutcome
    replayed: DecisionOutcome
    matches: bool
    autoscaler: str
    recorded_decider: str
    recorded_code: str
    running_code: str
    same_code: bool
    def __init__(self, decision: _Optional[_Union[Decision, _Mapping]] = ..., recorded: _Optional[_Union[DecisionOutcome, _Mapping]] = ..., replayed: _Optional[_Union[DecisionOutcome, _Mapping]] = ..., matches: _Optional[bool] = ..., autoscaler: _Optional[str] = ..., recorded_decider: _Optional[str] = ..., recorded_code: _Optional[str] = ..., running_code: _Optional[str] = ..., same_code: _Optional[bool] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class JobStatus(_message.Message):
    __slots__ = ("job", "last_started_at", "last_duration_s", "last_error", "runs", "failures")
    JOB_FIELD_NUMBER: _ClassVar[int]
    LAST_STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_DURATION_S_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    job: str
    last_started_at: _timestamp_pb2.Timestamp
    last_duration_s: float
    last_error: str
    runs: int
    failures: int
    def __init__(self, job: _Optional[str] = ..., last_started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_duration_s: _Optional[float] = ..., last_error: _Optional[str] = ..., runs: _Optional[int] = ..., failures: _Optional[int] = ...) -> None: ...

class Status(_message.Message):
    __slots__ = ("version", "started_at", "uptime_s", "customers", "models", "pools", "nodes_by_state", "jobs", "last_event_id", "lease")
    class NodesByStateEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    CUSTOMERS_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    NODES_BY_STATE_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    LAST_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    version: str
    started_at: _timestamp_pb2.Timestamp
    uptime_s: float
    customers: int
    models: int
    pools: int
    nodes_by_state: _containers.ScalarMap[str, int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobStatus]
    last_event_id: int
    lease: LeaseStatus
    def __init__(self, version: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., uptime_s: _Optional[float] = ..., customers: _Optional[int] = ..., models: _Optional[int] = ..., pools: _Optional[int] = ..., nodes_by_state: _Optional[_Mapping[str, int]] = ..., jobs: _Optional[_Iterable[_Union[JobStatus, _Mapping]]] = ..., last_event_id: _Optional[int] = ..., lease: _Optional[_Union[LeaseStatus, _Mapping]] = ...) -> None: ...

class LeaseStatus(_message.Message):
    __slots__ = ("role", "holder", "shards", "held_shards", "following", "ttl_s", "answered_s_ago", "error")
    class FollowingEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    ROLE_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    HELD_SHARDS_FIELD_NUMBER: _ClassVar[int]
    FOLLOWING_FIELD_NUMBER: _ClassVar[int]
    TTL_S_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_S_AGO_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    role: str
    holder: str
    shards: int
    held_shards: _containers.RepeatedScalarFieldContainer[int]
    following: _containers.ScalarMap[int, str]
    ttl_s: float
    answered_s_ago: float
    error: str
    def __init__(self, role: _Optional[str] = ..., holder: _Optional[str] = ..., shards: _Optional[int] = ..., held_shards: _Optional[_Iterable[int]] = ..., following: _Optional[_Mapping[int, str]] = ..., ttl_s: _Optional[float] = ..., answered_s_ago: _Optional[float] = ..., error: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("id", "at", "kind", "severity", "customer", "model", "node", "message")
    ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    id: int
    at: _timestamp_pb2.Timestamp
    kind: str
    severity: str
    customer: str
    model: str
    node: str
    message: str
    def __init__(self, id: _Optional[int] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., kind: _Optional[str] = ..., severity: _Optional[str] = ..., customer: _Optional[str] = ..., model: _Optional[str] = ..., node: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ListEventsRequest(_message.Message):
    __slots__ = ("since_id", "limit", "customer", "model", "page_size", "page_token")
    SINCE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    since_id: int
    limit: int
    customer: str
    model: str
    page_size: int
    page_token: str
    def __init__(self, since_id: _Optional[int] = ..., limit: _Optional[int] = ..., customer: _Optional[str] = ..., model: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListEventsResponse(_message.Message):
    __slots__ = ("events", "next_page_token")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class StreamEventsRequest(_message.Message):
    __slots__ = ("since_id", "tail", "customer", "model")
    SINCE_ID_FIELD_NUMBER: _ClassVar[int]
    TAIL_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    since_id: int
    tail: int
    customer: str
    model: str
    def __init__(self, since_id: _Optional[int] = ..., tail: _Optional[int] = ..., customer: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class GetUsageRequest(_message.Message):
    __slots__ = ("customer", "since", "until", "group_by")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    GROUP_BY_FIELD_NUMBER: _ClassVar[int]
    customer: str
    since: _timestamp_pb2.Timestamp
    until: _timestamp_pb2.Timestamp
    group_by: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, customer: _Optional[str] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., group_by: _Optional[_Iterable[str]] = ...) -> None: ...

class UsageRow(_message.Message):
    __slots__ = ("customer", "model", "tier", "cloud", "nodes", "gpu_hours", "node_hours", "cost_usd")
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    CLOUD_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    GPU_HOURS_FIELD_NUMBER: _ClassVar[int]
    NODE_HOURS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    customer: str
    model: str
    tier: str
    cloud: str
    nodes: int
    gpu_hours: float
    node_hours: float
    cost_usd: float
    def __init__(self, customer: _Optional[str] = ..., model: _Optional[str] = ..., tier: _Optional[str] = ..., cloud: _Optional[str] = ..., nodes: _Optional[int] = ..., gpu_hours: _Optional[float] = ..., node_hours: _Optional[float] = ..., cost_usd: _Optional[float] = ...) -> None: ...

class GetUsageResponse(_message.Message):
    __slots__ = ("rows", "since", "until", "gpu_hours", "node_hours", "cost_usd")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    GPU_HOURS_FIELD_NUMBER: _ClassVar[int]
    NODE_HOURS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    rows: _containers.RepeatedCompositeFieldContainer[UsageRow]
    since: _timestamp_pb2.Timestamp
    until: _timestamp_pb2.Timestamp
    gpu_hours: float
    node_hours: float
    cost_usd: float
    def __init__(self, rows: _Optional[_Iterable[_Union[UsageRow, _Mapping]]] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., gpu_hours: _Optional[float] = ..., node_hours: _Optional[float] = ..., cost_usd: _Optional[float] = ...) -> None: ...
