"""Execution: numpy kernels, planner, threaded runner and Session."""
