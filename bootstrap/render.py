"""A node's user data as a cloud-init document: the same for AWS (``UserData``), GCP (the
``user-data`` metadata key) and OCI (``user_data``), since each cloud's images run
cloud-init; the adapters encode it as their API wants (``providers/<cloud>/instances.py``).

The document writes the bootstrap script and four files of this node only: who it is and
what it serves (``node.env``, sourced by the script), the engine's arguments one per line,
its environment as a docker env file, and the node's single-use report token when there is
one. Nothing else secret goes in: the cloud stores user data in clear and shows it to anyone
who may describe the instance, so the node fetches its weights with its own identity
(instance profile, service account, instance principal). Pure."""

from __future__ import annotations

import ast
import base64
import gzip
import shlex
from dataclasses import dataclass
from importlib.resources import files

import yaml

from runtimes import Launch
from schema.types import Cloud

SCRIPT_PATH = "/opt/gpucap/bootstrap.sh"
FETCH_PATH = "/opt/gpucap/fetch.py"  # bootstrap/fetch.py: s3:// and gs:// weights
CONF_DIR = "/etc/gpucap"
WEIGHTS_DIR = "/mnt/gpucap/weights"  # the instance's local NVMe where it has one
# A gang's argument naming the leader's address, until the node knows it: rank 0 puts its
# own private address there at boot, a worker the address its node.env gives.
LEADER_PLACEHOLDER = "@GPUCAP_LEADER@"
# The smallest of the three clouds' limits: EC2 takes at most 16 KB of user data (before
# its base64), OCI 32,000 bytes of metadata, GCP 256 KB per metadata value.
MAX_USER_DATA_BYTES = 16 * 1024


class UserDataTooLarge(ValueError):
    pass


@dataclass(frozen=True)
class NodeBoot:
    node_id: str
    customer: str
    model: str
    cloud: Cloud
    gpus: int  # on this node
    launch: Launch
    weights_uri: str | None = None  # None: the engine fetches the model by its own name
    report_url: str | None = None  # None: no phase reports; the daemon polls health
    token: str | None = None  # the node's single-use report token
    leader: str | None = None  # a worker's leader address (rank 0: itself)
    ready_timeout_s: int = 1800
    # An image builder (``controlplane/loop/images.py``): check the driver, start the
    # container runtime, pull the engine's image, report ``baked`` with the image's digest
    # and stop, leaving no file of this boot on the disk that is imaged.
    bake: bool = False


def script() -> str:
    return files("bootstrap").joinpath("node.sh").read_text(encoding="utf-8")


def fetch_tool() -> str:
    """``bootstrap/fetch.py`` without its docstrings, gzipped and base64-encoded (cloud-init's
    ``gz+b64``): about 7 KB of the 16 KB EC2 allows."""
    tree = ast.parse(files("bootstrap").joinpath("fetch.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    packed = gzip.compress(ast.unparse(tree).encode(), compresslevel=9, mtime=0)
    return base64.b64encode(packed).decode()


def render(boot: NodeBoot) -> str:
    """The ``#cloud-config`` document for ``boot``. Raises :class:`UserDataTooLarge` past
    the smallest cloud's limit."""
    launch = boot.launch
    gang = launch.gang
    env = {
        "NODE_ID": boot.node_id,
        "CUSTOMER": boot.customer,
        "MODEL": boot.model,
        "CLOUD": boot.cloud.value,
        "ENGINE": launch.engine.value,
        "IMAGE": launch.image,
        "PORT": str(launch.port),
        "HEALTH_PATH": launch.health_path,
        "GPUS": str(boot.gpus),
        "WEIGHTS_DIR": WEIGHTS_DIR,
        "READY_TIMEOUT_S": str(boot.ready_timeout_s),
    }
    if boot.bake:
        env["BAKE"] = "1"
    if boot.weights_uri:
        env["WEIGHTS_URI"] = boot.weights_uri
    if boot.report_url:
        env["REPORT_URL"] = boot.report_url
    if gang is not None:
        if gang.rank > 0 and not boot.leader:
            raise ValueError(f"node {boot.node_id}: rank {gang.rank} needs its leader's address")
        env["RANK"] = str(gang.rank)
        env["LEADER"] = "self" if gang.rank == 0 else str(boot.leader)
    files_ = [
        _file(SCRIPT_PATH, script(), "0755"),
        _file(f"{CONF_DIR}/node.env", "".join(f"{k}={shlex.quote(v)}\n" for k, v in env.items())),
        _file(f"{CONF_DIR}/engine.args", "".join(f"{a}\n" for a in launch.argv), "0644"),
        _file(f"{CONF_DIR}/engine.env", "".join(f"{k}={v}\n" for k, v in launch.env.items())),
    ]
    if boot.weights_uri and boot.weights_uri.startswith(("s3://", "gs://")):
        files_.append({**_file(FETCH_PATH, fetch_tool(), "0755"), "encoding": "gz+b64"})
    if boot.token:
        files_.append(_file(f"{CONF_DIR}/node.token", boot.token))
    doc = {"write_files": files_, "runcmd": [[SCRIPT_PATH]]}
    text = "#cloud-config\n" + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=1000)
    size = len(text.encode())
    if size > MAX_USER_DATA_BYTES:
        raise UserDataTooLarge(
            f"user data of node {boot.node_id} is {size} bytes; the limit is "
            f"{MAX_USER_DATA_BYTES} (EC2's)"
        )
    return text


class _Dumper(yaml.SafeDumper):
    """Multi-line contents as literal blocks, so a rendered document reads as the files."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _file(path: str, content: str, mode: str = "0600") -> dict[str, str]:
    return {"path": path, "owner": "root:root", "permissions": mode, "content": content}
