"""The executor: runs a rewritten graph node by node, frees each value after its last reader,
and keeps exact accounting of the bytes it holds."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import Tensor, fx, nn

from ..memory import engine_live_bytes
from .accounting import LiveAccount, RunStats
from .chain import BandedChain
from .frontends.ir import OutsideCapturedSizes, checked_sizes, size_checks
from .head import LabelsHead, labels_from_logits
from .layout import CHANNELS_LAST, as_channels_last
from .liveness import in_place_operands, values_dying_after, write_in_place
from .shapes import meta_copy

OUTPUTS = ("labels", "logits")
StepCallback = Callable[[str, int], None]  # (step name, live bytes after it)


@dataclass(frozen=True)
class Step:
    node: fx.Node
    name: str
    call: Callable[..., Any] | None  # None for placeholder / output
    dying: tuple[fx.Node, ...]  # values to free after this step
    in_place_operands: tuple[int, ...]  # arguments the result may overwrite (a + b, a * b, forward_in_place)
    module: nn.Module | None  # for call_module steps (pieced steps report transient bytes)


def _steps_of(graph_module: fx.GraphModule) -> list[Step]:
    dying = values_dying_after(graph_module.graph)
    steps = []
    for node in graph_module.graph.nodes:
        module = graph_module.get_submodule(node.target) if node.op == "call_module" else None
        call: Callable[..., Any] | None
        if node.op == "call_module":
            call = module
        elif node.op == "call_function":
            call = node.target  # type: ignore[assignment]
        elif node.op == "call_method":
            method_name = str(node.target)
            call = lambda self, *a, _m=method_name, **k: getattr(self, _m)(*a, **k)  # noqa: E731
        elif node.op == "get_attr":
            attribute = _fetch_attr(graph_module, str(node.target))
            call = lambda _v=attribute: _v  # noqa: E731
        else:
            call = None
        dies_here = dying[node]
        in_place = in_place_operands(node, dies_here) if module is None else _in_place_input(node, dies_here, module)
        steps.append(Step(node, node.name if module is None else str(node.target), call,
                          tuple(dies_here), in_place, module))
    return steps


def _in_place_input(node: fx.Node, dying: list[fx.Node], module: nn.Module) -> tuple[int, ...]:
    """(0,) when the module can write its result into its first input (`forward_in_place`) and that input
    dies here."""
    if not hasattr(module, "forward_in_place") or not node.args or node.kwargs:
        return ()
    first = node.args[0]
    return (0,) if first in dying and node.args.count(first) == 1 else ()


def _inside_captured_sizes(graph_module: fx.GraphModule, shape: tuple[int, ...]) -> tuple[int, ...]:
    """`shape` with its height and width moved into the range the graph's size checks hold for (and to their
    multiples): the nearest size the graph runs, whose estimate scales by the pixel count to `shape`'s."""
    sides = list(shape)
    for check in size_checks(graph_module):
        heights, widths, multiples = checked_sizes(check)
        for axis, (low, high) in enumerate((heights, widths)):
            step = multiples[axis]
            side = min(max(sides[2 + axis], low), high)
            rounded_up = -(-side // step) * step
            sides[2 + axis] = rounded_up if rounded_up <= high else side // step * step
    return tuple(sides)


def _fetch_attr(graph_module: fx.GraphModule, target: str) -> Any:
    value: Any = graph_module
    for part in target.split("."):
        value = getattr(value, part)
    return value


class Plan:
    """A compiled model: `run` an image through it, `estimate_peak` before running it.

    `notes` says what the passes did; `fallbacks` names the nodes run as plain eager calls.
    """

    def __init__(self, graph_module: fx.GraphModule | None, eager_model: nn.Module | None, *,
                 device: torch.device, dtype: torch.dtype, notes: list[str], fallbacks: list[str]) -> None:
        self.graph_module = graph_module
        self.eager_model = eager_model  # used when the graph could not be captured, or not for this size
        self.device = device
        self.dtype = dtype
        self.notes = notes
        self.fallbacks = fallbacks
        self.last_stats: RunStats | None = None
        self._steps = _steps_of(graph_module) if graph_module is not None else []
        self._head = next((s.module for s in self._steps if isinstance(s.module, LabelsHead)
                           or isinstance(s.module, BandedChain) and not s.module.interior), None)
        self._meta_plan: Plan | None = None
        self._peak_estimates: dict[tuple[tuple[int, ...], str], int] = {}  # (shape, output) -> bytes

    def run(self, x: Tensor, *, output: str = "labels", on_step: StepCallback | None = None) -> Tensor:
        """(1, C, H, W) -> labels (1, H, W) uint8, or logits (1, K, H, W) float32."""
        if output not in OUTPUTS:
            raise ValueError(f"unknown output {output!r}; valid: {', '.join(OUTPUTS)}")
        if x.dim() != 4 or x.shape[0] != 1:
            raise ValueError(f"Plan.run takes one image shaped (1, C, H, W), got {tuple(x.shape)}")
        stats = RunStats(tuple(x.shape))
        start = time.perf_counter()
        with torch.inference_mode():
            result = self._execute(x, output, stats, on_step, publish=x.device.type != "meta")
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        stats.seconds = time.perf_counter() - start
        self.last_stats = stats
        return result

    def estimate_peak(self, input_shape: tuple[int, ...], output: str = "labels") -> int:
        """Predicted peak bytes (as `last_stats.peak_bytes` would count them) for an input shape.

        Runs the same plan on meta tensors: shapes and liveness only, no arithmetic.
        """
        if self.graph_module is None:
            return 0
        key = (tuple(int(d) for d in input_shape), output)
        if key in self._peak_estimates:  # jobs ask once per image or frame: same shapes, same answer
            return self._peak_estimates[key]
        if self._meta_plan is None:
            meta_module = meta_copy(self.graph_module)
            self._meta_plan = Plan(meta_module, None, device=torch.device("meta"), dtype=self.dtype,
                                   notes=[], fallbacks=[])
        try:
            self._meta_plan.run(torch.empty(tuple(input_shape), device="meta"), output=output)
        except OutsideCapturedSizes:
            held = _inside_captured_sizes(self.graph_module, key[0])  # the eager model runs it: scale a size
            if self.eager_model is None or held == key[0]:
                raise
            pixels, held_pixels = key[0][2] * key[0][3], held[2] * held[3]
            self._peak_estimates[key] = self.estimate_peak(held, output) * pixels // held_pixels
            return self._peak_estimates[key]
        assert self._meta_plan.last_stats is not None
        self._peak_estimates[key] = self._meta_plan.last_stats.peak_bytes
        return self._peak_estimates[key]

    def describe(self) -> str:
        """One line per note and fallback, for logs and the CLI."""
        lines = list(self.notes)
        lines += [f"ran eagerly: {name}" for name in self.fallbacks]
        return "\n".join(lines)

    def _execute(self, x: Tensor, output: str, stats: RunStats, on_step: StepCallback | None,
                 publish: bool) -> Tensor:
        if self.graph_module is None:
            return self._execute_eager(x, output, stats)
        try:
            return self._execute_graph(x, output, stats, on_step, publish)
        except OutsideCapturedSizes:
            if self.eager_model is None:
                raise
            return self._execute_eager(x, output, stats)  # a size the capture's branch did not take

    def _execute_graph(self, x: Tensor, output: str, stats: RunStats, on_step: StepCallback | None,
                       publish: bool) -> Tensor:
        account = LiveAccount()
        account.mark_external(x)
        if self._head is not None:
            self._head.emit = output
        env: dict[fx.Node, Any] = {}
        result: Any = None
        try:
            for step in self._steps:
                node = step.node
                if node.op == "placeholder":
                    value: Any = x.to(self.device, self.dtype).contiguous(memory_format=CHANNELS_LAST)
                elif node.op == "output":
                    result = env[node.args[0]] if isinstance(node.args[0], fx.Node) else None
                    break
                else:
                    args = fx.node.map_arg(node.args, env.__getitem__)
                    kwargs = fx.node.map_arg(node.kwargs, env.__getitem__)
                    value = self._call(step, args, kwargs, account)
                    del args, kwargs
                env[node] = value
                account.hold(value)
                transient = int(getattr(step.module, "transient_bytes", 0))
                peak_during = account.live_bytes + transient
                for dead in step.dying:
                    account.release(env.pop(dead))
                del value
                stats.record(step.name, account.live_bytes, peak_during)
                if publish:
                    engine_live_bytes.set(account.live_bytes)
                if on_step is not None:
                    on_step(step.name, account.live_bytes)
        finally:  # done, cancelled between steps or failed: the engine holds none of its tensors now (a result
            if publish:  # is its caller's)
                engine_live_bytes.set(0)
        if not isinstance(result, Tensor):
            raise TypeError(f"the model returned {type(result).__name__}; the engine needs one logits tensor")
        env.clear()
        return self._finish(result, output, emitted_labels=self._head is not None and output == "labels")

    def _call(self, step: Step, args: Any, kwargs: Any, account: LiveAccount) -> Any:
        assert step.call is not None
        if step.module is not None and step.in_place_operands:  # a step that may overwrite its input
            if isinstance(args[0], Tensor) and account.may_overwrite(args[0]):
                return cast(Callable[..., Tensor], step.module.forward_in_place)(*args)
            return as_channels_last(step.call(*args, **kwargs))
        if step.in_place_operands:
            written = write_in_place(step.node, args, step.in_place_operands, account.may_overwrite)
            if written is not None:
                return written
        return as_channels_last(step.call(*args, **kwargs))

    def _finish(self, result: Tensor, output: str, emitted_labels: bool) -> Tensor:
        if emitted_labels:
            return result  # (1, H, W) uint8, made band by band by the head
        if output == "labels":
            return labels_from_logits(result)
        return result.float().contiguous()

    def _execute_eager(self, x: Tensor, output: str, stats: RunStats) -> Tensor:
        assert self.eager_model is not None
        logits = self.eager_model(x.to(self.device, self.dtype))
        stats.record("model", int(logits.untyped_storage().nbytes()), int(logits.untyped_storage().nbytes()))
        return self._finish(logits, output, emitted_labels=False)
