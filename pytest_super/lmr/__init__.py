"""LMR-Bench's episodes (docs/lmr-bench.md): the masked repository put in the task's box
(`box`), the golden function put in place for the gold agent (`golden`), and the scoring by the
implementation's unit test after the episode (`unit_tests`), in the same box."""
