"""Image augmentations of BC: random shift, segmentation-aware recolouring, exposure and zoom."""

from __future__ import annotations

import pytest
import torch

from robot_rl.pretrain.augment import exposure, random_shift, zoom


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


def _scene_batch():
    """Four 16x16 frames: a table (class 1) left, a board (class 2) right with a part (class 3) on it."""
    from robot_rl.envs.perception import BOARD, PARTS, TABLE

    generator = torch.Generator().manual_seed(0)
    pixels = torch.randint(20, 230, (4, 16, 16, 3), dtype=torch.uint8, generator=generator)
    masks = torch.full((4, 16, 16), TABLE, dtype=torch.uint8)
    masks[:, :, 8:] = BOARD
    masks[:, 4:8, 10:14] = PARTS
    return pixels, masks


def test_recolouring_the_table_changes_only_table_pixels():
    from robot_rl.envs.perception import TABLE
    from robot_rl.pretrain.augment import recolour

    torch.manual_seed(0)
    pixels, masks = _scene_batch()
    out = recolour(pixels, masks, ("table",), prob=1.0)
    assert out.dtype == torch.float32 and out.shape == pixels.shape
    table = masks == TABLE
    assert torch.equal(out[~table], pixels[~table].float())  # board and parts: bit for bit the same
    assert (out[table] != pixels[table].float()).any(-1).float().mean() > 0.9
    assert out.min() >= 0 and out.max() <= 255


def test_recolouring_keeps_the_shading_and_draws_a_colour_per_image():
    from robot_rl.envs.perception import BOARD
    from robot_rl.pretrain.augment import recolour

    torch.manual_seed(1)
    pixels, masks = _scene_batch()
    out = recolour(pixels, masks, ("board",), prob=1.0)
    board = masks == BOARD
    # Within an image, brighter board pixels stay brighter (ratios of brightness are kept where not clipped).
    before, after = pixels.float().mean(-1)[0][board[0]], out.mean(-1)[0][board[0]]
    assert torch.corrcoef(torch.stack([before, after]))[0, 1] > 0.9
    colours = [out[i][board[i]].mean(0) for i in range(4)]
    assert min((colours[i] - colours[j]).abs().max() for i in range(4) for j in range(i)) > 1.0


def test_recolouring_with_probability_zero_or_no_class_is_the_identity():
    from robot_rl.pretrain.augment import recolour

    pixels, masks = _scene_batch()
    assert torch.equal(recolour(pixels, masks, ("table", "board"), prob=0.0), pixels.float())
    assert torch.equal(recolour(pixels, masks, (), prob=1.0), pixels.float())


def test_the_recolour_option_names_segmentation_classes():
    from robot_rl.configs import RECOLOUR_CLASSES, BCConfig
    from robot_rl.envs.perception import SEGMENTATION_CLASSES

    assert set(RECOLOUR_CLASSES) <= set(SEGMENTATION_CLASSES)
    assert BCConfig(recolour=" table, board").recolour_classes() == ("table", "board")
    assert BCConfig().recolour == ""  # off by default
    with pytest.raises(ValueError, match="--recolour must be"):
        BCConfig(recolour="table,parts")


def test_a_given_offset_moves_the_content_by_pad_minus_offset():
    images = torch.zeros(1, 12, 12, 1)
    images[0, 5, 7, 0] = 1.0
    shifted = random_shift(images, pad=2, offsets=torch.tensor([[0, 4]]))
    assert shifted[0, 5 + 2 - 0, 7 + 2 - 4, 0] == 1.0 and shifted.sum() == 1.0


def test_exposure_scales_each_image_by_one_factor_within_its_range_and_clips():
    torch.manual_seed(0)
    images = torch.full((256, 4, 4, 3), 100, dtype=torch.uint8)
    images[:, 0, 0] = 250  # a highlight that a brighter exposure saturates
    out = exposure(images, spread=1.0)
    factors = out[:, 1, 1, 0] / 100
    assert torch.allclose(out, (images.float() * factors[:, None, None, None]).clamp(0, 255))  # one factor an image
    assert 0.5 <= factors.min() < 0.6 and 1.8 < factors.max() <= 2.0  # log-uniform in [1/2, 2], both ends drawn
    assert 0.4 < (factors > 1).float().mean() < 0.6  # as often brighter as dimmer
    assert out.max() == 255 and (out[:, 0, 0, 0] == 255).any()  # saturation, as a real highlight does


def test_exposure_zero_is_the_identity_and_the_option_is_bounded():
    from robot_rl.configs import BCConfig

    images = torch.randint(0, 255, (4, 8, 8, 3), dtype=torch.uint8)
    assert torch.equal(exposure(images, 0.0), images.float())
    with pytest.raises(ValueError, match="exposure"):
        BCConfig(exposure=-0.5)


def test_zoom_scales_each_image_about_its_centre_within_its_range():
    torch.manual_seed(0)
    images = torch.zeros(200, 41, 41, 3)
    images[:, 20, 30] = 255  # a bright pixel 10 to the right of the centre pixel (20, 20)
    out = zoom(images, spread=0.25)
    assert out.shape == images.shape and out.dtype == torch.float32
    columns = (out[..., 0].sum(1) * torch.arange(41.0)).sum(-1) / out[..., 0].sum((1, 2))  # centroid per image
    rows = (out[..., 0].sum(2) * torch.arange(41.0)).sum(-1) / out[..., 0].sum((1, 2))
    scales = (columns - 20) / 10
    assert torch.allclose(rows, torch.full_like(rows, 20.0), atol=0.05)  # the move is radial: the row stays
    assert 0.8 - 0.02 <= scales.min() < 0.85 and 1.2 < scales.max() <= 1.25 + 0.02  # log-uniform in [0.8, 1.25]
    assert 0.4 < (scales > 1).float().mean() < 0.6  # as often magnified as shrunk


def test_zoom_zero_is_the_identity_and_the_option_is_bounded():
    from robot_rl.configs import BCConfig

    images = torch.randint(0, 255, (4, 8, 8, 3), dtype=torch.uint8)
    assert torch.equal(zoom(images, 0.0), images.float())
    with pytest.raises(ValueError, match="zoom"):
        BCConfig(zoom=1.5)
