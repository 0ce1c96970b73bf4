#!/usr/bin/python3
"""Reference rows of PyTorch's float32 sinusoid tables, for tests/test-pe-table.c.

Run with Debian's interpreter (the one python3-torch is installed for):
    /usr/bin/python3 scripts/make-torch-pe-ref.py [outdir]    (default tests/data)

What PEAK_PE_TORCH_F32 must reproduce (within 2 ULP) is the table PyTorch
itself computes, so every number here comes out of torch; this script only
builds the tensors the way the reference modules do:
  interleaved  the usual PyTorch PositionalEncoding module (the PyTorch tutorial's):
               div_term = exp(arange(0, d, 2).float() * (-ln(10000) / d)),
               pe[:, 0::2] = sin(position * div_term),
               pe[:, 1::2] = cos(position * div_term).
               For odd d that module's own code fails (one more sine column than
               cosine columns); we give the cosines the first d // 2 terms.
  split        fairseq's SinusoidalPositionalEmbedding.get_embedding:
               exp(arange(half).float() * -(ln(10000) / (half - 1))),
               [sin | cos], a zero column appended for odd d.
  split_paper  that module's div_term laid out [sin | cos] (PEAK_PE_SPLIT_PAPER in
               TORCH_F32 mode; Hugging Face's Marian port computes its table in
               float64 numpy, which is what PEAK_PE_EXACT is for).

Each file torch-pe-<layout>-d<d>.bin holds the rows listed in POSITIONS (or
FAR_POSITIONS for the "far" file), row-major, little-endian float32, no
header.  The tables are built with max_len = 100000 rows, as the
PositionalEncoding module would be for long inputs, and the listed rows are
cut out of them.  The test hard-codes the same lists: keep them in step.
"""
import math
import os
import sys

import numpy as np
import torch

POSITIONS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100, 4999, 5000, 96079, 99999]
# Positions far beyond any max_len, to exercise the float rounding of the
# angle: (float)p, then the float product, then sin/cos of a huge argument.
FAR_POSITIONS = [1048575, 16777216, 123456789, 4294967295]
MAX_LEN = 100000
BASE = 10000.0


def torch_div_term(d):
    return torch.exp(torch.arange(0, d, 2).float() * (-math.log(BASE) / d))


def fairseq_freq(d):
    half = d // 2
    emb = math.log(BASE) / max(half - 1, 1)
    return torch.exp(torch.arange(half, dtype=torch.float) * -emb)


def interleaved(position, d):
    div_term = torch_div_term(d)
    pe = torch.zeros(position.shape[0], d)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term[: d // 2])
    return pe


def split(position, d, freq):
    half = d // 2
    angle = position * freq[:half]
    pe = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)
    if d % 2 == 1:
        pe = torch.cat([pe, torch.zeros(position.shape[0], 1)], dim=1)
    return pe


def table(layout, position, d):
    if layout == "interleaved":
        return interleaved(position, d)
    if layout == "split":
        return split(position, d, fairseq_freq(d))
    return split(position, d, torch_div_term(d))


def save(path, rows):
    arr = rows.numpy().astype("<f4", copy=False)
    arr.tofile(path)
    print(f"{path}: {arr.shape[0]} rows x {arr.shape[1]}")


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data"))
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(1)
    position = torch.arange(0, MAX_LEN, dtype=torch.float).unsqueeze(1)
    idx = torch.tensor(POSITIONS)
    for layout in ("interleaved", "split", "split_paper"):
        for d in (512, 7):
            pe = table(layout, position, d)
            save(os.path.join(outdir, f"torch-pe-{layout}-d{d}.bin"), pe[idx])
    # float64 -> float32 rounds to nearest, like the C cast (float)p.
    far = torch.tensor(FAR_POSITIONS, dtype=torch.float64).float().unsqueeze(1)
    save(os.path.join(outdir, "torch-pe-far-interleaved-d64.bin"), table("interleaved", far, 64))
    print(f"torch {torch.__version__}, numpy {np.__version__}")


if __name__ == "__main__":
    main()
