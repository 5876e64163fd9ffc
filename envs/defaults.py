"""The task and the arm every entry point uses when none is named, written once. Light to import (no MuJoCo):
``robot_rl.configs`` builds the CLI's help from them."""

DEFAULT_TASK = "pcb-inspect"
DEFAULT_ARM = "ur5e_like"
