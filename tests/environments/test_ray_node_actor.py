"""Errors raised on a node cross to the coordinator as the types the engine classifies."""

from __future__ import annotations

from agentcompass._errors import ConfigError, EnvironmentError_
from agentcompass.environments.docker_pull import ImagePullError
from agentcompass.environments.ray_node_actor import decode_error, encode_error


def test_a_config_error_keeps_its_field_and_a_pull_error_its_kind() -> None:
    err = decode_error(encode_error(ConfigError("bad cwd", field="cwd")), "n1")
    assert isinstance(err, ConfigError) and err.field == "cwd"
    pull = decode_error(encode_error(ImagePullError("gone", kind="image_not_found", image="x:1")), "n1")
    assert isinstance(pull, ImagePullError) and pull.kind == "image_not_found" and not pull.retryable


def test_file_errors_stay_file_errors_and_anything_else_is_an_environment_error_naming_the_node() -> None:
    assert isinstance(decode_error(encode_error(FileNotFoundError("no /x")), "n1"), FileNotFoundError)
    env = decode_error(encode_error(EnvironmentError_("container is gone")), "n2")
    assert isinstance(env, EnvironmentError_) and "node n2" in str(env)

    class Odd(Exception):
        pass

    odd = decode_error(encode_error(Odd("strange")), "n3")
    assert isinstance(odd, EnvironmentError_) and "Odd: strange" in str(odd)
