"""Analysis: pure functions over a Profile or an event table — aggregate, filter, order, diff and
match across runtimes, summaries, profiler overhead, GPU kernels, memory."""
