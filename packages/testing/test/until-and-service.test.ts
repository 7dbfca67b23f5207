import { afterEach, describe, expect, it, vi } from 'vitest';
import { createDeferred, createTestService, until } from '../src/index.js';

describe('until', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('answers the first truthy value of a sync or async check, polling until it comes', async () => {
    let calls = 0;
    expect(await until(() => (++calls >= 3 ? { at: calls } : undefined))).toEqual({ at: 3 });
    let asyncCalls = 0;
    expect(await until(async () => (++asyncCalls >= 2 ? 'ready' : ''), { intervalMs: 0 })).toBe('ready');
    expect(asyncCalls).toBe(2);
  });

  it('with accept, waits for the accepted value and answers it even when falsy', async () => {
    const values = [1, 2, null];
    expect(await until(() => values.shift(), { accept: (v) => v === null })).toBeNull();
    expect(values).toEqual([]);
  });

  it('gives up after timeoutMs with an error naming what was awaited and the last value', async () => {
    await expect(until(() => ({ status: 'processing' }), { accept: (v) => v.status === 'completed', what: 'the generation', timeoutMs: 30 })).rejects.toThrow(
      /timed out after 30 ms waiting for the generation \(last value: \{ status: 'processing' \}\)/,
    );
    const seen: number[] = [];
    await expect(until(() => (seen.push(seen.length), false), { what: () => `a check read ${seen.length > 1 ? 'more than once' : 'once'}`, timeoutMs: 30 })).rejects.toThrow(
      /waiting for a check read more than once/,
    );
    // Without `what`, the check's own source names it.
    await expect(until(() => 1 > 2, { timeoutMs: 1 })).rejects.toThrow(/waiting for \(\) => 1 > 2 to hold/);
  });

  it("passes a check's error on at once, without polling again", async () => {
    let calls = 0;
    const failing = (): boolean => {
      calls++;
      throw new Error('the check broke');
    };
    await expect(until(failing)).rejects.toThrow('the check broke');
    expect(calls).toBe(1);
  });

  it('waits on real time while the test fakes timers and Date', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'setInterval', 'clearInterval', 'Date', 'performance'] });
    const io = createDeferred<string>();
    let answer: string | undefined;
    void io.promise.then((v) => (answer = v));
    // Real I/O (a real timer, taken before the fake ones) resolves it; the fake clock never moves.
    const { setTimeout: realTimeout } = await import('node:timers');
    realTimeout(() => io.resolve('from the real world'), 5);
    expect(await until(() => answer, 'the real-world answer')).toBe('from the real world');
  });
});

describe('createTestService', () => {
  it('makes a started service on in-memory ports with the fake provider, balances and keys, and stops it', async () => {
    const t = await createTestService({ balances: { alice: 10 }, keys: { 'key-alice': 'alice' } });
    try {
      const { generationId } = await t.service.create('alice', { modelId: 'fake-held' });
      await t.provider!.gate.reached(1);
      expect((await t.service.get('alice', generationId)).status).toBe('processing');
      t.provider!.gate.release();
      const done = await until(() => t.service.get('alice', generationId), { accept: (g) => g.status === 'completed' });
      expect(done).toMatchObject({ status: 'completed', result: 'ok', price: 1 });
      expect(await t.ledger!.balance('alice')).toBe(9);
      const models = await t.service.handle({ method: 'GET', path: '/v1/models', headers: { authorization: 'Bearer key-alice' } });
      expect(models.status).toBe(200);
      expect((await t.store.getById(generationId))?.status).toBe('completed');
    } finally {
      await t.stop();
    }
    // Twice is harmless.
    await t.stop();
  });

  it('takes the ports and providers it is given, and starts only when asked', async () => {
    const { MemoryLedger } = await import('@genservice/core');
    const ledger = new MemoryLedger({ balances: { bob: 5 } });
    const t = await createTestService({ ledger, providers: [], start: false });
    expect(t.provider).toBeUndefined();
    expect(t.ledger).toBeUndefined();
    expect(await t.service.balance('bob')).toBe(5);
    await t.stop();
  });
});
