"""The UR5e-like arm robot_rl was built on: UR5e kinematics and servo gains, capsule links (fast in software GL)."""

from __future__ import annotations

from robot_rl.envs.arms.spec import ArmSpec

UR5E_LIKE = ArmSpec(
    name="ur5e_like",
    mjcf="robot_rl.envs.arms:ur5e_like.xml",
    joints=("shoulder_pan", "shoulder_lift", "elbow", "wrist_1", "wrist_2", "wrist_3"),
    # The tool frame's +z points away from the flange; the camera looks along it (flipped about x).
    camera_body="camera_mount", camera_pos=(0.0, 0.0, 0.048), camera_quat=(0.0, 1.0, 0.0, 0.0), camera_fovy=50.0,
    # Solved once with mink for HOME_CAMERA_POS looking down; fixed here so episodes never depend on a solver.
    home=(-0.3416, -1.8430, 1.7775, -1.5053, -1.5708, -1.9124),
    max_joint_speed=2 * 3.141592653589793,  # twice the UR5e's 180 deg/s joint speed limit
    geom_group=None,  # its file sets them: links in group 1, the lens and pedestal in 0
)
