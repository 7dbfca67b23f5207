import { deflateSync, inflateSync } from 'node:zlib';
import { crc32 } from '../util/crc32.js';

const SIGNATURE = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** An 8-bit RGBA raster, row-major, no padding. */
export interface RgbaImage {
  width: number;
  height: number;
  data: Uint8Array;
}

function chunk(type: string, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, data.length);
  for (let i = 0; i < 4; i++) out[4 + i] = type.charCodeAt(i);
  out.set(data, 8);
  // The CRC covers the type and the data, not the length.
  view.setUint32(8 + data.length, crc32(out, 4, 8 + data.length));
  return out;
}

function paeth(a: number, b: number, c: number): number {
  const p = a + b - c;
  const pa = Math.abs(p - a);
  const pb = Math.abs(p - b);
  const pc = Math.abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

/**
 * Encodes an RGBA raster as an 8-bit PNG. Rows get the filter with the smallest sum of absolute residuals (the
 * heuristic the PNG spec recommends), which keeps the smooth gradients of the demo images small. `alpha: false`
 * drops the alpha channel (colour type 2) for opaque images.
 */
export function encodePng(image: RgbaImage, options: { alpha?: boolean; text?: Record<string, string> } = {}): Uint8Array {
  const { width, height, data } = image;
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) {
    throw new RangeError(`invalid PNG size ${width}x${height}`);
  }
  if (data.length !== width * height * 4) throw new RangeError('RGBA data does not match the size');
  const alpha = options.alpha ?? true;
  const channels = alpha ? 4 : 3;
  const stride = width * channels;

  const raw = new Uint8Array(stride);
  const previous = new Uint8Array(stride);
  const candidates = [0, 1, 2, 3, 4].map(() => new Uint8Array(stride));
  const filtered = new Uint8Array((stride + 1) * height);

  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const s = (y * width + x) * 4;
      const d = x * channels;
      raw[d] = data[s];
      raw[d + 1] = data[s + 1];
      raw[d + 2] = data[s + 2];
      if (alpha) raw[d + 3] = data[s + 3];
    }
    let best = 0;
    let bestScore = Infinity;
    for (let type = 0; type < 5; type++) {
      const out = candidates[type];
      let score = 0;
      for (let i = 0; i < stride; i++) {
        const left = i >= channels ? raw[i - channels] : 0;
        const up = y > 0 ? previous[i] : 0;
        const upLeft = y > 0 && i >= channels ? previous[i - channels] : 0;
        let predictor = 0;
        if (type === 1) predictor = left;
        else if (type === 2) predictor = up;
        else if (type === 3) predictor = (left + up) >> 1;
        else if (type === 4) predictor = paeth(left, up, upLeft);
        const value = (raw[i] - predictor) & 0xff;
        out[i] = value;
        score += value < 128 ? value : 256 - value;
      }
      if (score < bestScore) {
        bestScore = score;
        best = type;
      }
    }
    const rowStart = y * (stride + 1);
    filtered[rowStart] = best;
    filtered.set(candidates[best], rowStart + 1);
    previous.set(raw);
  }

  const ihdr = new Uint8Array(13);
  const ihdrView = new DataView(ihdr.buffer);
  ihdrView.setUint32(0, width);
  ihdrView.setUint32(4, height);
  ihdr[8] = 8; // bit depth
  ihdr[9] = alpha ? 6 : 2; // colour type: RGBA or RGB
  ihdr[10] = 0; // compression: deflate
  ihdr[11] = 0; // filter method 0
  ihdr[12] = 0; // no interlace

  const parts: Uint8Array[] = [SIGNATURE, chunk('IHDR', ihdr)];
  for (const [key, value] of Object.entries(options.text ?? {})) {
    // tEXt is Latin-1; anything else is replaced rather than risking an invalid chunk.
    const text = `${key}\0${value}`.replace(/[^\x20-\x7e\0]/g, '?');
    parts.push(chunk('tEXt', Uint8Array.from(text, (ch) => ch.charCodeAt(0))));
  }
  parts.push(chunk('IDAT', new Uint8Array(deflateSync(filtered, { level: 9 }))));
  parts.push(chunk('IEND', new Uint8Array(0)));
  return concat(parts);
}

export function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, p) => sum + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

export function isPng(bytes: Uint8Array): boolean {
  return bytes.length >= 8 && SIGNATURE.every((b, i) => bytes[i] === b);
}

/** Why a PNG could not be decoded. */
export class PngDecodeError extends Error {
  override readonly name = 'PngDecodeError' as const;
}

export interface PngDecodeLimits {
  /** Largest width * height accepted; a tiny file can declare a huge raster (a decompression bomb). */
  maxPixels?: number;
  /** Largest bit depth per sample accepted (1, 2, 4, 8 or 16). Default 16. */
  maxBitDepth?: number;
}

/** What a PNG's IHDR declares, read without touching its image data. */
export interface PngHeader {
  width: number;
  height: number;
  bitDepth: number;
  colorType: number;
}

/**
 * Reads the IHDR of a PNG (the first chunk, 8 bytes after the signature) without inflating anything: enough to
 * refuse an image too large for a model before spending memory or time on it. `null` when it is not a PNG with a
 * well-formed IHDR first.
 */
export function readPngHeader(bytes: Uint8Array): PngHeader | null {
  if (!isPng(bytes) || bytes.length < 33) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(8) !== 13 || String.fromCharCode(...bytes.subarray(12, 16)) !== 'IHDR') return null;
  return { width: view.getUint32(16), height: view.getUint32(20), bitDepth: bytes[24]!, colorType: bytes[25]! };
}

/**
 * Decodes a non-interlaced PNG of any colour type at bit depth 1-8 (16-bit samples keep their high byte) into RGBA.
 * Checks every chunk CRC. Throws PngDecodeError for anything else (Adam7, corrupt data, oversized rasters), so a
 * caller can fall back to treating the input as opaque bytes.
 */
export function decodePng(bytes: Uint8Array, limits: PngDecodeLimits = {}): RgbaImage {
  const maxPixels = limits.maxPixels ?? 16_000_000;
  if (!isPng(bytes)) throw new PngDecodeError('not a PNG (bad signature)');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let offset = 8;
  let width = 0;
  let height = 0;
  let bitDepth = 0;
  let colorType = -1;
  let palette: Uint8Array | undefined;
  let transparency: Uint8Array | undefined;
  const idat: Uint8Array[] = [];
  let ended = false;

  while (offset + 12 <= bytes.length) {
    const length = view.getUint32(offset);
    const type = String.fromCharCode(...bytes.subarray(offset + 4, offset + 8));
    if (offset + 12 + length > bytes.length) throw new PngDecodeError(`chunk ${type} runs past the end`);
    const body = bytes.subarray(offset + 8, offset + 8 + length);
    if (crc32(bytes, offset + 4, offset + 8 + length) !== view.getUint32(offset + 8 + length)) {
      throw new PngDecodeError(`bad CRC in chunk ${type}`);
    }
    if (type === 'IHDR') {
      if (length !== 13) throw new PngDecodeError('bad IHDR length');
      const h = new DataView(body.buffer, body.byteOffset, 13);
      width = h.getUint32(0);
      height = h.getUint32(4);
      bitDepth = body[8];
      colorType = body[9];
      if (body[10] !== 0 || body[11] !== 0) throw new PngDecodeError('unknown compression or filter method');
      if (body[12] !== 0) throw new PngDecodeError('interlaced PNGs are not supported');
    } else if (type === 'PLTE') {
      palette = body;
    } else if (type === 'tRNS') {
      transparency = body;
    } else if (type === 'IDAT') {
      idat.push(body);
    } else if (type === 'IEND') {
      ended = true;
      break;
    }
    offset += 12 + length;
  }
  if (!ended) throw new PngDecodeError('missing IEND');
  if (width < 1 || height < 1) throw new PngDecodeError('missing or empty IHDR');
  if (width * height > maxPixels) throw new PngDecodeError(`image too large (${width}x${height})`);
  if (bitDepth > (limits.maxBitDepth ?? 16)) throw new PngDecodeError(`bit depth ${bitDepth} is more than ${limits.maxBitDepth}`);

  const channelsByType: Record<number, number> = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 };
  const channels = channelsByType[colorType];
  if (channels === undefined) throw new PngDecodeError(`unknown colour type ${colorType}`);
  const allowedDepths = colorType === 0 ? [1, 2, 4, 8, 16] : colorType === 3 ? [1, 2, 4, 8] : [8, 16];
  if (!allowedDepths.includes(bitDepth)) throw new PngDecodeError(`bit depth ${bitDepth} invalid for colour type ${colorType}`);
  if (colorType === 3 && !palette) throw new PngDecodeError('palette image without PLTE');

  const bitsPerPixel = channels * bitDepth;
  const stride = Math.ceil((width * bitsPerPixel) / 8);
  const bpp = Math.max(1, bitsPerPixel >> 3);
  const expected = (stride + 1) * height;
  let inflated: Buffer;
  try {
    inflated = inflateSync(concat(idat), { maxOutputLength: expected + 1 });
  } catch (error) {
    throw new PngDecodeError(`corrupt image data: ${(error as Error).message}`);
  }
  if (inflated.length < expected) throw new PngDecodeError('image data too short');

  const out = new Uint8Array(width * height * 4);
  let previous = new Uint8Array(stride);
  let current = new Uint8Array(stride);
  for (let y = 0; y < height; y++) {
    const rowStart = y * (stride + 1);
    const filter = inflated[rowStart];
    for (let i = 0; i < stride; i++) {
      const value = inflated[rowStart + 1 + i];
      const left = i >= bpp ? current[i - bpp] : 0;
      const up = previous[i];
      const upLeft = i >= bpp ? previous[i - bpp] : 0;
      let predictor: number;
      switch (filter) {
        case 0: predictor = 0; break;
        case 1: predictor = left; break;
        case 2: predictor = up; break;
        case 3: predictor = (left + up) >> 1; break;
        case 4: predictor = paeth(left, up, upLeft); break;
        default: throw new PngDecodeError(`unknown filter type ${filter}`);
      }
      current[i] = (value + predictor) & 0xff;
    }
    for (let x = 0; x < width; x++) {
      const sample = (channel: number): number => {
        if (bitDepth === 8) return current[x * channels + channel];
        if (bitDepth === 16) return current[(x * channels + channel) * 2];
        // Sub-byte depths only occur with one channel (grey or palette).
        const bitOffset = x * bitDepth;
        const raw = (current[bitOffset >> 3] >> (8 - bitDepth - (bitOffset & 7))) & ((1 << bitDepth) - 1);
        return raw;
      };
      const o = (y * width + x) * 4;
      if (colorType === 3) {
        const index = sample(0);
        const p = palette as Uint8Array;
        if (index * 3 + 2 >= p.length) throw new PngDecodeError('palette index out of range');
        out[o] = p[index * 3];
        out[o + 1] = p[index * 3 + 1];
        out[o + 2] = p[index * 3 + 2];
        out[o + 3] = transparency && index < transparency.length ? transparency[index] : 255;
      } else if (colorType === 0 || colorType === 4) {
        const raw = sample(0);
        const grey = bitDepth < 8 ? Math.round((raw * 255) / ((1 << bitDepth) - 1)) : raw;
        out[o] = out[o + 1] = out[o + 2] = grey;
        out[o + 3] = colorType === 4 ? sample(1) : 255;
      } else {
        out[o] = sample(0);
        out[o + 1] = sample(1);
        out[o + 2] = sample(2);
        out[o + 3] = colorType === 6 ? sample(3) : 255;
      }
    }
    [previous, current] = [current, previous];
  }
  return { width, height, data: out };
}
