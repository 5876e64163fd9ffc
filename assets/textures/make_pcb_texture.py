"""Regenerates ``pcb.png``, the solder-mask-and-traces texture of the inspected board.

The texture is committed (it is small); this script documents how it was made and rebuilds it:
``python assets/textures/make_pcb_texture.py``. It is deterministic (fixed seed).
"""

from pathlib import Path

import cv2
import numpy as np

SIZE = 256  # texels per side; the board is 80 x 60 mm, so ~0.3 mm per texel
MASK_GREEN = (40, 110, 35)  # BGR, solder mask
TRACE = (60, 150, 70)  # copper under solder mask reads as lighter green
VIA = (120, 170, 190)  # tinned via pads


def make_texture(seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    img = np.full((SIZE, SIZE, 3), MASK_GREEN, np.uint8)
    for _ in range(60):  # Manhattan traces with one bend, like a routed board
        x0, y0, x1, y1 = rng.integers(8, SIZE - 8, size=4)
        width = int(rng.choice([1, 2, 2, 3]))
        cv2.line(img, (int(x0), int(y0)), (int(x1), int(y0)), TRACE, width)
        cv2.line(img, (int(x1), int(y0)), (int(x1), int(y1)), TRACE, width)
        cv2.circle(img, (int(x1), int(y1)), 3, VIA, -1)
    cv2.rectangle(img, (2, 2), (SIZE - 3, SIZE - 3), (200, 200, 200), 2)  # silkscreen outline
    return img


if __name__ == "__main__":
    out = Path(__file__).with_name("pcb.png")
    cv2.imwrite(str(out), make_texture())
    print(f"wrote {out}")
