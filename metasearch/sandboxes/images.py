"""The sandbox image, built offline: debootstrap a minimal Debian, add Python wheels, ``docker import``.

No registry is needed or used: the base system comes from a Debian package mirror, the Python packages
(the PyTorch CPU wheel, NumPy, pytest) from the host's pip, and the result is imported into the local
Docker engine. The tag is a hash of the recipe, so ``build_default_image`` is idempotent: an existing tag
returns at once. Users with a registry can build ``sandboxes/Dockerfile`` instead and set
``sandbox.image``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from metasearch.errors import InfrastructureError

log = logging.getLogger(__name__)

REPOSITORY = "metasearch-sandbox"
SUITE = "bookworm"  # Debian 12: python3 is 3.11, matching the cp311 wheels
DEBIAN_PACKAGES = ("python3", "python3-pip", "git", "ca-certificates", "procps", "patch")
PYTHON_PACKAGES = ("torch==2.13.0", "numpy", "pytest")
RECIPE_VERSION = "3"
DEFAULT_MIRROR = "http://deb.debian.org/debian"


def recipe() -> str:
    return "\n".join([RECIPE_VERSION, SUITE, *DEBIAN_PACKAGES, *PYTHON_PACKAGES])


def default_image_tag() -> str:
    return f"{REPOSITORY}:{hashlib.sha256(recipe().encode()).hexdigest()[:12]}"


def cache_dir() -> Path:
    path = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "metasearch"
    path.mkdir(parents=True, exist_ok=True)
    return path


def image_exists(tag: str) -> bool:
    return (
        subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False).returncode == 0
    )


def build_default_image(*, force: bool = False, mirror: str | None = None) -> str:
    """Build (or find) the default sandbox image; returns its tag. Needs root and a Docker engine."""
    tag = default_image_tag()
    if shutil.which("docker") is None:
        raise InfrastructureError("the docker CLI is not installed", retryable=False)
    if not force and image_exists(tag):
        log.info("sandbox image %s is up to date", tag)
        return tag
    rootfs_tar = cache_dir() / f"rootfs-{tag.split(':')[1]}.tar"
    if force or not rootfs_tar.exists():
        _build_rootfs(rootfs_tar, mirror or _apt_mirror())
    log.info("importing %s into Docker", tag)
    changes = [
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
        "ENV PYTHONDONTWRITEBYTECODE=1",
        "USER 65534:65534",
        "WORKDIR /tmp",
        'CMD ["python3"]',
    ]
    args = ["docker", "import"] + [f"--change={c}" for c in changes] + [str(rootfs_tar), tag]
    _check(args, "docker import")
    _check(["docker", "tag", tag, f"{REPOSITORY}:latest"], "docker tag")
    return tag


def _build_rootfs(dest: Path, mirror: str) -> None:
    if os.geteuid() != 0:
        raise InfrastructureError(
            "building the sandbox image offline needs root (debootstrap, chroot)", retryable=False
        )
    if shutil.which("debootstrap") is None:
        raise InfrastructureError("debootstrap is missing: apt-get install -y debootstrap", retryable=False)
    with tempfile.TemporaryDirectory(prefix="ms-rootfs-", dir=cache_dir()) as tmp:
        root = Path(tmp) / "rootfs"
        log.info("debootstrap %s from %s (a few minutes)", SUITE, mirror)
        _check(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(DEBIAN_PACKAGES)}",
                SUITE,
                str(root),
                mirror,
            ],
            "debootstrap",
        )
        wheels = root / "opt" / "wheels"
        wheels.mkdir(parents=True)
        log.info("downloading wheels %s", " ".join(PYTHON_PACKAGES))
        _check(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--dest",
                str(wheels),
                "--only-binary=:all:",
                "--python-version",
                "3.11",
                "--platform",
                "manylinux2014_x86_64",
                "--platform",
                "manylinux_2_28_x86_64",
                *PYTHON_PACKAGES,
            ],
            "pip download",
        )
        _check(
            [
                "chroot",
                str(root),
                "python3",
                "-m",
                "pip",
                "install",
                "-q",
                "--no-index",
                "--no-cache-dir",
                "--break-system-packages",
                "--find-links",
                "/opt/wheels",
                *PYTHON_PACKAGES,
            ],
            "pip install in the rootfs",
        )
        shutil.rmtree(wheels)
        for junk in (
            "var/cache/apt/archives",
            "var/lib/apt/lists",
            "usr/share/doc",
            "usr/share/man",
            "usr/share/locale",
        ):
            shutil.rmtree(root / junk, ignore_errors=True)
        (root / "tmp").chmod(0o1777)
        log.info("packing the rootfs")
        _check(["tar", "-C", str(root), "--numeric-owner", "-cf", str(dest) + ".part", "."], "tar")
        os.replace(str(dest) + ".part", dest)


def _apt_mirror() -> str:
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        try:
            text = path.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            if line.startswith("URIs:") and len(words) > 1 and "security" not in words[1]:
                return words[1]
            if line.startswith("deb ") and len(words) > 1 and "security" not in line:
                return words[1] if not words[1].startswith("[") else words[2]
    return DEFAULT_MIRROR


def _check(args: list[str], what: str) -> None:
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise InfrastructureError(
            f"{what} failed ({result.returncode}): {(result.stderr or result.stdout)[-2000:]}",
            retryable=False,
        )
