"""Random-shift image augmentation (DrQ): pad by replicating the border, crop back at a random offset per image.

Written here because torchvision's transforms draw one crop per call, not one per image of a batch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def random_shift(pixels: torch.Tensor, pad: int) -> torch.Tensor:
    """Shifts each image of ``pixels`` ([B, H, W, C], any dtype) by up to ``pad`` pixels in x and y.

    Returns float32 images with the input's value range (0-255 stays 0-255), on the input's device.
    """
    x = pixels.float()
    if pad <= 0:
        return x
    x = x.permute(0, 3, 1, 2)  # replicate padding works on [B, C, H, W]
    batch, channels, height, width = x.shape
    padded = F.pad(x, (pad, pad, pad, pad), mode="replicate")
    offsets = torch.randint(0, 2 * pad + 1, (batch, 2), device=x.device)
    rows = (offsets[:, 0, None] + torch.arange(height, device=x.device))[:, None, :, None]
    cols = (offsets[:, 1, None] + torch.arange(width, device=x.device))[:, None, None, :]
    batch_index = torch.arange(batch, device=x.device)[:, None, None, None]
    channel_index = torch.arange(channels, device=x.device)[None, :, None, None]
    return padded[batch_index, channel_index, rows, cols].permute(0, 2, 3, 1)
