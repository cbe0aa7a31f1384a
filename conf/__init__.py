"""The Hydra configs of ``python -m lade_bench.run`` and ``python -m lade_bench.tune`` (this folder).

This folder is the checkout's top-level ``conf/``, where the configs are edited, and the package
``lade_bench.conf`` (``setup.py`` maps it), so an installed wheel carries it and composes the same
configs as a checkout. Beside them Hydra searches the user's own config folder (:func:`user_conf_dir`), where
the tuner writes its presets: ``lookahead=tuned/<name>`` finds a preset in either place, and a
user's file never lands in the installed package or the source tree.

Where each value is stated (once): the run's settings in ``settings.yaml`` (shared by ``config.yaml``
and ``tune.yaml``), the engine's own defaults (N, W, G, sampling, prompt lookup, Jacobi) in
``lade_bench.decoding`` (the schema reads them, the group files only state what differs), the
tuner's in ``tune.yaml``. ``tests/test_config_defaults.py`` fails when a value is stated twice.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any, cast

from omegaconf import OmegaConf

# The folder Hydra composes from: this package's own directory.
PACKAGE_CONF_DIR = Path(__file__).resolve().parent
# Name of the OmegaConf resolver that gives the user's config folder to ``hydra.searchpath``.
USER_CONF_RESOLVER = "lade_bench_user_conf_dir"
# Name of the resolver that lists the registered methods in ``--help`` (``arms=[...]`` takes them).
METHODS_RESOLVER = "lade_bench_methods"
# Name of the resolver that gives the arms of a cell of every method (``conf/spec_bench/every_method.yaml``).
EVERY_METHOD_RESOLVER = "lade_bench_every_method"


class PresetError(ValueError):
    """A named config file (a lookahead preset, a model option) that does not exist or is malformed."""


def user_conf_dir() -> Path:
    """The user's own Hydra config folder (``~/.config/lade_bench``), searched after the package's.

    The tuner writes presets to its ``lookahead/tuned/``. To use another folder, pass
    ``hydra.searchpath=[file:///that/folder]`` to the run and ``tune.preset_conf_dir=/that/folder``
    to the tuner.
    """
    return Path.home() / ".config" / "lade_bench"


def register_resolvers() -> None:
    """Register the resolvers the configs use: the user's config folder in ``hydra.searchpath``, the
    registered methods in ``--help``, the arms of a cell of every method (idempotent)."""
    if not OmegaConf.has_resolver(USER_CONF_RESOLVER):
        OmegaConf.register_new_resolver(USER_CONF_RESOLVER, lambda: str(user_conf_dir()))
    if not OmegaConf.has_resolver(METHODS_RESOLVER):
        OmegaConf.register_new_resolver(METHODS_RESOLVER, _method_names)
    if not OmegaConf.has_resolver(EVERY_METHOD_RESOLVER):
        OmegaConf.register_new_resolver(EVERY_METHOD_RESOLVER, _every_method_arms)


def _method_names() -> str:
    """The registered methods, in the reading order of tables (read when asked: your own ones too)."""
    from lade_bench.methods import method_names

    return ", ".join(method_names())


def _every_method_arms() -> list[str]:
    """The arms of a cell of every method (``methods.registry.every_method_arms``), read from the registry
    when the config is read, so a method registered later joins the cell unnamed."""
    from lade_bench.methods.registry import every_method_arms

    return list(every_method_arms())


def ignore_missing_user_conf_dir() -> None:
    """Silence Hydra's warning that the user's config folder does not exist (the usual case until a
    tune writes a preset); a missing folder of any other search path still warns."""
    folder = re.escape(str(user_conf_dir()))
    warnings.filterwarnings("ignore", message=rf"provider=hydra\.searchpath in main, path={folder} is not available")


def search_dirs() -> list[Path]:
    """Config folders in Hydra's search order: the package's, then the user's."""
    return [PACKAGE_CONF_DIR, user_conf_dir()]


def group_option_file(group: str, name: str, dirs: list[Path] | None = None) -> Path:
    """The YAML file of option ``name`` of config group ``group`` (e.g. ``lookahead``, ``tuned/x``).

    Raises:
        PresetError: no such file in any searched folder; the message lists the options there are.
    """
    folders = search_dirs() if dirs is None else dirs
    for folder in folders:
        path = folder / group / f"{name}.yaml"
        if path.is_file():
            return path
    available = sorted(
        {str(p.relative_to(f / group).with_suffix("")) for f in folders for p in (f / group).rglob("*.yaml")}
    )
    raise PresetError(f"{name!r} is not a {group} preset; use any of {available}")


def group_option(group: str, name: str, dirs: list[Path] | None = None) -> dict[str, Any]:
    """The values option ``name`` of ``group`` states (its own keys only: schema defaults not added)."""
    return _option_values(group_option_file(group, name, dirs))


def _option_values(path: Path) -> dict[str, Any]:
    values = OmegaConf.to_container(OmegaConf.load(path))
    if not isinstance(values, dict):
        raise PresetError(f"{path} is not a mapping of settings")
    values.pop("defaults", None)
    return cast(dict[str, Any], values)


def lookahead_preset(name: str, dirs: list[Path] | None = None) -> Any:
    """The ``lookahead=<name>`` preset (``tuned/<x>`` too) as a one-device ``LookaheadParams``.

    Keys the file leaves out take the engine's defaults, as they do when Hydra composes it (the
    schema's defaults are the engine's).

    Raises:
        PresetError: no such preset, a preset spread over several devices, or invalid values.
    """
    from lade_bench.decoding.core.params import DecodingConfigError, LookaheadParams

    path = group_option_file("lookahead", name, dirs)
    values = _option_values(path)
    # Callers measure one device: a preset's rank count is a launch setting, not a decoding one.
    if values.pop("devices", 1) != 1:
        raise PresetError(f"lookahead preset {path} sets devices != 1; a one-device preset is needed here")
    try:
        return LookaheadParams(**values)
    except (TypeError, DecodingConfigError) as err:
        raise PresetError(f"lookahead preset {path} is not a valid lookahead preset: {err}") from err
