"""Local base images: the debootstrap image has its tools, builds are cached by tag, mirrors are found."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from agentcompass._errors import ConfigError
from agentcompass.environments.docker_images import apt_mirror, build_base_image, build_base_main, split_tag

from .conftest import docker_cli, run_in_thread

pytestmark = pytest.mark.timeout(300)


def test_base_image_has_the_promised_tools(base_image: str) -> None:
    out = docker_cli("run", "--rm", "--network", "none", base_image, "bash", "-c",
                     "python3 -c 'print(1)' && git --version && ps --version && ls /workspace && echo ok")
    assert out.strip().endswith("ok")
    config = json.loads(docker_cli("image", "inspect", base_image))[0]["Config"]
    assert any(e.startswith("PATH=/usr/local/sbin") for e in config["Env"])


def test_busybox_build_is_cached_by_tag_and_rebuilt_on_force(docker_available: None) -> None:
    tag = f"agentcompass-test/busybox:{uuid.uuid4().hex[:8]}"
    first = ""
    try:
        run_in_thread(lambda: build_base_image(tag, method="busybox"))
        first = json.loads(docker_cli("image", "inspect", tag))[0]["Id"]
        started = time.monotonic()
        assert run_in_thread(lambda: build_base_image(tag, method="busybox")) == tag
        assert time.monotonic() - started < 2
        assert json.loads(docker_cli("image", "inspect", tag))[0]["Id"] == first
        assert docker_cli("run", "--rm", "--network", "none", tag, "sh", "-c", "echo $((6*7))").strip() == "42"
        time.sleep(1.1)  # a new mtime makes a new layer
        run_in_thread(lambda: build_base_image(tag, method="busybox", force=True))
        assert json.loads(docker_cli("image", "inspect", tag))[0]["Id"] != first
    finally:
        docker_cli("rmi", "-f", tag)
        if first:  # the first build lost its tag to the forced rebuild
            subprocess.run(["docker", "rmi", "-f", first], capture_output=True, timeout=30)


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
