"""Random-shift augmentation."""

from __future__ import annotations

import torch

from robot_rl.pretrain.augment import random_shift


def test_random_shift_moves_each_image_by_at_most_pad_pixels():
    torch.manual_seed(0)
    images = torch.zeros(32, 20, 20, 3, dtype=torch.uint8)  # [B, H, W, C], the env's layout
    images[:, 10, 10, :] = 255  # one bright pixel in the middle
    shifted = random_shift(images, pad=3)
    assert shifted.shape == images.shape and shifted.dtype == torch.float32
    positions = [tuple((s[..., 0] == 255).nonzero()[0].tolist()) for s in shifted]
    assert all(torch.equal(s[r, c], torch.full((3,), 255.0)) for s, (r, c) in zip(shifted, positions))
    assert all(abs(r - 10) <= 3 and abs(c - 10) <= 3 for r, c in positions)
    assert len(set(positions)) > 5  # shifts differ per image


def test_zero_pad_is_the_identity():
    images = torch.randint(0, 255, (4, 8, 8, 3), dtype=torch.uint8)
    assert torch.equal(random_shift(images, 0), images.float())
