"""A path option of a suite that loads a user's checkout (``suite.path``, ``suite.instances``): an existing
``Path``, or a ``ConfigError`` naming the key. (The content hash of the loaded files is
``protocol.hash_files``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from metasearch.errors import ConfigError


def local_path(value: str | None, key: str, wanted: str, *, kind: Literal["dir", "file"] = "dir") -> Path:
    """``value`` (``~`` expanded) as a Path to an existing directory or file; ``ConfigError`` naming ``key``
    when it is unset (saying to set it to ``wanted``) or is not there."""
    if not value:
        raise ConfigError(f"{key}: required; set it to {wanted}")
    path = Path(value).expanduser()
    if not (path.is_dir() if kind == "dir" else path.is_file()):
        noun = "directory" if kind == "dir" else "file"
        raise ConfigError(f"{key}: {path} does not exist or is not a {noun}")
    return path
