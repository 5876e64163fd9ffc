"""robot_rl: teach a robot arm to inspect circuit boards from camera images, on TorchRL and TensorDict."""

__version__ = "0.1.0"
