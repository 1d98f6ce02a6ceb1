"""Local base images: the debootstrap image has its tools, builds are cached by recipe hash, mirrors are found."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentcompass._errors import ConfigError
from agentcompass.environments.docker import images
from agentcompass.environments.docker.images import (
    LABEL_RECIPE,
    apt_mirror,
    build_base_image,
    build_base_main,
    content_tag,
    recipe_hash,
    split_tag,
)

from ..conftest import docker_cli, run_in_thread

pytestmark = pytest.mark.timeout(300)


def test_base_image_has_the_promised_tools(base_image: str) -> None:
    out = docker_cli("run", "--rm", "--network", "none", base_image, "bash", "-c",
                     "python3 -c 'print(1)' && git --version && ps --version && ls /workspace && echo ok")
    assert out.strip().endswith("ok")
    config = json.loads(docker_cli("image", "inspect", base_image))[0]["Config"]
    assert any(e.startswith("PATH=/usr/local/sbin") for e in config["Env"])


def test_the_base_image_tells_dpkg_not_to_fsync_as_debians_own_images_do(base_image: str) -> None:
    path, text = images.DPKG_SETTINGS
    out = docker_cli("run", "--rm", "--network", "none", base_image, "cat", f"/{path}")
    assert out == text and "force-unsafe-io" in out.splitlines()
    # dpkg reads every file of dpkg.cfg.d: the option is in effect for each package a derived image installs
    listed = docker_cli("run", "--rm", "--network", "none", base_image, "bash", "-c",
                        "grep -rlx force-unsafe-io /etc/dpkg/dpkg.cfg.d/")
    assert listed.split() == [f"/{path}"]


def test_the_dpkg_settings_are_part_of_the_base_images_recipe(monkeypatch: pytest.MonkeyPatch) -> None:
    before = recipe_hash("debootstrap")
    monkeypatch.setattr(images, "DPKG_SETTINGS", (images.DPKG_SETTINGS[0], "force-confold\n"))
    assert recipe_hash("debootstrap") != before  # another setting is another image, rebuilt under its own tag


def _image(ref: str) -> dict[str, Any]:
    return json.loads(docker_cli("image", "inspect", ref))[0]


def _rmi(*refs: str) -> None:
    for ref in refs:
        subprocess.run(["docker", "rmi", "-f", ref], capture_output=True, timeout=60)


def test_busybox_build_is_cached_by_recipe_hash_and_rebuilt_on_force(docker_available: None) -> None:
    tag = f"agentcompass-test/busybox:{uuid.uuid4().hex[:8]}"
    hashed = content_tag(tag, "busybox")
    first = ""
    try:
        run_in_thread(lambda: build_base_image(tag, method="busybox"))
        first = _image(tag)["Id"]
        assert _image(hashed)["Id"] == first  # the build is tagged with its recipe hash too
        assert _image(tag)["Config"]["Labels"][LABEL_RECIPE] == recipe_hash("busybox")
        assert run_in_thread(lambda: build_base_image(tag, method="busybox")) == tag
        assert _image(tag)["Id"] == first  # an unchanged recipe is never rebuilt
        assert docker_cli("run", "--rm", "--network", "none", tag, "sh", "-c", "echo $((6*7))").strip() == "42"
        time.sleep(1.1)  # a new mtime makes a new layer
        run_in_thread(lambda: build_base_image(tag, method="busybox", force=True))
        assert _image(tag)["Id"] != first and _image(hashed)["Id"] == _image(tag)["Id"]
    finally:
        _rmi(tag, hashed)
        if first:  # the first build lost its tags to the forced rebuild
            _rmi(first)


def test_an_image_of_another_recipe_under_the_tag_is_rebuilt(docker_available: None, tmp_path: Path) -> None:
    tag = f"agentcompass-test/busybox:{uuid.uuid4().hex[:8]}"
    (tmp_path / "rootfs").mkdir()
    (tmp_path / "rootfs" / "stale").write_text("an older recipe's build\n")
    subprocess.run(f"tar -C {tmp_path / 'rootfs'} -c . | docker import --change 'LABEL {LABEL_RECIPE}=old' - {tag}",
                   shell=True, check=True, capture_output=True, timeout=120)
    stale = _image(tag)["Id"]
    try:
        run_in_thread(lambda: build_base_image(tag, method="busybox"))
        rebuilt = _image(tag)
        assert rebuilt["Id"] != stale and rebuilt["Config"]["Labels"][LABEL_RECIPE] == recipe_hash("busybox")
        assert docker_cli("run", "--rm", "--network", "none", tag, "sh", "-c", "echo ok").strip() == "ok"
    finally:
        _rmi(tag, content_tag(tag, "busybox"), stale)


def test_content_tags_carry_the_recipe_hash_of_their_method() -> None:
    base, busybox = recipe_hash("debootstrap"), recipe_hash("busybox")
    assert base != busybox and len(base) == 64
    assert content_tag("agentcompass/base:debian-bookworm") == f"agentcompass/base:debian-bookworm-{base[:12]}"
    assert content_tag("plain") == f"plain:latest-{base[:12]}"


def test_bad_method_and_tag_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="method"):
        run_in_thread(lambda: build_base_image("x:y", method="kaniko"))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="tag"):
        run_in_thread(lambda: build_base_image("has space"))
    with pytest.raises(SystemExit):
        build_base_main(["--method", "kaniko"])


def test_build_base_main_reports_an_existing_image(busybox_image: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert build_base_main(["--method", "busybox", "--tag", busybox_image]) == 0
    assert busybox_image in capsys.readouterr().out


def test_apt_mirror_reads_deb822_and_one_line_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text("deb cdrom:[Debian]/ bookworm main\n"
                                           "deb [arch=amd64] http://mirror.one/debian/ trixie main\n")
    assert apt_mirror("bookworm", apt_dir=str(tmp_path)) == "http://deb.debian.org/debian"
    assert apt_mirror("trixie", apt_dir=str(tmp_path)) == "http://mirror.one/debian"
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.two/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\n"
        "Types: deb\nURIs: http://security.example/debian-security\nSuites: bookworm-security\n")
    assert apt_mirror("bookworm", apt_dir=str(tmp_path)) == "http://mirror.two/debian"


def test_split_tag() -> None:
    assert split_tag("agentcompass/base:debian-bookworm") == ("agentcompass/base", "debian-bookworm")
    assert split_tag("localhost:5000/img") == ("localhost:5000/img", "latest")
    assert split_tag("img") == ("img", "latest")
