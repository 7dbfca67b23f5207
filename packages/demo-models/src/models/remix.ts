import type { GenerationContext, ModelDefinition } from '@genservice/core';
import { ProviderError } from '@genservice/core';
import { fetchMedia, MediaFetchError } from '@genservice/core';
import { decodePng, encodePng, isPng, type RgbaImage } from '../formats/png.js';
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

/** Fetches one input, turning fetch failures into the ProviderError the runner understands. */
async function fetchInput(url: string, ctx: GenerationContext, runtime: DemoRuntime): Promise<Uint8Array> {
  try {
    const media = await fetchMedia(url, { ...runtime.fetch, signal: ctx.signal });
    return media.bytes;
  } catch (error) {
    if (ctx.signal.aborted) throw error;
    if (error instanceof MediaFetchError) {
      ctx.logger.warn({ code: error.code, reason: error.message }, 'demo-image-remix: input image refused or unavailable');
      throw new ProviderError(`input image could not be used: ${error.message}`, { retryable: error.retryable, cause: error });
    }
    throw error;
  }
}

/** Scales to cover the target and crops the middle, with bilinear sampling. */
function coverResize(source: RgbaImage, width: number, height: number): Canvas {
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

/** An input the demo cannot decode still shapes the result: its hash seeds a pattern. */
function imageFromBytes(bytes: Uint8Array, prompt: string, width: number, height: number): { image: Canvas; decoded: boolean } {
  if (isPng(bytes)) {
    try {
      return { image: coverResize(decodePng(bytes, { maxPixels: 16_000_000 }), width, height), decoded: true };
    } catch {
      // A corrupt or unsupported PNG falls through to the hash pattern, like any other undecodable input.
    }
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
    const pacer = new Pacer(budgetMs(definition, runtime), ctx.signal);
    const prompt = textSetting(settings, 'prompt');
    const urls = urlListSetting(settings, 'images');
    if (urls.length > REMIX_MAX_IMAGES) throw new ProviderError(`at most ${REMIX_MAX_IMAGES} input images are accepted, got ${urls.length}`);
    const style = selectSetting(settings, 'style', REMIX_STYLES);
    const size = selectSetting(settings, 'size', REMIX_SIZES);
    const { width, height } = parseSize(size);

    const inputs: Uint8Array[] = [];
    for (const url of urls) inputs.push(await fetchInput(url, ctx, runtime));
    await pacer.reach(0.3);

    // The output depends on the fetched bytes, not the URLs: the same picture from two addresses remixes the same.
    const random = seededRandom(definition.modelId, canonicalSettings({ prompt, style, size }), ...inputs.map((b) => digest(b)));
    const result = new Canvas(width, height);
    let decodedCount = 0;
    inputs.forEach((bytes, index) => {
      const { image, decoded } = imageFromBytes(bytes, prompt, width, height);
      if (decoded) decodedCount++;
      // A running average gives every input the same weight in the result.
      const weight = 1 / (index + 1);
      for (let i = 0; i < result.data.length; i++) result.data[i] = Math.round(result.data[i] * (1 - weight) + image.data[i] * weight);
    });
    applyStyle(result, style, paletteFor(prompt, random).colors);
    await pacer.reach(0.7);
    ctx.logger.debug({ inputs: inputs.length, decoded: decodedCount }, 'demo-image-remix: inputs combined');
    const bytes = encodePng(result, { alpha: false, text: { Software: '@genservice/demo-models', Title: prompt.slice(0, 200) } });
    await pacer.reach(1);
    return { bytes, mimeType: 'image/png' };
  },
};
