import { describe, expect, it, vi } from 'vitest';
import type { ModelDefinition, Settings } from '@genservice/core';
import { createDemoProvider } from '../src/index.js';
import { makeContext, same } from './helpers.js';
import { checkMp4, checkPng } from './validate.js';

const provider = createDemoProvider({ speed: 0 });

function model(id: string): ModelDefinition {
  const found = provider.models.find((m) => m.modelId === id);
  if (!found) throw new Error(`no model ${id}`);
  return found;
}

async function bytesOf(id: string, settings: Settings): Promise<Uint8Array> {
  const out = await provider.generate({ model: model(id), settings }, makeContext());
  if (!('bytes' in out)) throw new Error('expected bytes');
  return out.bytes;
}

describe('demo-image', () => {
  it('makes a valid PNG of the chosen size, deterministic from the settings', async () => {
    const settings = { prompt: 'a red fox at sunset', size: '256x256', style: 'landscape' };
    const out = await provider.generate({ model: model('demo-image'), settings }, makeContext());
    expect(out).toMatchObject({ mimeType: 'image/png' });
    const bytes = (out as { bytes: Uint8Array }).bytes;
    expect(checkPng(bytes)).toEqual({ width: 256, height: 256 });
    expect(same(await bytesOf('demo-image', { ...settings }), bytes)).toBe(true);
    expect(same(await bytesOf('demo-image', { ...settings, prompt: 'a blue whale' }), bytes)).toBe(false);
  });

  it('prices by size', () => {
    const price = model('demo-image').price as (s: Settings) => number;
    expect(price({ prompt: 'x' })).toBe(5);
    expect(price({ prompt: 'x', size: '512x512' })).toBe(8);
  });
});

describe('demo-video', () => {
  it('makes an MP4 with one sample per frame, deterministic', async () => {
    // Its CPU cost (the brief's budget: well under a second for a 2 s 160x120 clip) is measured by bench/, not here.
    const settings = { prompt: 'night sea', size: '160x120', duration: '2' };
    const bytes = await bytesOf('demo-video', settings);
    expect(checkMp4(bytes)).toEqual({ samples: 24, width: 160, height: 120 });
    expect(same(await bytesOf('demo-video', settings), bytes)).toBe(true);
    expect(same(await bytesOf('demo-video', { ...settings, prompt: 'day sea' }), bytes)).toBe(false);
  });

  it('4 s at 320x240 has 48 frames', async () => {
    expect(checkMp4(await bytesOf('demo-video', { prompt: 'x', size: '320x240', duration: '4', style: 'mosaic' }))).toEqual({
      samples: 48,
      width: 320,
      height: 240,
    });
  });
});

describe('provider', () => {
  it('rejects an unknown model id with a non-retryable ProviderError', async () => {
    const bogus = { ...model('demo-image'), modelId: 'nope' };
    await expect(provider.generate({ model: bogus, settings: {} }, makeContext())).rejects.toMatchObject({
      name: 'ProviderError',
      retryable: false,
    });
  });

  it('stops at speed 1 when the signal fires, without waiting out its paced budget (a fake clock)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const slow = createDemoProvider({ speed: 1 });
      for (const id of ['demo-image', 'demo-video']) {
        const controller = new AbortController();
        const started = Date.now();
        let settled = false;
        const run = slow.generate({ model: model(id), settings: { prompt: 'abort me' } }, makeContext(controller.signal)).finally(() => {
          settled = true;
        });
        const outcome = expect(run).rejects.toThrow('cancelled');
        await vi.advanceTimersByTimeAsync(50);
        controller.abort(new Error('cancelled'));
        // The clock stands still from here: the run must end on the abort itself, not on a timer.
        for (let i = 0; i < 1000 && !settled; i++) await new Promise((r) => setImmediate(r));
        await outcome;
        expect(Date.now() - started).toBe(50);
      }
    } finally {
      vi.useRealTimers();
    }
  });
});
