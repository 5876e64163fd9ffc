"""PPO fine-tuning of the vision policy (robot_rl.finetune): from a behaviour-cloning checkpoint or from scratch."""
