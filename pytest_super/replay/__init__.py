"""Closed-loop replay of published episodes: our agents against a replayed model and kernel.

- `script.py`: a published episode as the task, the kernel's recorded answers, the model's replies;
- `kernel.py`: the replay kernel backend (`--super-backend=replay`);
- `endpoint.py`: the replay model endpoint (a real HTTP server on 127.0.0.1);
- `run.py`: `pytest-super replay-run`, replay and step-by-step comparison;
- `deviations.py`: the documented deviations (docs/fidelity.md, "Closed-loop replay");
- `limits.py`: an episode under a run's step limit (`--steps N`);
- `compute_plan.py`: the recorded durations' cut seconds, planned to keep the compute limit's end;
- `reference_set.py`: the reference's requests for its own files (`--prompts reference`).
"""
