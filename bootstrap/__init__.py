"""What a new node boots with: its cloud-init user data (``render``), which writes the
bootstrap script (``node.sh``, shellcheck-clean) and this node's own files, then runs it."""

from bootstrap.render import LEADER_PLACEHOLDER, NodeBoot, UserDataTooLarge, render

__all__ = ["LEADER_PLACEHOLDER", "NodeBoot", "UserDataTooLarge", "render"]
