"""Sandbox images, built offline: debootstrap a minimal Debian, add packages, ``docker import``.

No registry is needed or used: the base system and every package come from a Debian package mirror,
Python wheels from the host's pip and JavaScript packages from the npm registry (at build time only),
and the result is imported into the local Docker engine. What each image holds is a ``recipes.Recipe``
(``default``: Python with the PyTorch CPU wheel; ``polyglot``: the six languages of Aider's polyglot
benchmark). The tag is a hash of the recipe, so ``build_image`` is idempotent: an existing tag returns
at once. Users with a registry can build ``sandboxes/Dockerfile`` instead and set ``sandbox.image``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from metasearch.errors import InfrastructureError
from metasearch.sandboxes import recipes
from metasearch.sandboxes.recipes import COMMON_ENV, NODE_HOME, Recipe

log = logging.getLogger(__name__)

REPOSITORY = recipes.DEFAULT.repository
DEFAULT_MIRROR = "http://deb.debian.org/debian"
HOST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def recipe() -> str:
    return recipes.DEFAULT.fingerprint()


def default_image_tag() -> str:
    return recipes.DEFAULT.tag()


def image_tag(name: str) -> str:
    """The tag the recipe ``name`` builds (``ConfigError`` for an unknown name)."""
    return recipes.get(name).tag()


def resolve(image: str | None) -> str:
    """``sandbox.image`` as a tag: unset is the default image, a recipe name (``polyglot``) its tag."""
    if not image:
        return default_image_tag()
    return recipes.RECIPES[image].tag() if image in recipes.RECIPES else image


def build_hint(image: str) -> str:
    """How to get ``image``: the ``metasearch images build`` command of the recipe that makes it."""
    for spec in recipes.RECIPES.values():
        if image in (spec.name, spec.tag()) or image.split(":")[0] == spec.repository:
            cmd = "metasearch images build" + ("" if spec.name == "default" else f" {spec.name}")
            current = (
                ""
                if image in (spec.name, spec.tag(), f"{spec.repository}:latest")
                else (f", which makes {spec.tag()} (this recipe's current tag)")
            )
            return f"`{cmd}`{current}"
    return f"`docker build -t {image} ...` from a recipe of your own (images are never pulled)"


def cache_dir() -> Path:
    path = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "metasearch"
    path.mkdir(parents=True, exist_ok=True)
    return path


def image_exists(tag: str) -> bool:
    return (
        subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False).returncode == 0
    )


def build_default_image(*, force: bool = False, mirror: str | None = None) -> str:
    return build_image("default", force=force, mirror=mirror)


def build_image(name: str = "default", *, force: bool = False, mirror: str | None = None) -> str:
    """Build (or find) the image of recipe ``name``; returns its tag, also tagged ``<repository>:latest``.
    Needs root, debootstrap and a Docker engine; a failed step raises ``InfrastructureError``."""
    spec = recipes.get(name)
    tag = spec.tag()
    if shutil.which("docker") is None:
        raise InfrastructureError("the docker CLI is not installed", retryable=False)
    if not force and image_exists(tag):
        log.info("sandbox image %s is up to date", tag)
        return tag
    rootfs_tar = cache_dir() / f"rootfs-{spec.repository}-{tag.split(':')[1]}.tar"
    if name == "default" and not rootfs_tar.exists():  # the name before recipes had names
        rootfs_tar = cache_dir() / f"rootfs-{tag.split(':')[1]}.tar"
    if force or not rootfs_tar.exists():
        _build_rootfs(spec, rootfs_tar, mirror or _apt_mirror())
    log.info("importing %s into Docker", tag)
    changes = [*(f"ENV {line}" for line in (*COMMON_ENV, *spec.env))]
    changes += ["USER 65534:65534", "WORKDIR /tmp", 'CMD ["python3"]']
    args = ["docker", "import"] + [f"--change={c}" for c in changes] + [str(rootfs_tar), tag]
    _check(args, "docker import")
    _check(["docker", "tag", tag, f"{spec.repository}:latest"], "docker tag")
    return tag


def _build_rootfs(spec: Recipe, dest: Path, mirror: str) -> None:
    if os.geteuid() != 0:
        raise InfrastructureError(
            "building a sandbox image offline needs root (debootstrap, chroot)", retryable=False
        )
    if shutil.which("debootstrap") is None:
        raise InfrastructureError("debootstrap is missing: apt-get install -y debootstrap", retryable=False)
    with tempfile.TemporaryDirectory(prefix="ms-rootfs-", dir=cache_dir()) as tmp:
        root = Path(tmp) / "rootfs"
        log.info("debootstrap %s from %s (a few minutes)", spec.suite, mirror)
        include = f"--include={','.join(spec.base_packages)}"
        _check(["debootstrap", "--variant=minbase", include, spec.suite, str(root), mirror], "debootstrap")
        for path, text in spec.files:
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        if spec.apt_packages or spec.npm_packages or spec.commands:
            with _chroot_mounts(root):
                _apt_install(spec, root)
                _npm_install(spec, root)
                for command in spec.commands:
                    _check(["chroot", str(root), "sh", "-c", command], f"`{command}` in the rootfs")
        if spec.python_packages:
            _pip_install(spec, root)
        for junk in (
            "var/cache/apt/archives",
            "var/lib/apt/lists",
            "usr/share/doc",
            "usr/share/man",
            "usr/share/locale",
            "root/.npm",
        ):
            shutil.rmtree(root / junk, ignore_errors=True)
        (root / "tmp").chmod(0o1777)
        log.info("packing the rootfs")
        _check(["tar", "-C", str(root), "--numeric-owner", "-cf", str(dest) + ".part", "."], "tar")
        os.replace(str(dest) + ".part", dest)


@contextlib.contextmanager
def _chroot_mounts(root: Path) -> Iterator[None]:
    """/proc for package scripts (Java's) and the host's resolv.conf for the build-time downloads."""
    shutil.copyfile("/etc/resolv.conf", root / "etc" / "resolv.conf")
    _check(["mount", "-t", "proc", "proc", str(root / "proc")], "mount /proc in the rootfs")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(root / "proc")], check=False)
        (root / "etc" / "resolv.conf").write_text("")


def _apt_install(spec: Recipe, root: Path) -> None:
    if not spec.apt_packages:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    log.info("apt-get install %s", " ".join(spec.apt_packages))
    _check(["chroot", str(root), "apt-get", "update", "-q"], "apt-get update in the rootfs", env=env)
    install = ["chroot", str(root), "apt-get", "install", "-y", "-q", "--no-install-recommends"]
    _check([*install, *spec.apt_packages], "apt-get install in the rootfs", env=env)


def _npm_install(spec: Recipe, root: Path) -> None:
    """npm trusts the host's CA bundle for this download only (a TLS-inspecting proxy's CA is often
    there and not in a fresh rootfs); the copy is removed afterwards."""
    if not spec.npm_packages:
        return
    log.info("npm install %s", " ".join(spec.npm_packages))
    npm = ["chroot", str(root), "npm", "install", "--prefix", NODE_HOME, "--no-audit", "--no-fund"]
    npm += ["--fetch-retries=1", "--fetch-timeout=60000"]
    bundle = root / "tmp" / "host-ca-certificates.crt"
    if Path(HOST_CA_BUNDLE).is_file():
        shutil.copyfile(HOST_CA_BUNDLE, bundle)
        npm.append(f"--cafile=/{bundle.relative_to(root)}")
    try:
        _check([*npm, "--save-exact", *spec.npm_packages], "npm install in the rootfs")
    finally:
        bundle.unlink(missing_ok=True)


def _pip_install(spec: Recipe, root: Path) -> None:
    wheels = root / "opt" / "wheels"
    wheels.mkdir(parents=True)
    log.info("downloading wheels %s", " ".join(spec.python_packages))
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
            spec.python_version,
            "--platform",
            "manylinux2014_x86_64",
            "--platform",
            "manylinux_2_28_x86_64",
            *spec.python_packages,
        ],
        "pip download",
    )
    pip = ["chroot", str(root), "python3", "-m", "pip", "install", "-q", "--no-index", "--no-cache-dir"]
    pip += ["--break-system-packages", "--find-links", "/opt/wheels", *spec.python_packages]
    _check(pip, "pip install in the rootfs")
    shutil.rmtree(wheels)


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


def _check(args: list[str], what: str, env: dict[str, str] | None = None) -> None:
    result = subprocess.run(args, capture_output=True, text=True, check=False, env=env)
    if result.returncode != 0:
        raise InfrastructureError(
            f"{what} failed ({result.returncode}): {(result.stderr or result.stdout)[-2000:]}",
            retryable=False,
        )
