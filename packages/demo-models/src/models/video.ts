import type { ModelDefinition } from '@genservice/core';
import { encodeIdrFrame, h264Headers } from '../formats/h264.js';
import { muxMp4 } from '../formats/mp4.js';
import { Pacer } from '../util/abort.js';
import { Canvas } from '../util/raster.js';
import { canonicalSettings, seededRandom } from '../util/random.js';
import { parseSize } from './image.js';
import { createScene, SCENE_STYLES } from './scene.js';
import { budgetMs, selectSetting, textSetting, type DemoModel } from './types.js';

export const VIDEO_SIZES = ['160x120', '320x240'] as const;
export const VIDEO_DURATIONS = ['2', '4'] as const;
export const VIDEO_FPS = 12;

const definition: ModelDefinition = {
  modelId: 'demo-video',
  title: 'Demo video (MP4, H.264, plays in browsers)',
  resultType: 'video',
  estimatedGenerationTime: 6,
  settings: [
    { name: 'prompt', title: 'Prompt', fieldType: 'text', required: true },
    { name: 'size', title: 'Frame size', fieldType: 'select', options: [...VIDEO_SIZES] },
    { name: 'duration', title: 'Duration (seconds)', fieldType: 'select', options: [...VIDEO_DURATIONS] },
    { name: 'style', title: 'Style', fieldType: 'select', options: [...SCENE_STYLES] },
  ],
  // Bigger and longer clips cost more: 20, plus 10 for 320x240, plus 10 for 4 s.
  price: (settings) =>
    20 +
    (selectSetting(settings, 'size', VIDEO_SIZES) === '320x240' ? 10 : 0) +
    (selectSetting(settings, 'duration', VIDEO_DURATIONS) === '4' ? 10 : 0),
  timeoutMs: 60_000,
  // On the OpenAI-compatible surface (POST /openai/v1/videos), OpenAI's `seconds: "4"` is this model's duration.
  openai: { params: { seconds: 'duration' } },
};

export const videoModel: DemoModel = {
  definition,
  async run(settings, ctx, runtime) {
    const pacer = new Pacer(budgetMs(definition, runtime), ctx.signal, (f) => ctx.progress(f));
    const prompt = textSetting(settings, 'prompt');
    const size = selectSetting(settings, 'size', VIDEO_SIZES);
    const duration = selectSetting(settings, 'duration', VIDEO_DURATIONS);
    const style = selectSetting(settings, 'style', SCENE_STYLES);
    const random = seededRandom(definition.modelId, canonicalSettings({ prompt, size, duration, style }));
    const { width, height } = parseSize(size);
    const scene = createScene(style, prompt, random);
    const frameCount = Number(duration) * VIDEO_FPS;
    const frames: Uint8Array[] = [];
    for (let i = 0; i < frameCount; i++) {
      const canvas = new Canvas(width, height);
      scene(canvas, i / frameCount);
      frames.push(encodeIdrFrame(canvas, i % 2));
      // Pacing per frame spreads the delay over the work, so an abort is noticed within one frame.
      await pacer.reach((i + 1) / (frameCount + 1));
    }
    const bytes = muxMp4({ width, height, fps: VIDEO_FPS, stream: h264Headers(width, height, VIDEO_FPS), frames });
    await pacer.reach(1);
    return { bytes, mimeType: 'video/mp4' };
  },
};
