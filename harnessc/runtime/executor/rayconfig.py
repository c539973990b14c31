"""The run's executor settings: `run --executor` / `--ray-address` over harness.yaml's
`executor:` (plan.json's Plan.executor), and the check that Ray can be imported.

The one module that imports Ray: require_ray() for the driver (ray.py) and `harnessc doctor`,
and the few pieces of Ray's API the worker's function (remote.py) and doctor use by name.
Nothing here imports Ray until one of them is called: a local run never pays for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ...vocab import RAY_ADDRESS_FORMS
from ...vocab import ray_address as parse_ray_address
from . import ExecutorError

MIN_RAY = (2, 50)  # pyproject's `ray` extra: ray>=2.50
INSTALL = "pip install 'harnessc[ray]'"


@dataclass(frozen=True)
class ExecutorSettings:
    """Where this run's attempts go (only for a Ray run: a local one has no settings)."""

    kind: str = "ray"
    address: str | None = None  # auto | HOST:PORT | ray://HOST:PORT; None: a local cluster for the run
    num_cpus_per_attempt: float = 1
    resources: Mapping[str, float] = field(default_factory=dict)  # every attempt's custom Ray resources
    placement: str = "commands"  # commands: command and CLI agents on the workers | all: API agents too
    clone_url: str | None = None  # workers clone this (cached per node); None: a git bundle of the base commit

    def resources_for(self, node_resources: Mapping[str, float] | None) -> dict[str, float]:
        """The custom resources one attempt of a task asks for: these, and the task's own
        `resources:` over them (its amount wins for a name both give)."""
        return {**self.resources, **(node_resources or {})}


def resolve_executor(plan: Any, executor: str | None = None, ray_address: str | None = None) -> ExecutorSettings | None:
    """The run's executor: None for local, else the Ray settings. `executor` (local | ray,
    from `run --executor`) wins over the plan's kind; `ray_address` (`run --ray-address`)
    implies ray and wins over the plan's address. Raises ExecutorError for a combination
    that cannot be meant (`--executor local --ray-address ...`) or an address Ray cannot use."""
    configured = getattr(plan, "executor", None)  # planfile.Executor, or None for local
    if executor not in (None, "local", "ray"):
        raise ExecutorError(f"unknown executor '{executor}'", "use local or ray")
    if executor == "local" and ray_address is not None:
        raise ExecutorError("--ray-address needs the ray executor, and --executor local was given",
                            "drop --executor local (--ray-address implies --executor ray), or drop --ray-address")
    kind = executor or ("ray" if ray_address is not None or configured is not None else "local")
    if kind == "local":
        return None
    if ray_address is not None:
        try:
            parse_ray_address(ray_address)
        except ValueError as e:
            raise ExecutorError(f"--ray-address '{ray_address}' {e}", f"write {RAY_ADDRESS_FORMS}") from None
    if configured is None:  # --executor ray over a plan without settings: Ray's defaults
        return ExecutorSettings(address=ray_address)
    return ExecutorSettings(
        address=ray_address if ray_address is not None else configured.address,
        num_cpus_per_attempt=configured.num_cpus_per_attempt,
        resources=dict(configured.resources or {}),
        placement=configured.placement,
        clone_url=configured.clone_url,
    )


def require_ray() -> Any:
    """The `ray` module, or ExecutorError saying how to install it (missing, or older than
    the extra asks for)."""
    try:
        import ray
    except ImportError:
        raise ExecutorError(f"executor ray needs Ray: {INSTALL}") from None  # one line: it says what to do
    version = getattr(ray, "__version__", "")
    if _version_tuple(version) < MIN_RAY:
        raise ExecutorError(f"executor ray needs Ray {MIN_RAY[0]}.{MIN_RAY[1]} or later; this one is {version or 'unknown'}",
                            "pip install -U 'harnessc[ray]'")
    return ray


def _version_tuple(version: str) -> tuple[int, ...]:
    """'2.60.0' -> (2, 60, 0); what is no number ends it ('2.60.0rc1' -> (2, 60))."""
    out = []
    for part in version.split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def worker_node_id() -> str:
    """The Ray node this process runs on ("" when Ray does not say); raises outside a Ray
    worker (no Ray, no runtime context)."""
    import ray

    return ray.get_runtime_context().get_node_id() or ""


def fetch(ref: Any) -> Any:
    """The object behind a Ray object ref (on a worker: a bundle the driver put)."""
    import ray

    return ray.get(ref)


def cloudpickled(value: Any) -> bytes:
    """`value` pickled by Ray's cloudpickle (what the standard pickler cannot take: a lambda)."""
    from ray import cloudpickle

    return cloudpickle.dumps(value)


def auto_address() -> str | None:
    """The HOST:PORT `ray.init(address="auto")` would connect to (RAY_ADDRESS, or the cluster
    `ray start` left in Ray's temp directory), or None when there is none."""
    try:
        from ray._private.services import get_ray_address_from_environment  # Ray's own lookup

        return get_ray_address_from_environment("auto", None)
    except Exception:  # ConnectionError: no cluster; anything else: this Ray moved its lookup
        return None


def pinned_to(node_id: str) -> Any:
    """The scheduling strategy that runs a Ray task on that node and no other."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id, soft=False)
