import { createServer, type Server } from 'node:http';
import { deflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryLedger, type GenerationService } from '@genservice/core';
import { createDemoProvider, encodePng, ImageWorkerPool } from '../src/index.js';
import { crc32 } from '../src/util/crc32.js';
import { until } from '@genservice/testing';

function chunk(type: string, data: Uint8Array): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  Buffer.from(data).copy(out, 8);
  out.writeUInt32BE(crc32(out, 4, 8 + data.length), 8 + data.length);
  return out;
}

/** The hostile input of issue 13: 4000x4000 RGB at 16 bits per sample, all zero: ~124 KB that inflates to 96 MB. */
function bombPng(): Buffer {
  const width = 4000;
  const height = 4000;
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 16; // bit depth
  ihdr[9] = 2; // RGB
  const raw = Buffer.alloc((width * 6 + 1) * height);
  return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)), chunk('IEND', new Uint8Array())]);
}

/** A large image the model does take (2048x2048, noisy so it does not compress to nothing): real decoding work. */
function bigPng(): Uint8Array {
  const width = 2048;
  const height = 2048;
  const data = new Uint8Array(width * height * 4);
  let seed = 7;
  for (let i = 0; i < data.length; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    data[i] = (i & 3) === 3 ? 255 : (seed >>> 24) & 0xff;
  }
  return encodePng({ width, height, data }, { alpha: false });
}

describe('image work off the event loop (issue 13)', () => {
  let server: Server;
  let base = '';
  const files = new Map<string, Uint8Array>();
  const pool = new ImageWorkerPool({ size: 1 });
  let service: GenerationService;
  const ledger = new MemoryLedger({ balances: { alice: 1000, bob: 1000 } });

  beforeAll(async () => {
    files.set('/bomb.png', bombPng());
    files.set('/big.png', bigPng());
    server = createServer((req, res) => {
      const body = files.get(req.url ?? '');
      if (!body) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': body.byteLength }).end(Buffer.from(body));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    service = createGenerationService({
      providers: [createDemoProvider({ speed: 0, fetch: { allowPrivateNetworks: true }, imageWorkers: pool })],
      ledger,
      publicUrl: 'http://files.test/api',
    });
    await service.start();
  });

  afterAll(async () => {
    await service.stop({ timeoutMs: 2000 });
    await pool.close();
    await new Promise((r) => server.close(r));
  });

  /** Polls the generation until it ends; `during` runs between reads (a test's probe while it runs). */
  async function finish(user: string, id: string, during?: () => Promise<void>): Promise<Record<string, unknown>> {
    const view = await until(async () => {
        const v = await service.details(user, id);
        if (v.status !== 'completed' && v.status !== 'failed' && during) await during();
        return v;
      }, { accept: (v) => v.status === 'completed' || v.status === 'failed', timeoutMs: 30_000, intervalMs: during ? 0 : 5 });
    return view as unknown as Record<string, unknown>;
  }

  it('refuses the 4000x4000 16-bit PNG from its header, before inflating it, with a reason the user can read', async () => {
    expect(files.get('/bomb.png')!.byteLength).toBeLessThan(200_000);
    const before = pool.tasksStarted;
    const { generationId } = await service.create('alice', {
      modelId: 'demo-image-remix',
      settings: { prompt: 'a bomb', images: [`${base}/bomb.png`] },
    });
    const view = await finish('alice', generationId);
    expect(view.status).toBe('failed');
    expect(view.error).toEqual({
      code: 'invalid_input',
      message: 'Input image 1 is 4000x4000 at 16 bits per sample; this model takes PNG images of at most 4194304 pixels (2048x2048) at 8 bits.',
    });
    // Nothing was decoded (no task reached the image workers).
    expect(pool.tasksStarted).toBe(before);
  });

  it("answers another user's requests while a large image is decoded in the worker", async () => {
    await service.create('bob', { modelId: 'demo-text', settings: { prompt: 'hello' } });
    const { generationId: bobs } = await service.create('bob', { modelId: 'demo-text', settings: { prompt: 'hi' } });
    const { generationId } = await service.create('alice', {
      modelId: 'demo-image-remix',
      settings: { prompt: 'big', images: [`${base}/big.png`], size: '512x512' },
    });
    let answeredWhileBusy = 0;
    let slowest = 0;
    const view = await finish('alice', generationId, async () => {
      const busy = pool.busy > 0;
      const t0 = performance.now();
      const r = await service.handle({ method: 'GET', path: `/v1/generations/${bobs}`, headers: {} });
      slowest = Math.max(slowest, performance.now() - t0);
      expect(r.status).toBe(401); // no key here: the cheapest answer there is, still a full trip through the handler
      await service.get('bob', bobs);
      if (busy && pool.busy > 0) answeredWhileBusy++;
      await new Promise((r) => setImmediate(r));
    });
    expect(view.status, JSON.stringify(view)).toBe('completed');
    // Requests kept being answered while the decode ran: on the event loop it would have allowed none.
    expect(answeredWhileBusy).toBeGreaterThan(0);
    console.log(`[workers] answered ${answeredWhileBusy} reads while the image worker was busy; slowest read ${slowest.toFixed(1)} ms`);
  });
});
