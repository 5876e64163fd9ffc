"""Package data of robot_rl: the MJCF of the inspection cell and its textures (read with importlib.resources)."""
