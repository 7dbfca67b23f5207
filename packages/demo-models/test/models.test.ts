import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { GenerationOutput, ModelDefinition, Settings } from '@genservice/core';
import { ProviderError } from '@genservice/core';
import { ALWAYS_FAILS_MESSAGE, createDemoProvider, DEMO_MODEL_IDS, decodePng, demoModels, encodePng } from '../src/index.js';
import { makeContext, same, type Streamed } from './helpers.js';
import { checkGlb, checkWav, decodeIPcmSlice, mp4Nals, parseSps } from './structure.js';
import { checkMp4, checkPng } from './validate.js';

const provider = createDemoProvider({ speed: 0 });

function model(id: string): ModelDefinition {
  const found = provider.models.find((m) => m.modelId === id);
  if (!found) throw new Error(`no model ${id}`);
  return found;
}

function run(id: string, settings: Settings, signal?: AbortSignal): Promise<GenerationOutput> {
  return provider.generate({ model: model(id), settings }, makeContext(signal));
}

async function bytes(id: string, settings: Settings): Promise<Uint8Array> {
  const out = await run(id, settings);
  if (!('bytes' in out)) throw new Error('expected bytes');
  return out.bytes;
}

function priceOf(id: string, settings: Settings): number {
  const { price } = model(id);
  return typeof price === 'number' ? price : price(settings);
}

describe('catalogue', () => {
  it('offers every result type, each model with a required prompt and select options', () => {
    expect(provider.models.map((m) => m.modelId)).toEqual([...DEMO_MODEL_IDS]);
    expect(new Set(provider.models.map((m) => m.resultType))).toEqual(new Set(['image', 'video', 'text', 'audio', '3d']));
    for (const m of provider.models) {
      expect(m.settings.find((s) => s.name === 'prompt')).toMatchObject({ fieldType: 'text', required: true });
      for (const s of m.settings.filter((x) => x.fieldType === 'select')) expect(s.options?.length).toBeGreaterThan(1);
      expect(m.estimatedGenerationTime).toBeGreaterThan(0);
      // Core's default timeout would be 4 x the estimate; each model sets room for its own work.
      expect(m.timeoutMs).toBeGreaterThanOrEqual(m.estimatedGenerationTime * 1000 * 4);
    }
    expect(model('demo-image-remix').settings.find((s) => s.name === 'images')).toMatchObject({ fieldType: 'image', required: true });
  });

  it('prices differ between models and grow with the settings', () => {
    const defaults = Object.fromEntries(DEMO_MODEL_IDS.map((id) => [id, priceOf(id, { prompt: 'x' })]));
    expect(defaults).toEqual({
      'demo-text': 1,
      'demo-image': 5,
      'demo-video': 20,
      'demo-audio': 4,
      'demo-3d': 8,
      'demo-image-remix': 6,
      'demo-always-fails': 3,
    });
    expect(priceOf('demo-image', { prompt: 'x', size: '512x512' })).toBe(8);
    expect(priceOf('demo-video', { prompt: 'x', size: '320x240', duration: '4' })).toBe(40);
    expect(priceOf('demo-audio', { prompt: 'x', duration: '10' })).toBe(6);
    expect(priceOf('demo-image-remix', { prompt: 'x', images: ['http://a/'], size: '512x512' })).toBe(9);
    expect(model('demo-always-fails')).toMatchObject({ failureFee: 2, maxAttempts: 1 });
  });

  it('hands out copies, and can offer a subset', () => {
    const a = createDemoProvider();
    a.models[0].title = 'changed';
    expect(createDemoProvider().models[0].title).not.toBe('changed');
    expect(demoModels[0].title).not.toBe('changed');
    expect(createDemoProvider({ models: ['demo-text'] }).models.map((m) => m.modelId)).toEqual(['demo-text']);
    expect(() => createDemoProvider({ models: ['nope' as 'demo-text'] })).toThrow(/unknown demo model/);
    expect(() => createDemoProvider({ speed: -1 })).toThrow(RangeError);
  });
});

describe('demo-image', () => {
  it('draws every style at every size as a valid PNG, and the picture varies with the prompt', async () => {
    for (const style of ['abstract', 'landscape', 'mosaic', 'pixel-art']) {
      for (const size of ['256x256', '512x512']) {
        const png = await bytes('demo-image', { prompt: 'a red fox in the forest', style, size });
        const [w, h] = size.split('x').map(Number);
        expect(checkPng(png)).toEqual({ width: w, height: h });
        const pixels = decodePng(png).data;
        // Not a flat fill: a picture has many distinct colours.
        const colours = new Set<number>();
        for (let i = 0; i < pixels.length; i += 4 * 7) colours.add((pixels[i] << 16) | (pixels[i + 1] << 8) | pixels[i + 2]);
        expect(colours.size).toBeGreaterThan(20);
      }
    }
  });

  it('colour words steer the palette', async () => {
    const mean = async (prompt: string): Promise<number[]> => {
      const { data } = decodePng(await bytes('demo-image', { prompt, style: 'mosaic' }));
      const sum = [0, 0, 0];
      for (let i = 0; i < data.length; i += 4) for (let c = 0; c < 3; c++) sum[c] += data[i + c];
      return sum.map((s) => s / (data.length / 4));
    };
    const red = await mean('red fire');
    const blue = await mean('blue ocean');
    expect(red[0] - red[2]).toBeGreaterThan(blue[0] - blue[2]);
  });
});

describe('demo-video', () => {
  it('every sample is an I_PCM IDR picture of the announced size', async () => {
    const mp4 = await bytes('demo-video', { prompt: 'night sea', style: 'landscape' });
    expect(checkMp4(mp4)).toEqual({ samples: 24, width: 160, height: 120 });
    const nals = mp4Nals(mp4);
    const sps = parseSps(nals.sps);
    expect(sps).toMatchObject({ width: 160, height: 120, mbWidth: 10, mbHeight: 8 });
    const first = decodeIPcmSlice(nals.samples[0], sps.mbWidth, sps.mbHeight);
    const last = decodeIPcmSlice(nals.samples[23], sps.mbWidth, sps.mbHeight);
    // Something moves between the first and the last frame.
    expect(Buffer.from(first.y).equals(Buffer.from(last.y))).toBe(false);
    for (const value of first.y) expect(value).toBeGreaterThanOrEqual(16);
  });

  it('is deterministic and follows the prompt', async () => {
    const settings = { prompt: 'orbiting moons', style: 'abstract', size: '160x120', duration: '2' };
    const a = await bytes('demo-video', settings);
    expect(same(a, await bytes('demo-video', { ...settings }))).toBe(true);
    expect(same(a, await bytes('demo-video', { ...settings, prompt: 'orbiting suns' }))).toBe(false);
  });
});

describe('demo-text', () => {
  it('writes text about the prompt, longer for longer settings, deterministic', async () => {
    const text = async (settings: Settings): Promise<string> => {
      const out = await run('demo-text', settings);
      if (!('text' in out)) throw new Error('expected text');
      return out.text;
    };
    for (const style of ['story', 'poem', 'product', 'news']) {
      const short = await text({ prompt: 'lighthouse keeper and a whale', length: 'short', style });
      const long = await text({ prompt: 'lighthouse keeper and a whale', length: 'long', style });
      expect(short).toMatch(/lighthouse|keeper|whale/i);
      expect(long.length).toBeGreaterThan(short.length);
      expect(await text({ prompt: 'lighthouse keeper and a whale', length: 'short', style })).toBe(short);
      expect(await text({ prompt: 'a teapot in space', length: 'short', style })).not.toBe(short);
    }
  });
});

describe('partial output', () => {
  it('demo-text streams its words: the deltas, in order, are the text', async () => {
    const streamed: Streamed = { text: [], previews: [] };
    const settings = { prompt: 'lighthouse keeper and a whale', length: 'medium', style: 'story' };
    const out = await provider.generate({ model: model('demo-text'), settings }, makeContext(undefined, streamed));
    if (!('text' in out)) throw new Error('expected text');
    expect(streamed.text.length).toBe(out.text.split(/\s+/).length);
    expect(streamed.text.join('')).toBe(out.text);
    expect(streamed.previews).toEqual([]);
  });

  it('demo-image sends one low-resolution PNG preview of the final picture before it', async () => {
    const streamed: Streamed = { text: [], previews: [] };
    const out = await provider.generate({ model: model('demo-image'), settings: { prompt: 'a red lighthouse', size: '512x512' } }, makeContext(undefined, streamed));
    if (!('bytes' in out)) throw new Error('expected bytes');
    expect(streamed.previews).toHaveLength(1);
    expect(streamed.previews[0]!.mimeType).toBe('image/png');
    const preview = decodePng(streamed.previews[0]!.bytes);
    expect([preview.width, preview.height]).toEqual([64, 64]);
    // A draft of the same picture: each preview pixel is close to the average of its block of the final one.
    const full = decodePng(out.bytes);
    let diff = 0;
    for (let y = 0; y < 64; y++) {
      for (let x = 0; x < 64; x++) {
        let sum = 0;
        for (let dy = 0; dy < 8; dy++) for (let dx = 0; dx < 8; dx++) sum += full.data[((y * 8 + dy) * 512 + x * 8 + dx) * 4]!;
        diff += Math.abs(preview.data[(y * 64 + x) * 4]! - sum / 64);
      }
    }
    expect(diff / (64 * 64)).toBeLessThan(2);
    expect(streamed.text).toEqual([]);
  });
});

describe('demo-audio', () => {
  it('makes a 22.05 kHz 16-bit mono WAV of the chosen length, audible and unclipped', async () => {
    for (const [duration, instrument] of [['3', 'sine'], ['5', 'square'], ['10', 'pluck']]) {
      const wav = checkWav(await bytes('demo-audio', { prompt: 'a happy tune', duration, instrument }));
      expect(wav).toMatchObject({ sampleRate: 22_050, channels: 1, bits: 16 });
      expect(wav.samples.length).toBe(Number(duration) * 22_050);
      let peak = 0;
      let energy = 0;
      for (const s of wav.samples) {
        peak = Math.max(peak, Math.abs(s));
        energy += s * s;
      }
      expect(peak).toBeGreaterThan(3000);
      expect(peak).toBeLessThanOrEqual(32_000);
      expect(Math.sqrt(energy / wav.samples.length)).toBeGreaterThan(500);
      // The fade-out ends in silence, so the clip does not click when it stops.
      expect(Math.abs(wav.samples[wav.samples.length - 1])).toBeLessThan(200);
    }
  });

  it('is deterministic and follows the prompt', async () => {
    const a = await bytes('demo-audio', { prompt: 'rain on a window' });
    expect(same(a, await bytes('demo-audio', { prompt: 'rain on a window' }))).toBe(true);
    expect(same(a, await bytes('demo-audio', { prompt: 'sun on a window' }))).toBe(false);
  });
});

describe('demo-3d', () => {
  it('every shape is a valid GLB with normals, colours and a material', async () => {
    for (const shape of ['blob', 'sphere', 'cube', 'torus', 'cone']) {
      for (const finish of ['matte', 'metallic']) {
        const out = await run('demo-3d', { prompt: 'a green crystal', shape, finish });
        expect(out).toMatchObject({ mimeType: 'model/gltf-binary' });
        const { json, triangles } = checkGlb((out as { bytes: Uint8Array }).bytes);
        expect(triangles).toBeGreaterThanOrEqual(12);
        expect(Object.keys(json.meshes[0].primitives[0].attributes).sort()).toEqual(['COLOR_0', 'NORMAL', 'POSITION']);
        expect(json.materials).toHaveLength(1);
      }
    }
  });

  it('is deterministic and follows the prompt', async () => {
    const a = await bytes('demo-3d', { prompt: 'golden blob' });
    expect(same(a, await bytes('demo-3d', { prompt: 'golden blob' }))).toBe(true);
    expect(same(a, await bytes('demo-3d', { prompt: 'silver blob' }))).toBe(false);
  });
});

describe('demo-always-fails', () => {
  it('fails every run with a non-retryable ProviderError whose public message says it fails on purpose', async () => {
    const failure = await run('demo-always-fails', { prompt: 'anything' }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(ProviderError);
    expect(failure).toMatchObject({ retryable: false, code: 'provider_error', message: ALWAYS_FAILS_MESSAGE, publicMessage: ALWAYS_FAILS_MESSAGE });
    expect(ALWAYS_FAILS_MESSAGE).toMatch(/on purpose/);
  });
});

describe('demo-image-remix', () => {
  let server: Server;
  let base: string;
  const red = encodePng({ width: 8, height: 8, data: new Uint8Array(8 * 8 * 4).map((_, i) => (i % 4 === 0 || i % 4 === 3 ? 255 : 0)) });
  const gradient = encodePng({ width: 64, height: 32, data: new Uint8Array(64 * 32 * 4).map((_, i) => (i % 4 === 3 ? 255 : (i >> 2) % 64 * 4)) });
  const remix = createDemoProvider({ speed: 0, fetch: { allowPrivateNetworks: true } });

  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === '/red.png') res.end(red);
      else if (req.url === '/gradient.png') res.end(gradient);
      else if (req.url === '/photo.jpg') res.end(Buffer.from('\xff\xd8\xff\xe0 not really a jpeg', 'latin1'));
      else {
        res.statusCode = 404;
        res.end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const go = (settings: Settings, p = remix): Promise<GenerationOutput> =>
    p.generate({ model: model('demo-image-remix'), settings }, makeContext());

  it('remixes fetched PNGs into a PNG that depends on their content', async () => {
    for (const style of ['posterize', 'tint', 'pixelate']) {
      const a = (await go({ prompt: 'make it blue', images: [`${base}/red.png`], style })) as { bytes: Uint8Array; mimeType: string };
      expect(a.mimeType).toBe('image/png');
      expect(checkPng(a.bytes)).toEqual({ width: 256, height: 256 });
      const again = (await go({ prompt: 'make it blue', images: [`${base}/red.png`], style })) as { bytes: Uint8Array };
      expect(same(a.bytes, again.bytes)).toBe(true);
      const other = (await go({ prompt: 'make it blue', images: [`${base}/gradient.png`], style })) as { bytes: Uint8Array };
      expect(same(a.bytes, other.bytes)).toBe(false);
    }
    const both = (await go({ prompt: 'x', images: [`${base}/red.png`, `${base}/photo.jpg`], size: '512x512' })) as { bytes: Uint8Array };
    expect(checkPng(both.bytes)).toEqual({ width: 512, height: 512 });
  });

  it('fails the generation with a clear non-retryable reason for a refused or missing input', async () => {
    // The default provider refuses loopback addresses: the same URL that works above is an SSRF attempt here.
    // Each says, in its public message, which input could not be used and why.
    const refused = await go({ prompt: 'x', images: [`${base}/red.png`] }, provider).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ProviderError);
    expect(refused).toMatchObject({
      retryable: false,
      code: 'invalid_input',
      message: expect.stringMatching(/refusing to fetch .*loopback/),
      publicMessage: expect.stringMatching(/^Input image 1 could not be used: refusing to fetch http:\/\/127\.0\.0\.1:\d+\/red\.png: .*loopback/),
    });
    const missing = await go({ prompt: 'x', images: [`${base}/red.png`, `${base}/nothing.png`] }).catch((e: unknown) => e);
    expect(missing).toMatchObject({
      name: 'ProviderError',
      retryable: false,
      code: 'invalid_input',
      message: expect.stringContaining('HTTP 404'),
      publicMessage: expect.stringMatching(/^Input image 2 could not be used: .*\/nothing\.png answered HTTP 404\.$/),
    });
    const notHttp = await go({ prompt: 'x', images: ['file:///etc/passwd'] }).catch((e: unknown) => e);
    expect(notHttp).toMatchObject({ name: 'ProviderError', message: expect.stringContaining('only http and https'), publicMessage: expect.stringMatching(/^Input image 1 could not be used: only http and https/) });
    const tooMany = await go({ prompt: 'x', images: Array(5).fill(`${base}/red.png`) }).catch((e: unknown) => e);
    expect(tooMany).toMatchObject({ name: 'ProviderError', message: expect.stringContaining('at most 4'), publicMessage: 'This model takes at most 4 input images; it was given 5.' });
  });
});

describe('timing and cancellation', () => {
  /**
   * Runs `work` under a fake clock (setTimeout and Date only: worker threads and I/O stay real), moving the clock to
   * the next timer whenever one is due and letting real events through otherwise, so the fake time that passes is
   * exactly what the models asked to wait.
   */
  async function onFakeClock<T>(work: () => Promise<T>): Promise<T> {
    let settled = false;
    const running = work().finally(() => {
      settled = true;
    });
    while (!settled) {
      if (vi.getTimerCount() > 0) await vi.advanceTimersToNextTimerAsync();
      else await new Promise((r) => setImmediate(r));
    }
    return running;
  }

  it('paces each run to estimatedGenerationTime x speed (a fake clock: the pacer waits exactly its budget)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const scaled = createDemoProvider({ speed: 0.1 });
      for (const id of ['demo-text', 'demo-image', 'demo-audio', 'demo-3d', 'demo-video']) {
        const m = scaled.models.find((x) => x.modelId === id) as ModelDefinition;
        const started = Date.now();
        await onFakeClock(() => scaled.generate({ model: m, settings: { prompt: 'timing' } }, makeContext()));
        const expected = m.estimatedGenerationTime * 100;
        // The real work takes no fake time: what passed is the pacing alone, to the millisecond.
        expect(Math.abs(Date.now() - started - expected), id).toBeLessThanOrEqual(1);
      }
    } finally {
      vi.useRealTimers();
    }
  });

  it('every model stops on its signal, without waiting out its paced budget (a fake clock)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const slow = createDemoProvider({ speed: 1 });
      const controller = new AbortController();
      const reason = new Error('cancelled');
      const started = Date.now();
      const runs = slow.models.map((m) => {
        const settings: Settings = { prompt: 'abort me', images: ['http://192.0.2.1/never.png'] };
        if (m.modelId !== 'demo-image-remix') delete settings.images;
        return slow.generate({ model: m, settings }, makeContext(controller.signal)).catch((e: unknown) => e);
      });
      await vi.advanceTimersByTimeAsync(30);
      controller.abort(reason);
      const errors = await onFakeClock(() => Promise.all(runs));
      slow.models.forEach((m, i) => {
        // The remix's blocked URL fails before the abort; every other model must stop on the abort itself.
        if (m.modelId === 'demo-image-remix') expect(errors[i]).toBeInstanceOf(ProviderError);
        else expect(errors[i], m.modelId).toBe(reason);
      });
      // No model waited on after the abort: the clock never moved past it.
      expect(Date.now() - started).toBe(30);
    } finally {
      vi.useRealTimers();
    }
  });

  it('an already-aborted signal stops before any work', async () => {
    const controller = new AbortController();
    controller.abort(new Error('too late'));
    await expect(run('demo-video', { prompt: 'x' }, controller.signal)).rejects.toThrow('too late');
  });
});
