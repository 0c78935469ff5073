"""Pictures of programs (the graph as scheduled) and of compiled models running (attention, residual)."""

from rasp_compiler.viz.plan import PlanPicture, draw_plan, place_nodes
from rasp_compiler.viz.trace import TracePicture, draw_trace

__all__ = ["PlanPicture", "TracePicture", "draw_plan", "draw_trace", "place_nodes"]
