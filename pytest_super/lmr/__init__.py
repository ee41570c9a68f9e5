"""LMR-Bench's episodes (docs/lmr-bench.md): the masked repository put in the task's box
(`box`), the golden function put in place for the gold agent (`golden`), and the scoring by the
implementation's unit test after the episode (`unit_tests`), in the same box; and the optional
LLM-as-judge score of the agent's function against the golden one (`judge`)."""

LMR_REPO = "shuoYan97/LMR-Bench"
#: the commit of LMR-Bench this project follows (the last whose `benchmark/` tree is whole)
LMR_COMMIT = "da757c9fe74a6993c1c7a900d15f2a6f8001f518"
