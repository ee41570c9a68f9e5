"""Our prompt templates, one file per prompt part: the layout `pytest_super.prompts.PARTS` names
(ReAct's system prompt, action list, edit action, edit demonstration and task message; the
SWE-agent's system prompt, task message and edit command; Reflexion's reflection prompt).
`--super-prompts FOLDER` takes a folder laid out the same way; `pytest_super.prompts` loads both."""
