import type { GenerationContext, ModelDefinition } from '@genservice/core';
import { ProviderError } from '@genservice/core';
import { MediaFetchError } from '@genservice/core';
import { isPng, readPngHeader } from '../formats/png.js';
import { Pacer } from '../util/abort.js';
import { Canvas, paletteFor, type Rgb } from '../util/raster.js';
import { canonicalSettings, digest, seededRandom } from '../util/random.js';
import { parseSize } from './image.js';
import { createScene } from './scene.js';
import { budgetMs, selectSetting, textSetting, urlListSetting, type DemoModel, type DemoRuntime } from './types.js';

export const REMIX_STYLES = ['posterize', 'tint', 'pixelate'] as const;
export const REMIX_SIZES = ['256x256', '512x512'] as const;
/** Inputs beyond this many are refused, to bound the time and memory one generation can take. */
export const REMIX_MAX_IMAGES = 4;
/**
 * The largest input the model decodes: four times the pixels of its largest output side by side is plenty for a
 * 512x512 result. Bigger rasters, or more than 8 bits per sample, are refused from the PNG header, before anything
 * is inflated (a 124 KB file can declare 4000x4000 at 16 bits: 128 MB of samples).
 */
export const REMIX_MAX_INPUT = { width: 2048, height: 2048, bitDepth: 8 } as const;

const definition: ModelDefinition = {
  modelId: 'demo-image-remix',
  title: 'Demo image-to-image (remixes the input images)',
  resultType: 'image',
  estimatedGenerationTime: 3,
  settings: [
    { name: 'prompt', title: 'Prompt', fieldType: 'text', required: true },
    // The model blends at most four: a fifth URL is a 400 at create, never a failure after the price was reserved.
    { name: 'images', title: 'Input images (PNG is decoded; other formats seed a pattern)', fieldType: 'image', required: true, maxItems: REMIX_MAX_IMAGES },
    { name: 'style', title: 'Style', fieldType: 'select', options: [...REMIX_STYLES] },
    { name: 'size', title: 'Size', fieldType: 'select', options: [...REMIX_SIZES] },
  ],
  price: (settings) => (selectSetting(settings, 'size', REMIX_SIZES) === '512x512' ? 9 : 6),
  // Room for fetching several inputs at the default 10 s limit each, on top of the work itself.
  timeoutMs: 60_000,
};

/**
 * Fetches one input (`index` from 0) with `ctx.files.fetch`, turning fetch failures into the ProviderError the runner understands; its
 * public message names the input and why it could not be used (the guard's messages name the URL without its
 * credentials or query, and never what a host resolved to).
 */
async function fetchInput(url: string, index: number, ctx: GenerationContext, runtime: DemoRuntime): Promise<Uint8Array> {
  try {
    // The service's own file links (the owner's uploads and results) come from its blob store; others through the guard.
    const media = await ctx.files.fetch(url, { ...runtime.fetch, signal: ctx.signal });
    return media.bytes;
  } catch (error) {
    if (ctx.signal.aborted) throw error;
    if (error instanceof MediaFetchError) {
      ctx.logger.warn({ code: error.code, reason: error.message }, 'demo-image-remix: input image refused or unavailable');
      throw new ProviderError(`input image ${index + 1} could not be used: ${error.message}`, {
        retryable: error.retryable,
        cause: error,
        code: 'invalid_input',
        publicMessage: `Input image ${index + 1} could not be used: ${error.message}.`,
      });
    }
    throw error;
  }
}

/** Refuses, from its header alone, a PNG larger than the model takes: nothing of it is inflated. */
function checkInputSize(bytes: Uint8Array, index: number): void {
  const header = readPngHeader(bytes);
  if (!header) return;
  const { width, height, bitDepth } = header;
  const max = REMIX_MAX_INPUT;
  if (width * height > max.width * max.height || bitDepth > max.bitDepth) {
    throw new ProviderError(`input image ${index + 1} is ${width}x${height} at ${bitDepth} bits per sample`, {
      code: 'invalid_input',
      publicMessage:
        `Input image ${index + 1} is ${width}x${height} at ${bitDepth} bits per sample; this model takes PNG images of at most ` +
        `${max.width * max.height} pixels (${max.width}x${max.height}) at ${max.bitDepth} bits.`,
    });
  }
}

/**
 * An input the demo cannot decode still shapes the result: its hash seeds a pattern. PNGs are decoded and fitted in
 * the image worker pool, off the event loop.
 */
async function imageFromBytes(
  bytes: Uint8Array,
  prompt: string,
  width: number,
  height: number,
  runtime: DemoRuntime,
): Promise<{ image: Canvas; decoded: boolean }> {
  if (isPng(bytes)) {
    const max = REMIX_MAX_INPUT;
    const fitted = await runtime.images.fitPng({ bytes, width, height, maxPixels: max.width * max.height, maxBitDepth: max.bitDepth });
    if (fitted.ok) {
      const canvas = new Canvas(width, height);
      canvas.data.set(fitted.data);
      return { image: canvas, decoded: true };
    }
    // A corrupt or unsupported PNG falls through to the hash pattern, like any other undecodable input.
  }
  const canvas = new Canvas(width, height);
  createScene('abstract', prompt, seededRandom('remix-input', digest(bytes)))(canvas, 0);
  return { image: canvas, decoded: false };
}

function lightness(c: Rgb): number {
  return c[0] * 0.299 + c[1] * 0.587 + c[2] * 0.114;
}

function applyStyle(image: Canvas, style: (typeof REMIX_STYLES)[number], colors: Rgb[]): void {
  const { data, width, height } = image;
  // Darkest to lightest, so dark input areas map to dark palette colours.
  const ramp = [...colors].sort((a, b) => lightness(a) - lightness(b));
  if (style === 'pixelate') {
    const block = Math.max(4, Math.round(Math.min(width, height) / 32));
    for (let by = 0; by < height; by += block) {
      for (let bx = 0; bx < width; bx += block) {
        const sum = [0, 0, 0];
        let n = 0;
        for (let y = by; y < Math.min(height, by + block); y++) {
          for (let x = bx; x < Math.min(width, bx + block); x++) {
            const i = (y * width + x) * 4;
            sum[0] += data[i];
            sum[1] += data[i + 1];
            sum[2] += data[i + 2];
            n++;
          }
        }
        image.rect(bx, by, block, block, [sum[0] / n, sum[1] / n, sum[2] / n]);
        // Faint grid lines make the blocks read as tiles.
        image.rect(bx, by, block, 1, [0, 0, 0], 0.08);
        image.rect(bx, by, 1, block, [0, 0, 0], 0.08);
      }
    }
    return;
  }
  for (let i = 0; i < data.length; i += 4) {
    const l = (0.299 * data[i] + 0.587 * data[i + 1] + 0.114 * data[i + 2]) / 255;
    if (style === 'posterize') {
      const c = ramp[Math.min(ramp.length - 1, Math.floor(l * ramp.length))];
      data[i] = c[0];
      data[i + 1] = c[1];
      data[i + 2] = c[2];
    } else {
      // Tint: keep the light and shade of the input, take the hue from the prompt's palette.
      const c = ramp[Math.floor(ramp.length / 2)];
      for (let k = 0; k < 3; k++) data[i + k] = Math.min(255, Math.round(data[i + k] * 0.45 + c[k] * l * 0.55 + 20 * l));
    }
  }
}

export const remixModel: DemoModel = {
  definition,
  async run(settings, ctx, runtime) {
    const pacer = new Pacer(budgetMs(definition, runtime), ctx.signal, (f) => ctx.progress(f));
    const prompt = textSetting(settings, 'prompt');
    const urls = urlListSetting(settings, 'images');
    if (urls.length > REMIX_MAX_IMAGES) {
      throw new ProviderError(`at most ${REMIX_MAX_IMAGES} input images are accepted, got ${urls.length}`, {
        code: 'invalid_input',
        publicMessage: `This model takes at most ${REMIX_MAX_IMAGES} input images; it was given ${urls.length}.`,
      });
    }
    const style = selectSetting(settings, 'style', REMIX_STYLES);
    const size = selectSetting(settings, 'size', REMIX_SIZES);
    const { width, height } = parseSize(size);

    const inputs: Uint8Array[] = [];
    for (const url of urls) {
      const bytes = await fetchInput(url, inputs.length, ctx, runtime);
      checkInputSize(bytes, inputs.length);
      inputs.push(bytes);
    }
    await pacer.reach(0.3);

    // The output depends on the fetched bytes, not the URLs: the same picture from two addresses remixes the same.
    const random = seededRandom(definition.modelId, canonicalSettings({ prompt, style, size }), ...inputs.map((b) => digest(b)));
    const result = new Canvas(width, height);
    let decodedCount = 0;
    const images = await Promise.all(inputs.map((bytes) => imageFromBytes(bytes, prompt, width, height, runtime)));
    ctx.signal.throwIfAborted();
    images.forEach(({ image, decoded }, index) => {
      if (decoded) decodedCount++;
      // A running average gives every input the same weight in the result.
      const weight = 1 / (index + 1);
      for (let i = 0; i < result.data.length; i++) result.data[i] = Math.round(result.data[i] * (1 - weight) + image.data[i] * weight);
    });
    applyStyle(result, style, paletteFor(prompt, random).colors);
    await pacer.reach(0.7);
    ctx.logger.debug({ inputs: inputs.length, decoded: decodedCount }, 'demo-image-remix: inputs combined');
    const bytes = await runtime.images.encodePng({
      width,
      height,
      data: result.data,
      alpha: false,
      text: { Software: '@genservice/demo-models', Title: prompt.slice(0, 200) },
    });
    await pacer.reach(1);
    return { bytes, mimeType: 'image/png' };
  },
};
