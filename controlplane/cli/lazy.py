"""A Typer group whose commands are imported only when one is run, so ``gpucap --help`` and
a read command do not pay for the modules every other command needs (SQLAlchemy, alembic,
the cloud SDKs, the simulator).

Each command module keeps its ``register(app)``; the group knows, without importing it, the
names it registers and the first paragraph of their help (what ``gpucap --help`` lists).
Running one of them imports its module and registers all of its commands for real."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
from typer import _click as click  # (Typer's own copy of click, which TyperGroup extends)
from typer.core import TyperCommand, TyperGroup

# Packages that come with an optional extra rather than with gpucap itself (the cloud SDKs
# name theirs where a provider is built: providers.registry).
EXTRA_OF = {"numpy": "sim", "matplotlib": "sim"}


@dataclass(frozen=True)
class LazyModule:
    """A command module and the commands (name: first paragraph of help) it registers."""

    module: str
    commands: Mapping[str, str]


class _Placeholder(TyperCommand):
    """Stands for a command until its module is imported: its name and help, no options."""

    def __init__(self, name: str, help: str, module: str) -> None:
        super().__init__(name, help=help, add_help_option=False, callback=self._unloaded)
        self.module = module

    def _unloaded(self) -> None:
        # Only reached if a module stops registering a command it is listed with.
        raise click.ClickException(f"{self.module} does not register {self.name!r}")


class LazyGroup(TyperGroup):
    """Subclass it with ``modules`` set (see :func:`lazy_group`)."""

    modules: ClassVar[Sequence[LazyModule]] = ()

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for m in self.modules:
            for name, help in m.commands.items():
                self.commands.setdefault(name, _Placeholder(name, help, m.module))

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        placeholder = self.commands.get(args[0]) if args else None
        if isinstance(placeholder, _Placeholder):
            self.load(placeholder.module)
        return super().resolve_command(ctx, args)

    def load(self, module: str) -> None:
        """Import ``module`` and put the commands its ``register`` adds in their places."""
        app = typer.Typer()
        try:
            loaded = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            extra = EXTRA_OF.get((exc.name or "").partition(".")[0])
            if extra is None:
                raise
            raise click.ClickException(
                f"this command needs {exc.name}, in gpucap's {extra!r} extra: "
                f"pip install 'gpucap[{extra}]'"
            ) from exc
        loaded.register(app)
        self.commands.update(typer.main.get_group(app).commands)

    def load_all(self) -> None:
        for m in self.modules:
            self.load(m.module)


def lazy_group(modules: Sequence[LazyModule]) -> type[LazyGroup]:
    """The group class for ``typer.Typer(cls=...)``, listing ``modules`` in this order."""
    return type("GpucapCommands", (LazyGroup,), {"modules": tuple(modules)})
