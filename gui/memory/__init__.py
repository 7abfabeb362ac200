"""The live memory panel (allocated / reserved over time, job marks) and the monitor that feeds it."""
