"""The task model and its files: what one SUPER task is (`model`), our YAML files
(`yaml_files`), SUPER's JSON lines (`super_jsonl`, converted to the YAML mapping), the one
validation both go through (`validation`: task.schema.json and the checks it cannot express),
and writing tasks back as YAML (`dump`). The names below are the package's public interface."""

from pytest_super.errors import TaskFileError
from pytest_super.tasks.dump import dump_task_yaml, import_jsonl, task_to_dict
from pytest_super.tasks.model import (
    CATEGORIES,
    SETS,
    SUPER_IMAGE,
    YAML_IMAGE,
    Cell,
    Limits,
    Task,
    categories_from_id,
    categories_of,
    category_suffix,
    raw_category_of,
)
from pytest_super.tasks.super_jsonl import iter_jsonl_tasks, jsonl_lines, task_from_super_row
from pytest_super.tasks.validation import infer_set, schema, warn_unmatchable_answer
from pytest_super.tasks.yaml_files import load_yaml_task

__all__ = [
    "CATEGORIES",
    "SETS",
    "SUPER_IMAGE",
    "YAML_IMAGE",
    "Cell",
    "Limits",
    "Task",
    "TaskFileError",
    "categories_from_id",
    "categories_of",
    "category_suffix",
    "dump_task_yaml",
    "import_jsonl",
    "infer_set",
    "iter_jsonl_tasks",
    "jsonl_lines",
    "load_yaml_task",
    "raw_category_of",
    "schema",
    "task_from_super_row",
    "task_to_dict",
    "warn_unmatchable_answer",
]
