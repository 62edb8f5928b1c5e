"""Offline image recipes: names, tags and the hints that name the build command (no image is built here)."""

from __future__ import annotations

import pytest

from metasearch.errors import ConfigError
from metasearch.sandboxes import images, recipes


def test_the_default_image_keeps_its_tag_and_the_polyglot_image_has_its_own() -> None:
    # The default recipe's fingerprint is the one it had before recipes had names: existing images stay valid.
    assert images.recipe() == "\n".join(
        ["3", "bookworm", *recipes.DEFAULT.base_packages, *recipes.DEFAULT.python_packages]
    )
    assert images.default_image_tag() == recipes.DEFAULT.tag() == images.image_tag("default")
    polyglot = images.image_tag("polyglot")
    assert polyglot.startswith("metasearch-polyglot:") and polyglot != images.default_image_tag()
    changed = recipes.Recipe(**{**recipes.POLYGLOT.__dict__, "apt_packages": ("golang-go",)})
    assert changed.tag() != polyglot  # any recipe change is a new tag


def test_sandbox_image_names_resolve_and_hints_name_the_build_command() -> None:
    assert images.resolve(None) == images.default_image_tag()
    assert images.resolve("polyglot") == images.image_tag("polyglot")
    assert images.resolve("my/own:tag") == "my/own:tag"
    assert images.build_hint(images.image_tag("polyglot")) == "`metasearch images build polyglot`"
    assert images.build_hint(images.default_image_tag()) == "`metasearch images build`"
    stale = images.build_hint("metasearch-polyglot:000000000000")
    assert "metasearch images build polyglot" in stale and images.image_tag("polyglot") in stale
    assert "docker build" in images.build_hint("my/own:tag")
    with pytest.raises(ConfigError, match="unknown image 'poly'"):
        images.image_tag("poly")


def test_the_polyglot_recipe_serves_crates_offline_and_warms_go() -> None:
    files = dict(recipes.POLYGLOT.files)
    config = files["/.cargo/config.toml"]
    assert 'replace-with = "debian-packages"' in config and recipes.CARGO_REGISTRY in config
    assert "offline = true" in config
    assert {"librust-time-dev", "librust-anyhow-dev", "librust-rand-dev", "junit5"} <= set(
        recipes.POLYGLOT.apt_packages
    )
    assert any(p.startswith("jest@") for p in recipes.POLYGLOT.npm_packages)
    assert recipes.GO_WARM_CACHE in recipes.POLYGLOT.commands[0]


@pytest.mark.docker
def test_a_missing_polyglot_image_names_its_build_command(docker_sandbox_factory: object) -> None:
    from metasearch.errors import InfrastructureError
    from metasearch.sandboxes.auto import make_sandbox
    from metasearch.sandboxes.config import SandboxSection

    stale = SandboxSection(name="docker", image="metasearch-polyglot:000000000000")
    with pytest.raises(
        InfrastructureError, match=r"not found \(build it with `metasearch images build polyglot`"
    ):
        make_sandbox(stale, study="pytest-images")
