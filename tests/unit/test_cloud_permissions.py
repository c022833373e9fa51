"""The cloud permissions gpucap documents are the ones its adapters need.

The adapters' code is scanned (ast) for every method called on an SDK client: boto3 clients
(``sess.client("ec2", region)``), compute_v1 clients (``session.client("InstancesClient")``,
or a ``@property`` returning one), OCI clients (``session.compute(region)`` and the other
factories of ``OciSession``), followed through local names and helpers' parameters of the
same name, ``get_paginator("op")`` included; plus the Cloud Storage JSON API calls
(``GcsCopier._call``) and service-account impersonation. Then:

- every operation found is a row of ``providers/permissions.py``, and every row is found;
- each row names a method the SDK has (botocore's service model: an EC2 row's IAM action is
  ``ec2:`` + the operation; compute_v1 and oci client classes);
- the AWS policy JSON, the GCP custom role YAML and the OCI statements in
  ``docs/operators.md`` grant exactly the table's permissions, and the operators' guide
  names every operation.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from providers.permissions import (
    OPERATIONS,
    Operation,
    Principal,
    oci_statements,
    operations,
    permissions,
)
from schema.types import Cloud

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "operators.md"
OCI_FACTORIES = frozenset({"compute", "identity", "network", "object_storage", "limits"})
PAGINATOR_METHODS = frozenset({"get_paginator", "get_waiter"})

Found = set[tuple[str, str]]  # (client, method)


# --- the scan -------------------------------------------------------------------------


class _Module:
    """Resolves which expressions of one module are SDK clients, and collects the
    (client, method) pairs used on them."""

    def __init__(self, tree: ast.Module, cloud: Cloud) -> None:
        self.cloud = cloud
        self.tree = tree
        self.properties: dict[str, set[str]] = {}  # self.<name> -> client kinds
        self.names: dict[str, set[str]] = {}  # module-wide: name -> client kinds
        for _ in range(2):  # (a property may return a name, a name be bound to a property)
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and _is_property(node):
                    for ret in ast.walk(node):
                        if isinstance(ret, ast.Return) and ret.value is not None:
                            self._bind(self.properties, node.name, self.resolve(ret.value, {}))
                elif isinstance(node, ast.Assign):
                    for t in node.targets:
                        if isinstance(t, ast.Attribute) and _is_self_attr(t.value):
                            self._bind(self.properties, t.attr, self.resolve(node.value, {}))
            for scope in _scopes(tree):
                for name, kinds in self._assigned(scope).items():
                    self._bind(self.names, name, kinds)

    @staticmethod
    def _bind(table: dict[str, set[str]], name: str, kinds: set[str]) -> None:
        if kinds:
            table.setdefault(name, set()).update(kinds)

    def _assigned(self, scope: ast.AST) -> dict[str, set[str]]:
        """The names ``scope`` binds to a client (``x = ...`` and ``x: T = ...``)."""
        out: dict[str, set[str]] = {}
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign):
                value, targets = node.value, list(node.targets)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                value, targets = node.value, [node.target]
            else:
                continue
            kinds = self.resolve(value, {})
            for t in targets:
                if isinstance(t, ast.Name):
                    self._bind(out, t.id, kinds)
        return out

    def resolve(self, expr: ast.expr, local: dict[str, set[str]]) -> set[str]:
        """The client kinds ``expr`` may be (empty: not a client)."""
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            attr = expr.func.attr
            if self.cloud in (Cloud.AWS, Cloud.GCP) and attr == "client":
                first = expr.args[0] if expr.args else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    return {first.value}
            if self.cloud == Cloud.OCI and attr in OCI_FACTORIES:
                return {attr}
            return set()
        if isinstance(expr, ast.Name):
            return set(local.get(expr.id) or self.names.get(expr.id) or ())
        if (
            isinstance(expr, ast.Attribute)
            and isinstance(expr.value, ast.Name)
            and expr.value.id == "self"
        ):
            return set(self.properties.get(expr.attr, ()))
        return set()

    def attributes(self) -> Iterator[tuple[ast.Attribute, set[str], ast.Call | None]]:
        """Every attribute of the module, with the client kinds its receiver may be and the
        call it is the function of, if any."""
        for scope in _scopes(self.tree):
            local = self._assigned(scope)
            calls = {id(n.func): n for n in ast.walk(scope) if isinstance(n, ast.Call)}
            for node in ast.walk(scope):
                if isinstance(node, ast.Attribute):
                    yield node, self.resolve(node.value, local), calls.get(id(node))

    def used(self) -> Found:
        found: Found = set()
        for node, kinds, call in self.attributes():
            for kind in kinds:
                method = node.attr
                if method in PAGINATOR_METHODS and call is not None:
                    arg = call.args[0] if call.args else None
                    assert isinstance(arg, ast.Constant), ast.unparse(call)
                    method = str(arg.value)
                found.add((kind, method))
        return found

    def imported(self) -> set[str]:
        return {
            a.asname or a.name.split(".")[0]
            for n in ast.walk(self.tree)
            if isinstance(n, ast.Import | ast.ImportFrom)
            for a in n.names
        }


def _is_self_attr(expr: ast.expr) -> bool:
    """``self`` or ``self.a.b``: an object of the adapter itself, not an SDK client."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id == "self"


def _is_property(fn: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list)


def _scopes(tree: ast.Module) -> Iterator[ast.AST]:
    """Each outermost function (methods included; nested ones belong to it), and the
    module's own statements."""
    yield ast.Module(
        body=[s for s in tree.body if not isinstance(s, ast.FunctionDef | ast.ClassDef)],
        type_ignores=[],
    )
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node
        elif isinstance(node, ast.ClassDef):
            yield from (n for n in node.body if isinstance(n, ast.FunctionDef))


def _sources(cloud: Cloud) -> list[Path]:
    return sorted((ROOT / "providers" / cloud.value).glob("*.py"))


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _gcs_calls(tree: ast.Module) -> Found:
    """``self._call("GET", f"/storage/v1/b/{...}/o", ...)``: the REST call with the path's
    variable parts as ``{}`` (a path may be a local name bound to an f-string)."""
    found: Found = set()
    for scope in _scopes(tree):
        paths: dict[str, ast.expr] = {}
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                paths[node.targets[0].id] = node.value
        for node in ast.walk(scope):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "_call"
            ):
                continue
            verb, path = node.args[0], node.args[1]
            if isinstance(path, ast.Name):
                path = paths[path.id]
            assert isinstance(verb, ast.Constant) and isinstance(verb.value, str), ast.unparse(node)
            found.add(("storage", f"{verb.value} {_template(path)}"))
    return found


def _template(expr: ast.expr) -> str:
    if isinstance(expr, ast.Constant):
        return str(expr.value)
    assert isinstance(expr, ast.JoinedStr), ast.unparse(expr)
    return "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in expr.values)


def _impersonation(tree: ast.Module) -> Found:
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "Credentials"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "impersonated_credentials"
        ):
            return {("iamcredentials", "generateAccessToken")}
    return set()


def scan(cloud: Cloud) -> Found:
    found: Found = set()
    for path in _sources(cloud):
        tree = _parse(path)
        found |= _Module(tree, cloud).used()
        if cloud == Cloud.GCP:
            found |= _gcs_calls(tree) | _impersonation(tree)
    return found


def table(cloud: Cloud) -> Found:
    return {(op.client, op.method) for op in operations(cloud)}


# --- the code against the table -------------------------------------------------------


@pytest.mark.parametrize("cloud", list(Cloud))
def test_every_operation_the_adapters_call_is_in_the_table(cloud: Cloud) -> None:
    missing = scan(cloud) - table(cloud)
    assert not missing, (
        f"{cloud.value} adapters call {sorted(missing)}: add each to providers/permissions.py "
        "with its permission, and to the policies in docs/operators.md"
    )


@pytest.mark.parametrize("cloud", list(Cloud))
def test_every_operation_in_the_table_is_called(cloud: Cloud) -> None:
    stale = table(cloud) - scan(cloud)
    assert not stale, f"providers/permissions.py lists {sorted(stale)}, which no adapter calls"


def test_the_scan_follows_every_way_the_adapters_reach_a_client() -> None:
    """A scan that silently resolved nothing would pass the two tests above vacuously."""
    aws, gcp, oci = scan(Cloud.AWS), scan(Cloud.GCP), scan(Cloud.OCI)
    assert ("sts", "assume_role") in aws  # inside a nested function
    assert ("ec2", "stop_instances") in aws  # referenced, called through a variable
    assert ("ec2", "describe_instance_type_offerings") in aws  # a paginator
    assert ("s3", "upload_part_copy") in aws  # a helper's parameter
    assert ("InstancesClient", "insert_unary") in gcp  # a @property
    assert ("ZoneOperationsClient", "wait") in gcp  # inside a lambda
    assert ("storage", "POST /storage/v1/b/{}/o/{}/rewriteTo/b/{}/o/{}") in gcp
    assert ("limits", "get_resource_availability") in oci  # a local name
    assert ("compute", "launch_instance") in oci  # passed to session.call


def test_the_gcs_rest_calls_all_go_through_one_method() -> None:
    """The Cloud Storage scan reads ``_call`` sites; any other use of the authorized
    session would escape it."""
    for path in _sources(Cloud.GCP):
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.Attribute) and node.attr == "http":
                assert path.name in ("objects.py", "session.py"), f"{path}: {ast.unparse(node)}"


def _sdk_methods(cloud: Cloud) -> set[str]:
    """The method names of the SDK clients the adapters use."""
    if cloud == Cloud.AWS:
        botocore_session = pytest.importorskip("botocore.session")
        from botocore import xform_name

        session = botocore_session.get_session()
        services = {op.client for op in operations(Cloud.AWS)}
        return {
            xform_name(name)
            for service in services
            for name in session.get_service_model(service).operation_names
        }
    oci = pytest.importorskip("oci")
    return {
        name
        for cls in _oci_classes(oci).values()
        for name in dir(cls)
        if not name.startswith("_") and callable(getattr(cls, name))
    }


@pytest.mark.parametrize("cloud", [Cloud.AWS, Cloud.OCI])
def test_every_sdk_method_name_in_the_adapters_is_on_a_client_the_scan_follows(
    cloud: Cloud,
) -> None:
    """A name such as ``run_instances`` or ``launch_instance`` used on anything but a module
    or the adapter's own objects must be on a receiver the scan resolves to a client;
    otherwise a client reached some new way would escape the scan."""
    names = _sdk_methods(cloud)
    escaped = []
    for path in _sources(cloud):
        module = _Module(_parse(path), cloud)
        imported = module.imported()
        for node, kinds, _ in module.attributes():
            if node.attr not in names or kinds or _is_self_attr(node.value):
                continue
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in imported:
                continue
            escaped.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert not escaped, escaped


# --- the table against the SDKs --------------------------------------------------------


def test_aws_rows_are_botocore_operations() -> None:
    botocore_session = pytest.importorskip("botocore.session")
    from botocore import xform_name

    session = botocore_session.get_session()
    for op in operations(Cloud.AWS):
        model = session.get_service_model(op.client)
        assert op.api in model.operation_names, op
        if op.method != "copy":  # boto3's managed transfer, not an operation
            assert op.method == xform_name(op.api), op
        if op.client == "ec2":
            assert f"ec2:{op.api}" in op.permissions, op
        if op.client == "service-quotas":
            assert op.permissions == (f"{model.signing_name}:{op.api}",), op
        assert all(
            p.startswith(("ec2:", "s3:", "sts:", "servicequotas:", "iam:PassRole"))
            for p in op.permissions
        )


def test_gcp_rows_are_compute_v1_methods() -> None:
    compute_v1 = pytest.importorskip("google.cloud.compute_v1")
    for op in operations(Cloud.GCP):
        if op.client in ("storage", "iamcredentials"):
            continue
        assert callable(getattr(getattr(compute_v1, op.client), op.method, None)), op
        resource, verb = op.api.split(".")
        assert op.permissions[0].startswith(f"compute.{resource}."), op
    for perm in permissions(Cloud.GCP) | permissions(Cloud.GCP, Principal.DAEMON):
        assert re.fullmatch(r"(compute|storage|iam)\.[a-zA-Z]+\.[a-zA-Z]+", perm), perm


def _oci_classes(oci: Any) -> dict[str, type]:
    return {
        "compute": oci.core.ComputeClient,
        "identity": oci.identity.IdentityClient,
        "network": oci.core.VirtualNetworkClient,
        "object_storage": oci.object_storage.ObjectStorageClient,
        "limits": oci.limits.LimitsClient,
    }


def test_oci_rows_are_sdk_client_methods() -> None:
    oci = pytest.importorskip("oci")
    classes = _oci_classes(oci)
    for op in operations(Cloud.OCI):
        assert callable(getattr(classes[op.client], op.method, None)), op
        assert re.sub(r"(?<!^)([A-Z])", r"_\1", op.api).lower() == op.method, op


def test_every_row_has_a_permission_but_the_free_ones() -> None:
    free = [op for op in OPERATIONS if not op.permissions]
    assert [(op.client, op.method) for op in free] == [("sts", "get_caller_identity")]


# --- the table against the operators' guide -----------------------------------------------


def _block(marker: str) -> str:
    """The fenced block right after ``<!-- permissions:MARKER -->``."""
    text = DOC.read_text()
    m = re.search(
        rf"<!-- permissions:{re.escape(marker)} -->\s*```[a-z]*\n(.*?)\n```", text, re.DOTALL
    )
    assert m, f"docs/operators.md has no fenced block after <!-- permissions:{marker} -->"
    return m.group(1)


def _iam_actions(marker: str) -> set[str]:
    policy = json.loads(_block(marker))
    actions: set[str] = set()
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        action = statement["Action"]
        actions.update([action] if isinstance(action, str) else action)
    return actions


def test_aws_policies_grant_exactly_the_tables_actions() -> None:
    assert _iam_actions("aws-account") == permissions(Cloud.AWS)
    assert _iam_actions("aws-daemon") == permissions(Cloud.AWS, Principal.DAEMON)


def test_aws_trust_policy_requires_the_external_id() -> None:
    trust = json.loads(_block("aws-trust"))
    (statement,) = trust["Statement"]
    assert statement["Action"] == "sts:AssumeRole"
    assert "sts:ExternalId" in statement["Condition"]["StringEquals"]


def test_aws_policy_conditions_use_gpucaps_ownership_tag() -> None:
    from providers.base import MANAGED_VALUE, TAG_MANAGED

    policy = json.loads(_block("aws-account"))
    conditions = json.dumps([s.get("Condition", {}) for s in policy["Statement"]])
    assert f'"aws:ResourceTag/{TAG_MANAGED}": "{MANAGED_VALUE}"' in conditions
    assert f'"aws:RequestTag/{TAG_MANAGED}": "{MANAGED_VALUE}"' in conditions


def test_gcp_roles_grant_exactly_the_tables_permissions() -> None:
    for marker, principal in (("gcp-account", Principal.ACCOUNT), ("gcp-daemon", Principal.DAEMON)):
        role = yaml.safe_load(_block(marker))
        listed = role["includedPermissions"]
        assert len(listed) == len(set(listed)), marker
        assert set(listed) == permissions(Cloud.GCP, principal), marker


_STATEMENT = re.compile(
    r"^Allow (group|service) (\S+) to (inspect|read|use|manage) (\S+) in (tenancy|compartment)"
)


def test_oci_statements_grant_exactly_the_tables_verbs() -> None:
    by_subject: dict[str, set[tuple[str, str, str]]] = {"group": set(), "service": set()}
    for line in _block("oci-account").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = _STATEMENT.match(line)
        assert m, f"not a policy statement: {line!r}"
        by_subject[m[1]].add((m[3], m[4], m[5]))
    assert by_subject["group"] == set(oci_statements(Principal.ACCOUNT))
    assert by_subject["service"] == set(oci_statements(Principal.SERVICE))


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: f"{op.cloud}-{op.client}-{op.method}")
def test_the_guide_names_every_operation(op: Operation) -> None:
    assert f"`{op.api}`" in DOC.read_text(), f"docs/operators.md does not name {op.api}"
