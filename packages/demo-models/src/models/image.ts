import type { ModelDefinition } from '@genservice/core';
import { encodePng } from '../formats/png.js';
import { Pacer } from '../util/abort.js';
import { Canvas } from '../util/raster.js';
import { canonicalSettings, seededRandom } from '../util/random.js';
import { createScene, SCENE_STYLES } from './scene.js';
import { budgetMs, selectSetting, textSetting, type DemoModel } from './types.js';

export const IMAGE_SIZES = ['256x256', '512x512'] as const;
const IMAGE_PRICES: Record<(typeof IMAGE_SIZES)[number], number> = { '256x256': 5, '512x512': 8 };

const definition: ModelDefinition = {
  modelId: 'demo-image',
  title: 'Demo image (PNG drawn from the prompt)',
  resultType: 'image',
  estimatedGenerationTime: 2,
  settings: [
    { name: 'prompt', title: 'Prompt', fieldType: 'text', required: true },
    { name: 'size', title: 'Size', fieldType: 'select', options: [...IMAGE_SIZES] },
    { name: 'style', title: 'Style', fieldType: 'select', options: [...SCENE_STYLES] },
  ],
  price: (settings) => IMAGE_PRICES[selectSetting(settings, 'size', IMAGE_SIZES)],
  timeoutMs: 30_000,
};

export function parseSize(size: string): { width: number; height: number } {
  const [width, height] = size.split('x').map(Number);
  return { width, height };
}

/** How much smaller the preview is than the image, per side. */
export const PREVIEW_SCALE = 8;

/** A 1/scale-per-side copy (each pixel the average of its block): the low-resolution draft a client sees first. */
export function shrink(canvas: Canvas, scale: number): Canvas {
  const out = new Canvas(Math.max(1, Math.floor(canvas.width / scale)), Math.max(1, Math.floor(canvas.height / scale)));
  const src = canvas.data;
  for (let y = 0; y < out.height; y++) {
    for (let x = 0; x < out.width; x++) {
      const sum = [0, 0, 0, 0];
      for (let dy = 0; dy < scale; dy++) {
        for (let dx = 0; dx < scale; dx++) {
          const i = ((y * scale + dy) * canvas.width + (x * scale + dx)) * 4;
          for (let c = 0; c < 4; c++) sum[c]! += src[i + c]!;
        }
      }
      const o = (y * out.width + x) * 4;
      for (let c = 0; c < 4; c++) out.data[o + c] = Math.round(sum[c]! / (scale * scale));
    }
  }
  return out;
}

export const imageModel: DemoModel = {
  definition,
  async run(settings, ctx, runtime) {
    const pacer = new Pacer(budgetMs(definition, runtime), ctx.signal, (f) => ctx.progress(f));
    const prompt = textSetting(settings, 'prompt');
    const size = selectSetting(settings, 'size', IMAGE_SIZES);
    const style = selectSetting(settings, 'style', SCENE_STYLES);
    const random = seededRandom(definition.modelId, canonicalSettings({ prompt, size, style }));
    const { width, height } = parseSize(size);
    const canvas = new Canvas(width, height);
    createScene(style, prompt, random)(canvas, 0);
    // One low-resolution preview first, as a hosted image model shows its draft before the final picture.
    // A few thousand pixels: encoded on this thread at once (the worker pool is for the full image, and may still be
    // starting, which a cancel must not wait for).
    const small = shrink(canvas, PREVIEW_SCALE);
    ctx.output.preview(encodePng(small, { alpha: false }), 'image/png');
    await pacer.reach(0.5);
    // Encoding (deflate) runs in the image worker pool, off the event loop.
    const bytes = await runtime.images.encodePng({
      width,
      height,
      data: canvas.data,
      alpha: false,
      text: { Software: '@genservice/demo-models', Title: prompt.slice(0, 200) },
    });
    await pacer.reach(1);
    return { bytes, mimeType: 'image/png' };
  },
};
