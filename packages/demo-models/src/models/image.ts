import type { ModelDefinition } from '@genservice/core';
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
