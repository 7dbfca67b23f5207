/**
 * The CPU-heavy image work of the demo models, as plain functions of plain data: run in a worker thread by
 * ImageWorkerPool (so one big image never stalls the event loop that answers everyone's requests), or inline.
 */
import { decodePng, encodePng, PngDecodeError, type RgbaImage } from '../formats/png.js';
import { Canvas } from '../util/raster.js';

export interface FitPngTask {
  task: 'fitPng';
  bytes: Uint8Array;
  width: number;
  height: number;
  maxPixels: number;
  maxBitDepth: number;
}

export interface EncodePngTask {
  task: 'encodePng';
  width: number;
  height: number;
  data: Uint8Array;
  alpha: boolean;
  text: Record<string, string>;
}

export type ImageTask = FitPngTask | EncodePngTask;

/** fitPng: the RGBA pixels of the decoded image fitted to width x height, or why it could not be decoded. */
export type FitPngResult = { ok: true; data: Uint8Array } | { ok: false; reason: string };

export function runImageTask(task: FitPngTask): FitPngResult;
export function runImageTask(task: EncodePngTask): Uint8Array;
export function runImageTask(task: ImageTask): FitPngResult | Uint8Array;
export function runImageTask(task: ImageTask): FitPngResult | Uint8Array {
  if (task.task === 'encodePng') {
    return encodePng({ width: task.width, height: task.height, data: task.data }, { alpha: task.alpha, text: task.text });
  }
  try {
    const image = decodePng(task.bytes, { maxPixels: task.maxPixels, maxBitDepth: task.maxBitDepth });
    return { ok: true, data: coverResize(image, task.width, task.height).data };
  } catch (error) {
    if (error instanceof PngDecodeError) return { ok: false, reason: error.message };
    throw error;
  }
}

/** Scales to cover the target and crops the middle, with bilinear sampling. */
export function coverResize(source: RgbaImage, width: number, height: number): Canvas {
  const out = new Canvas(width, height);
  const scale = Math.max(width / source.width, height / source.height);
  const offsetX = (source.width * scale - width) / 2;
  const offsetY = (source.height * scale - height) / 2;
  const at = (x: number, y: number, c: number): number => {
    const cx = Math.min(source.width - 1, Math.max(0, x));
    const cy = Math.min(source.height - 1, Math.max(0, y));
    const i = (cy * source.width + cx) * 4;
    // Transparent pixels are composited on white, so a logo on a transparent background stays readable.
    const alpha = source.data[i + 3] / 255;
    return source.data[i + c] * alpha + 255 * (1 - alpha);
  };
  for (let y = 0; y < height; y++) {
    const sy = (y + 0.5 + offsetY) / scale - 0.5;
    const y0 = Math.floor(sy);
    const fy = sy - y0;
    for (let x = 0; x < width; x++) {
      const sx = (x + 0.5 + offsetX) / scale - 0.5;
      const x0 = Math.floor(sx);
      const fx = sx - x0;
      const o = (y * width + x) * 4;
      for (let c = 0; c < 3; c++) {
        const top = at(x0, y0, c) * (1 - fx) + at(x0 + 1, y0, c) * fx;
        const bottom = at(x0, y0 + 1, c) * (1 - fx) + at(x0 + 1, y0 + 1, c) * fx;
        out.data[o + c] = Math.round(top * (1 - fy) + bottom * fy);
      }
      out.data[o + 3] = 255;
    }
  }
  return out;
}

