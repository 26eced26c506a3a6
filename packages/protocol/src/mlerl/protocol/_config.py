"""Helpers for the typed configuration dataclasses every package defines.

Each package owns one frozen-free dataclass per component (``SandboxConfig``, ``LearnerConfig``
...), documents every field, and validates ranges in ``__post_init__`` with :func:`check`. The
``mlerl`` meta-package registers them with Hydra's ConfigStore; processes started by
``mlerl train`` load their section with :func:`load_section`, and the facts no single package
owns with :func:`mlerl.protocol.load_run` (the run contract). A bad value fails at start-up
with :class:`ConfigError` naming the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value is invalid. ``key`` is the dotted path when known."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message

    def under(self, prefix: str) -> ConfigError:
        """The same error with ``prefix.`` prepended to its key."""
        return ConfigError(f"{prefix}.{self.key}" if prefix else self.key, self.message)


def check(condition: bool, key: str, message: str) -> None:
    """Raise :class:`ConfigError` for ``key`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(key, message)


def to_object(cls: type[T], cfg: Any, prefix: str = "") -> T:
    """Turn an OmegaConf node (or dict) into dataclass ``cls``, validating types and ranges.

    Type errors come from OmegaConf with the full key; range errors from ``__post_init__`` are
    re-raised with the dotted path of the section that raised them (nested sections are
    checked innermost first), so the message names the key as the user wrote it.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        merged = OmegaConf.merge(OmegaConf.structured(cls), cfg if cfg is not None else {})
        _check_sections(merged, "")
        return OmegaConf.to_object(merged)  # type: ignore[return-value]  # OmegaConf.to_object of a structured cls is a cls
    except ConfigError as exc:
        raise exc.under(prefix) from None
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "?"
        key = f"{prefix}.{key}" if prefix and key != "?" else key
        raise ConfigError(key, str(exc).splitlines()[0]) from None


def _check_sections(node: Any, path: str) -> None:
    """Instantiate every nested dataclass section, innermost first, prefixing its errors."""
    from omegaconf import DictConfig, OmegaConf

    for key in node:
        child = node._get_node(key)
        if isinstance(child, DictConfig) and OmegaConf.get_type(child) not in (dict, None):
            child_path = f"{path}.{key}" if path else str(key)
            _check_sections(child, child_path)
            try:
                OmegaConf.to_object(child)
            except ConfigError as exc:
                raise ConfigError(f"{child_path}.{exc.key}", exc.message) from None


def load_yaml(path: str | Path) -> Any:
    """``OmegaConf.load`` of a config file that must be a YAML mapping; a missing, unreadable
    or unparsable file raises :class:`ConfigError` (key: the path) instead of a traceback."""
    import yaml
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        root = OmegaConf.load(path)
    except (OSError, yaml.YAMLError, OmegaConfBaseException, UnicodeDecodeError) as exc:
        why = " ".join(line.strip() for line in str(exc).splitlines()) or type(exc).__name__
        raise ConfigError(str(path), f"cannot read the config file: {why}") from None
    if not isinstance(root, DictConfig):
        raise ConfigError(str(path), "the config file must hold a YAML mapping")
    return root


def load_section(cls: type[T], path: str | Path, section: str) -> T:
    """Load ``section`` of a resolved YAML config file written by ``mlerl train``."""
    from omegaconf import OmegaConf

    root = load_yaml(path)
    node = OmegaConf.select(root, section) if section else root
    if node is None:
        raise ConfigError(section, f"missing from {path}")
    return to_object(cls, node, prefix=section)
