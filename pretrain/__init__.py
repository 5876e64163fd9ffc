"""Behaviour-cloning pretraining of the vision policy on demonstrations (robot_rl.pretrain)."""
