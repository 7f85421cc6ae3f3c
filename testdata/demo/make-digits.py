#!/usr/bin/env python3
"""Writes digits.npy: four 28x28 images (flattened to 784 floats in [0, 1])
of hand-drawn stroke digits 0, 1, 4 and 7, made from line segments and an
ellipse.  They are synthetic inputs for `make demo`, not MNIST samples.
Standard library only; the .npy header is written by hand (format v1.0)."""
import math, struct

def blank():
    return [[0.0] * 28 for _ in range(28)]

def stamp(img, x, y):
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            xi, yi = int(round(x)) + dx, int(round(y)) + dy
            if 0 <= xi < 28 and 0 <= yi < 28:
                v = 1.0 if dx == 0 and dy == 0 else 0.5
                img[yi][xi] = max(img[yi][xi], v)

def line(img, x0, y0, x1, y1):
    n = int(max(abs(x1 - x0), abs(y1 - y0)) * 2) + 1
    for i in range(n + 1):
        t = i / n
        stamp(img, x0 + (x1 - x0) * t, y0 + (y1 - y0) * t)

def ellipse(img, cx, cy, rx, ry):
    for i in range(120):
        a = 2 * math.pi * i / 120
        stamp(img, cx + rx * math.cos(a), cy + ry * math.sin(a))

digits = []
d = blank(); ellipse(d, 14, 14, 6, 9); digits.append(d)                      # 0
d = blank(); line(d, 14, 4, 14, 24); line(d, 11, 7, 14, 4); digits.append(d)  # 1
d = blank(); line(d, 9, 4, 7, 16); line(d, 7, 16, 20, 16); line(d, 17, 6, 17, 25); digits.append(d)  # 4
d = blank(); line(d, 7, 5, 21, 5); line(d, 21, 5, 12, 25); digits.append(d)   # 7

data = b"".join(struct.pack("<784f", *[v for row in img for v in row]) for img in digits)
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 784), }"
header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
with open("digits.npy", "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
