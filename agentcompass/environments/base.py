"""The environment provider contract: what the engine calls on a provider, each optional hook with a real default,
and ``ProviderCapabilities``, what a provider can do (the engine reads it instead of probing for methods).

A provider subclasses ``EnvironmentProvider``, declares its ``capabilities`` and implements ``open``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import msgspec

from .._errors import ConfigError, EnvironmentError_
from ..params import convert_params

if TYPE_CHECKING:
    from ..dependencies import Requirement
    from ..interfaces import ComponentContext, Environment, EnvOpenSpec, ImageRecipe, NetworkPolicy

ALL_NETWORK_MODES: tuple[str, ...] = ("public", "none", "model", "allowlist")


class ProviderCapabilities(msgspec.Struct, frozen=True):
    """What a provider can do."""

    #: its sandboxes live on another machine (open rate-limited by default: ``environment_qps``).
    remote: bool = False
    #: the engine forwards ``open_timeout``/``close_timeout`` to the provider's params as well as bounding the
    #: phases with them.
    phase_timeouts: bool = False
    #: the ``NetworkPolicy`` modes it can enforce (``check_network_policy`` refuses the others).
    network_modes: tuple[str, ...] = ("public",)
    #: it runs images: the engine fetches them through the launch's image cache (``ensure_image``,
    #: ``image_size``, ``remove_image``, ``disk_free_bytes``) and accepts the image params.
    images: bool = False
    #: it can route a sandbox to the model gateway (``ensure_model_route``; ``host_address`` for ``public``).
    model_route: bool = False
    #: environment creations in flight at once, per provider name (``max_creates_in_flight`` overrides); None:
    #: only the provider's environment limit applies.
    max_creates_in_flight: int | None = None
    #: it binds ``EnvOpenSpec.mounts`` (host directories, read-only) into its environments.
    mounts: bool = False


class PullProgress(msgspec.Struct, frozen=True):
    """One look at an image pull in flight. Bytes are the registry's (compressed) layer bytes."""

    image: str
    layers_total: int
    layers_done: int
    bytes_done: int
    bytes_total: int
    #: bytes per second over the last few seconds
    rate_bps: float
    status: Literal["pulling", "retrying", "done", "failed"]


#: ``ensure_image``'s ``on_pull_progress``: called with each look at a pull (throttled).
ProgressCallback = Callable[[PullProgress], Any]


class EnvironmentProvider(abc.ABC):
    """Opens environments of one kind. One instance per request; limits are per provider ``name``.
    Constructed as ``Cls(params, ctx)``; a subclass calls ``super().__init__(params, ctx)``, which keeps them as
    ``self.params`` (its ``Params`` struct) and ``self.ctx``."""

    #: the provider's short name: ``provider_limits`` and the image cache count per name (the class name when
    #: not given).
    name: ClassVar[str] = ""
    capabilities: ClassVar[ProviderCapabilities] = ProviderCapabilities()
    #: packages the provider imports, checked (or installed) before it is constructed.
    requirements: ClassVar[tuple[Requirement, ...]] = ()
    #: the image an environment gets when its task names none (None: the provider has no default image).
    image: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.name:
            cls.name = cls.__name__

    def __init__(self, params: Any, ctx: ComponentContext) -> None:
        # the registry passes the ``Params`` struct it converted; a dict given by hand is converted here
        self.params = convert_params(type(self), params, f"environment {self.name}")
        self.ctx = ctx

    @property
    def remote(self) -> bool:
        """Whether its sandboxes live on another machine (``capabilities.remote``)."""
        return self.capabilities.remote

    @abc.abstractmethod
    async def open(self, spec: EnvOpenSpec) -> Environment:
        """Open one environment; the engine closes it (``Environment.close``)."""

    async def reserve(self, spec: EnvOpenSpec) -> None:
        """Wait for room to open ``spec``, outside the open's deadline: a provider whose capacity fills up (the
        nodes of a cluster) queues opens here instead of failing them when ``open_timeout`` runs out. The engine
        then calls ``open`` with this same ``spec``, or ``unreserve(spec)`` when it does not get that far or the
        open fails. Default: nothing to wait for."""
        return None  # a hook with nothing to do by default, not a required method

    async def unreserve(self, spec: EnvOpenSpec) -> None:
        """Give back what ``reserve(spec)`` holds unless ``open(spec)`` took it over. Default: nothing."""
        return None  # a hook with nothing to do by default, not a required method

    async def start(self) -> None:
        """Called before a request's first task (e.g. sweep what dead runs left). Default: nothing."""
        return None  # a hook with nothing to do by default, not a required method

    async def aclose(self) -> None:
        """Release what the provider holds at the end of the request. Default: nothing."""
        return None  # a hook with nothing to do by default, not a required method

    def check_network_policy(self, policy: NetworkPolicy) -> None:
        """Raise ConfigError before any task starts if ``policy`` cannot be enforced. Default: refuse a mode not
        in ``capabilities.network_modes``."""
        modes = self.capabilities.network_modes
        if policy.mode not in modes:
            raise ConfigError(
                f"environment {self.name!r} cannot enforce network policy mode {policy.mode!r}. Allowed: "
                f"{', '.join(repr(m) for m in modes)}.", field="environment_params.network_policy")

    async def ensure_image(self, image: str | None = None, recipe: ImageRecipe | None = None, *,
                           on_pull_progress: ProgressCallback | None = None) -> str | None:
        """Make sure ``image`` (default: ``self.image``) is present, building it from ``recipe`` when given;
        returns its ref. Default (a provider without images): nothing to do for no image, a ConfigError for one."""
        ref = image or self.image
        if ref is None and recipe is None:
            return None
        raise ConfigError(f"environment {self.name!r} does not run images (asked for {ref or recipe!r}).",
                          field="environment")

    async def ensure_model_route(self, model_host: str, model_port: int) -> tuple[str, int]:
        """Make ``model_host:model_port`` reachable from ``model``-mode sandboxes; the in-sandbox ``(host, port)``.
        Default: ConfigError (the provider cannot route its sandboxes)."""
        raise ConfigError(f'network_policy "model": environment {self.name!r} cannot route its sandboxes to the '
                          "model gateway.", field="environment_params.network_policy")

    async def host_address(self) -> str:
        """This machine's address as ``public``-mode sandboxes reach it. Default: EnvironmentError_ (unknown)."""
        raise EnvironmentError_(f"environment {self.name!r} does not say how its sandboxes reach this host")

    def image_store(self) -> str:
        """Which image store (daemon) this provider's images live in: the image cache counts pulls and room per
        store. Default: ``"local"``."""
        return "local"

    def builds_image(self, ref: str) -> bool:
        """Whether ``ensure_image(ref)`` without a recipe builds the image rather than pulls it. Default: False."""
        return False

    def pull_stats(self, image: str) -> Any | None:
        """How ``image`` came to be present (for the attempt's detail); None (the default) when unknown."""
        return None

    def node_of(self, env: Environment) -> str | None:
        """The machine ``env`` runs on, for a provider spread over several (recorded per attempt and in
        ``EnvOpened``); None (the default) for a provider on one machine."""
        return None

    async def image_size(self, ref: str) -> int | None:
        """The size in bytes of image ``ref`` in the store, None when it is not there. A provider that does not
        override it cannot tell: the image cache then makes its images present and never removes them."""
        return None

    async def remove_image(self, ref: str) -> int:
        """Remove image ``ref``; the bytes freed. Default: nothing removed (0)."""
        return 0

    async def disk_free_bytes(self) -> int | None:
        """Free bytes where images are stored; None (the default) when unknown."""
        return None

    def resolved_settings(self) -> dict[str, Any]:
        """What the provider chose beyond its params, for params.json. Default: ``{}``."""
        return {}


__all__ = ["ALL_NETWORK_MODES", "EnvironmentProvider", "ProgressCallback", "ProviderCapabilities", "PullProgress"]
