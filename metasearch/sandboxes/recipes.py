"""What goes into each offline-built sandbox image (``images.py`` builds them): ``default`` and ``polyglot``.

A recipe names a Debian suite, the packages ``debootstrap`` installs, the packages ``apt-get`` adds in the
chroot afterwards (it resolves virtual packages, which debootstrap does not), Python wheels from PyPI, npm
packages from the npm registry, files written into the root file system and environment variables. The
image tag is a hash of all of it, so a changed recipe is a new tag and an existing tag is up to date.

``polyglot`` runs Aider's polyglot benchmark in six languages without a network at run time: Debian 13's
Go, Rust (with the crates exercises import, from Debian's ``librust-*-dev`` packages, served to cargo as a
directory source), Node with jest and the Exercism babel preset (``npm install`` at build time into
``NODE_MODULES``), CMake, g++ and Boost.Date_Time, OpenJDK with Debian's JUnit 5 and AssertJ jars (the grader builds with
``javac`` and runs the JUnit console launcher; no Gradle), and Python with pytest.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from metasearch.errors import ConfigError

COMMON_ENV = (
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG=C.UTF-8",
    "PYTHONDONTWRITEBYTECODE=1",
)
NODE_HOME = "/opt/metasearch/node"
NODE_MODULES = f"{NODE_HOME}/node_modules"  # the grader links it into a JavaScript exercise
CARGO_REGISTRY = "/usr/share/cargo/registry"  # where Debian's librust-*-dev packages put crate sources


@dataclass(frozen=True)
class Recipe:
    name: str
    repository: str
    suite: str
    version: str
    base_packages: tuple[str, ...]  # debootstrap --include
    apt_packages: tuple[str, ...] = ()  # apt-get install --no-install-recommends, in the chroot
    python_packages: tuple[str, ...] = ()  # wheels for python_version, installed with pip --no-index
    python_version: str = "3.11"
    npm_packages: tuple[str, ...] = ()  # npm install into NODE_HOME at build time
    files: tuple[tuple[str, str], ...] = ()  # (absolute path, text) written into the root file system
    env: tuple[str, ...] = ()  # extra ENV lines, after COMMON_ENV
    commands: tuple[str, ...] = ()  # sh -c in the chroot, last (after apt and npm), network still up

    def fingerprint(self) -> str:
        parts = [self.version, self.suite, *self.base_packages, *self.python_packages]
        if self.apt_packages or self.npm_packages or self.files or self.env or self.commands:
            parts += [*self.apt_packages, *self.npm_packages, *self.env]
            parts += [f"{path}\n{text}" for path, text in self.files]
            parts += list(self.commands)
        return "\n".join(parts)

    def tag(self) -> str:
        return f"{self.repository}:{hashlib.sha256(self.fingerprint().encode()).hexdigest()[:12]}"


DEFAULT = Recipe(
    name="default",
    repository="metasearch-sandbox",
    suite="bookworm",  # Debian 12: python3 is 3.11, matching the cp311 wheels
    version="3",
    base_packages=("python3", "python3-pip", "git", "ca-certificates", "procps", "patch"),
    python_packages=("torch==2.13.0", "numpy", "pytest"),
)

# The benchmark's package.json devDependencies that running jest needs (eslint and types left out).
NPM_PACKAGES = (
    "jest@29.7.0",
    "babel-jest@29.7.0",
    "@babel/core@^7.25.2",
    "@exercism/babel-preset-javascript@~0.2.1",
    "core-js@~3.37.1",
)
CARGO_CONFIG = f"""\
# Crates come from Debian's packages (librust-*-dev); nothing is downloaded.
[source.crates-io]
replace-with = "debian-packages"

[source.debian-packages]
directory = "{CARGO_REGISTRY}"

[net]
offline = true
"""

# The standard packages the benchmark's Go exercises and tests import, compiled once into a build cache
# the grader copies to GOCACHE before `go test` (a fresh sandbox would otherwise compile them every run).
GO_WARM = "/opt/metasearch/go-warm"
GO_WARM_CACHE = "/opt/metasearch/go-cache"
GO_WARM_IMPORTS = [
    "bytes",
    "crypto/rand",
    "errors",
    "fmt",
    "io",
    "log",
    "math",
    "math/rand",
    "os",
    "reflect",
    "regexp",
    "runtime",
    "slices",
    "sort",
    "strconv",
    "strings",
    "sync",
    "text/template",
    "time",
    "unicode",
    "unicode/utf8",
]
GO_WARM_FILES = (
    (f"{GO_WARM}/go.mod", "module warm\n\ngo 1.18\n"),
    (
        f"{GO_WARM}/warm.go",
        "package warm\n\nimport (\n" + "".join(f'\t_ "{p}"\n' for p in GO_WARM_IMPORTS) + ")\n",
    ),
    (f"{GO_WARM}/warm_test.go", 'package warm\n\nimport "testing"\n\nfunc TestWarm(t *testing.T) {}\n'),
)
GO_WARM_UP = (
    f"cd {GO_WARM} && GOCACHE={GO_WARM_CACHE} GOPATH=/tmp/go-warm GOPROXY=off GOTOOLCHAIN=local "
    f"go test -count=1 . && rm -rf /tmp/go-warm && chmod -R a+rX {GO_WARM_CACHE}"
)

POLYGLOT = Recipe(
    name="polyglot",
    repository="metasearch-polyglot",
    suite="trixie",  # Debian 13: rustc 1.85 (edition 2021, [lints]), Go 1.24, Node 20, OpenJDK 21
    version="1",
    base_packages=("python3", "ca-certificates", "procps"),
    apt_packages=(
        "python3-pytest",
        "git",
        "patch",
        "golang-go",
        "rustc",
        "cargo",
        "librust-time-dev",  # gigasecond
        "librust-anyhow-dev",  # grep
        "librust-rand-dev",  # simple-cipher
        "librust-num-bigint-dev",  # decimal's example
        "librust-num-traits-dev",  # decimal's example
        "librust-thiserror-1-dev",  # grep's example
        "nodejs",
        "npm",
        "cmake",
        "make",
        "g++",
        "libboost-date-time-dev",  # C++ gigasecond and meetup
        "openjdk-21-jdk-headless",
        "junit5",
        "libassertj-core-java",
        "libopentest4j-java",
        "libapiguardian-java",
    ),
    npm_packages=NPM_PACKAGES,
    files=(
        # Cargo reads .cargo/config.toml in every parent of the working directory, / included, and
        # CARGO_HOME stays a writable scratch directory.
        ("/.cargo/config.toml", CARGO_CONFIG),
        (f"{NODE_HOME}/package.json", json.dumps({"name": "metasearch-polyglot-node", "private": True})),
        *GO_WARM_FILES,
    ),
    env=(
        "CARGO_HOME=/tmp/cargo",
        "GOPATH=/tmp/go",
        "GOCACHE=/tmp/go-cache",
        "GOPROXY=off",
        "GOTOOLCHAIN=local",
        "npm_config_cache=/tmp/npm",
        "npm_config_offline=true",
    ),
    commands=(GO_WARM_UP,),
)

RECIPES = {recipe.name: recipe for recipe in (DEFAULT, POLYGLOT)}


def get(name: str) -> Recipe:
    if name not in RECIPES:
        raise ConfigError(f"image: unknown image {name!r}; choose from {', '.join(RECIPES)}")
    return RECIPES[name]
