#!/usr/bin/env python3
"""Checks that a screenshot (PNG) shows something: the share of pixels that are not near-white.

usage: check_screenshot.py SHOT.png [--min-fraction F] [--white LEVEL]

Decodes 8-bit PNGs of colour type 2 (RGB) or 6 (RGBA), non-interlaced, with the standard library
only (zlib + struct). A pixel is near-white when every channel, after compositing over white, is
>= LEVEL (default 240). Prints one JSON object
  {"path", "width", "height", "non_white_pixels", "non_white_fraction", "min_fraction", "ok"}
and exits 0 when the non-white fraction is above F (default 0.01), 1 when it is not (a blank
page), 2 when the file cannot be read as such a PNG.
"""
import argparse
import json
import struct
import sys
import zlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class PngError(Exception):
    pass


def read_png(path):
    """Returns (width, height, channels, rows) with rows the unfiltered scanlines (bytearrays)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != PNG_SIGNATURE:
        raise PngError(f"{path}: expected a PNG signature, got {data[:8]!r}")
    pos = 8
    header = None
    idat = []
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if len(body) != length:
            raise PngError(f"{path}: chunk {kind!r} at byte {pos} is truncated")
        crc = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            raise PngError(f"{path}: chunk {kind!r} at byte {pos} fails its CRC")
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if header is None:
        raise PngError(f"{path}: expected an IHDR chunk, found none")
    width, height, depth, color, _compression, _filter, interlace = header
    if depth != 8 or color not in (2, 6) or interlace != 0:
        raise PngError(f"{path}: expected an 8-bit non-interlaced RGB or RGBA PNG, got bit depth "
                       f"{depth}, colour type {color}, interlace {interlace}")
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    if len(raw) != height * (stride + 1):
        raise PngError(f"{path}: expected {height * (stride + 1)} bytes of image data for "
                       f"{width}x{height}, got {len(raw)}")
    return width, height, channels, unfilter(raw, width, height, channels)


def unfilter(raw, width, height, bpp):
    """Undoes the per-scanline PNG filters (None, Sub, Up, Average, Paeth)."""
    stride = width * bpp
    zero = bytes(stride)
    prev = bytearray(stride)
    rows = []
    pos = 0
    for y in range(height):
        kind = raw[pos]
        line = bytearray(raw[pos + 1:pos + 1 + stride])
        pos += stride + 1
        # Fast paths: a zero difference row is common (flat page areas) and costs nothing.
        if kind == 0:
            pass
        elif kind == 1:
            if line != zero:
                for i in range(bpp, stride):
                    line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            if line == zero:
                line = bytearray(prev)
            elif prev != zero:
                line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        else:
            raise PngError(f"scanline {y}: expected a filter type 0..4, got {kind}")
        rows.append(line)
        prev = line
    return rows


def count_non_white(width, rows, channels, white):
    """Number of pixels with some channel (composited over white) below `white`."""
    # Per byte: 1 when below the white level. A pixel is non-white when any of its colour bytes
    # is; OR-ing the channel planes as big integers keeps the work in C.
    below = bytes(1 if v < white else 0 for v in range(256))
    white_row = bytes([255]) * (width * channels)
    total = 0
    for line in rows:
        if line == white_row:
            continue
        if channels == 3:
            flags = line.translate(below)
            mask = (int.from_bytes(flags[0::3], "big") | int.from_bytes(flags[1::3], "big")
                    | int.from_bytes(flags[2::3], "big"))
            total += bin(mask).count("1")
        else:
            for i in range(0, len(line), 4):
                alpha = line[i + 3]
                # Over white, channel c shows as 255 - (255 - c) * alpha / 255.
                darkest = 255 - (255 - min(line[i], line[i + 1], line[i + 2])) * alpha / 255.0
                if darkest < white:
                    total += 1
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("png")
    parser.add_argument("--min-fraction", type=float, default=0.01)
    parser.add_argument("--white", type=int, default=240)
    args = parser.parse_args()
    try:
        width, height, channels, rows = read_png(args.png)
    except (OSError, PngError, zlib.error, struct.error) as e:
        print(json.dumps({"path": args.png, "error": str(e), "ok": False}))
        return 2
    pixels = width * height
    non_white = count_non_white(width, rows, channels, args.white)
    fraction = non_white / pixels if pixels else 0.0
    ok = fraction > args.min_fraction
    print(json.dumps({"path": args.png, "width": width, "height": height,
                      "non_white_pixels": non_white, "non_white_fraction": round(fraction, 6),
                      "min_fraction": args.min_fraction, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
