"""Image augmentations of behaviour cloning: random shift (DrQ), segmentation-aware recolouring, exposure and zoom.

Written here because torchvision's transforms draw one crop per call, not one per image of a batch, and know
nothing of a frame's segmentation mask.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from robot_rl.envs.perception import SEGMENTATION_CLASSES


def random_shift(pixels: torch.Tensor, pad: int, offsets: torch.Tensor | None = None) -> torch.Tensor:
    """Shifts each image of ``pixels`` ([B, H, W, C], any dtype) by up to ``pad`` pixels in x and y.

    ``offsets`` (int [B, 2], row then column, in [0, 2 pad]; drawn when None) says where each crop starts in the
    padded image: the content moves by ``pad - offset``. Returns float32 images with the input's value range
    (0-255 stays 0-255), on the input's device.
    """
    x = pixels.float()
    if pad <= 0:
        return x
    x = x.permute(0, 3, 1, 2)  # replicate padding works on [B, C, H, W]
    batch, channels, height, width = x.shape
    padded = F.pad(x, (pad, pad, pad, pad), mode="replicate")
    if offsets is None:
        offsets = torch.randint(0, 2 * pad + 1, (batch, 2), device=x.device)
    offsets = offsets.to(x.device)
    rows = (offsets[:, 0, None] + torch.arange(height, device=x.device))[:, None, :, None]
    cols = (offsets[:, 1, None] + torch.arange(width, device=x.device))[:, None, None, :]
    batch_index = torch.arange(batch, device=x.device)[:, None, None, None]
    channel_index = torch.arange(channels, device=x.device)[None, :, None, None]
    return padded[batch_index, channel_index, rows, cols].permute(0, 2, 3, 1)


def recolour(pixels: torch.Tensor, masks: torch.Tensor, classes: tuple[str, ...], prob: float,
             max_shading: float = 2.0) -> torch.Tensor:
    """Redraws the colour of the pixels of ``classes`` (names from ``SEGMENTATION_CLASSES``) in each image.

    ``pixels`` [B, H, W, 3] (any dtype, 0-255), ``masks`` [B, H, W] (class indices, as ``keys.SEGMENTATION``).
    Each class of each image is recoloured with probability ``prob``: its pixels take one uniformly drawn RGB
    colour, scaled by each pixel's brightness relative to the class's mean brightness in that image (capped at
    ``max_shading``), so shading, texture and the board's traces survive a new table or solder-mask colour.
    Every other pixel is returned unchanged. Returns float32 [B, H, W, 3] in 0-255, on the input's device.
    """
    x = pixels.float()
    if not classes or prob <= 0:
        return x
    batch = x.shape[0]
    brightness = x.mean(-1)  # [B, H, W]
    out = x
    for name in classes:
        index = SEGMENTATION_CLASSES.index(name)
        chosen = torch.rand(batch, device=x.device) < prob
        region = (masks == index) & chosen[:, None, None]
        count = region.sum((1, 2)).clamp(min=1)
        mean = (brightness * region).sum((1, 2)) / count
        shading = (brightness / mean.clamp(min=1.0)[:, None, None]).clamp(0, max_shading)
        colour = torch.rand(batch, 1, 1, 3, device=x.device) * 255
        out = torch.where(region[..., None], (colour * shading[..., None]).clamp(0, 255), out)
    return out


def exposure(pixels: torch.Tensor, spread: float) -> torch.Tensor:
    """Scales each image of ``pixels`` ([B, H, W, C], 0-255, any dtype) by its own factor, drawn log-uniformly in
    [1 / (1 + spread), 1 + spread], and clips to 0-255: what a brighter or dimmer light, or another exposure, does
    to a frame, saturated highlights included. Returns float32 images on the input's device (``spread`` 0: as is).
    """
    x = pixels.float()
    if spread <= 0:
        return x
    return (x * _log_uniform(x.shape[0], spread, x.device)[:, None, None, None]).clamp(0, 255)


def zoom(pixels: torch.Tensor, spread: float) -> torch.Tensor:
    """Scales each image of ``pixels`` ([B, H, W, C], 0-255, any dtype) about its centre by its own factor, drawn
    log-uniformly in [1 / (1 + spread), 1 + spread] (bilinear; a zoomed-out image's margin repeats its edge): what
    another field of view does to a frame (a wider lens shrinks the board towards the centre), while the labels keep
    what the arm's pose says. Returns float32 images on the input's device (``spread`` 0: as is)."""
    x = pixels.float()
    if spread <= 0:
        return x
    batch = x.shape[0]
    scale = _log_uniform(batch, spread, x.device)  # > 1 magnifies
    theta = torch.zeros(batch, 2, 3, device=x.device)
    theta[:, 0, 0] = theta[:, 1, 1] = 1 / scale  # output pixel at u reads the input at u / scale
    images = x.permute(0, 3, 1, 2)
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    out = F.grid_sample(images, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return out.permute(0, 2, 3, 1)


def _log_uniform(count: int, spread: float, device: torch.device) -> torch.Tensor:
    """``count`` factors drawn log-uniformly in [1 / (1 + spread), 1 + spread]: as often above 1 as below."""
    half_width = torch.log1p(torch.tensor(float(spread), device=device))
    return ((torch.rand(count, device=device) * 2 - 1) * half_width).exp()
