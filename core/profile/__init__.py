"""Memory profile of one model at one input size, and the memory lab's comparison table.

    from leanseg.core.profile import LabRequest, ModelSpec, run_lab, eager_profile, engine_profile
    profile = eager_profile(model, x)        # per step: live bytes, tensors alive, the peak step
    bounds = lower_bounds(model, x.shape)    # liveness lower bounds, blocks whole and in pieces
    result = run_lab(LabRequest(ModelSpec("model.safetensors"), size=1024), cancel=event, on_event=sink)
"""
from .eager import eager_profile
from .engine import engine_profile, lower_bounds
from .export import write_lab
from .lab import CONFIGURATION_NAMES, CONFIGURATIONS, LabRequest, LabResult, run_lab
from .model_spec import ModelSpec, default_spec
from .records import AliveTensor, LowerBounds, MemoryProfile, ProfileStep

__all__ = ["CONFIGURATIONS", "CONFIGURATION_NAMES", "AliveTensor", "LabRequest", "LabResult", "LowerBounds",
           "MemoryProfile", "ModelSpec", "ProfileStep", "default_spec", "eager_profile", "engine_profile",
           "lower_bounds", "run_lab", "write_lab"]
