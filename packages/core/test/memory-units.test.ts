import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createGenerationService, DiskBlobStore, MemoryApiKeyStore, MemoryBlobStore, MemoryGenerationStore, MemoryLedger, UnavailableError, hashApiKey } from '@genservice/core';
import { until } from '@genservice/testing';

describe('hashApiKey', () => {
  it('is the hex SHA-256 of the UTF-8 key, as SQL stores will store it', () => {
    expect(hashApiKey('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(hashApiKey('ключ')).toBe(createHash('sha256').update(Buffer.from('ключ', 'utf8')).digest('hex'));
    expect(hashApiKey('')).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('MemoryApiKeyStore options', () => {
  it('takes its first keys from the constructor', async () => {
    const keys = new MemoryApiKeyStore({ keys: [{ apiKey: 'k1', userId: 'alice' }, { apiKey: 'k2', userId: 'bob' }] });
    expect(await keys.resolve('k1')).toMatchObject({ userId: 'alice' });
    expect(await keys.resolve('k2')).toMatchObject({ userId: 'bob' });
    expect(await keys.resolve('k3')).toBeNull();
  });

  it('refuses an empty key and a key given to two users', () => {
    expect(() => new MemoryApiKeyStore({ keys: [{ apiKey: '', userId: 'a' }] })).toThrow();
    expect(() => new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'a' }, { apiKey: 'k', userId: 'b' }] })).toThrow();
  });
});

describe('MemoryLedger options', () => {
  it('starts from the given balances', async () => {
    const ledger = new MemoryLedger({ balances: { alice: 30, bob: 0 } });
    expect(await ledger.account('alice')).toEqual({ balance: 30, reserved: 0, settled: 0 });
    expect(await ledger.balance('bob')).toBe(0);
  });

  it('refuses negative or non-finite amounts instead of corrupting an account', async () => {
    expect(() => new MemoryLedger({ balances: { a: -1 } })).toThrow(RangeError);
    const ledger = new MemoryLedger({ balances: { a: 10 } });
    await expect(ledger.credit('a', -1)).rejects.toThrow(RangeError);
    await expect(ledger.credit('a', Number.NaN)).rejects.toThrow(RangeError);
    await expect(ledger.reserve('a', 'g', -5)).rejects.toThrow(RangeError);
    await expect(ledger.reserve('a', 'g', Number.POSITIVE_INFINITY)).rejects.toThrow(RangeError);
    expect(await ledger.reserve('a', 'g', 4)).toBe('ok');
    await expect(ledger.settle('g', Number.NaN)).rejects.toThrow(RangeError);
    expect(await ledger.account('a')).toEqual({ balance: 6, reserved: 4, settled: 0 });
  });

  it("refuses to reserve one generation for a second user rather than riding on the first's hold", async () => {
    const ledger = new MemoryLedger({ balances: { a: 10, b: 10 } });
    expect(await ledger.reserve('a', 'g', 5)).toBe('ok');
    await expect(ledger.reserve('b', 'g', 5)).rejects.toThrow();
    expect(await ledger.account('b')).toEqual({ balance: 10, reserved: 0, settled: 0 });
    // Settled, the reserve leaves only its owner and charge (issue 36), and still refuses the other user, in one and in many.
    expect(await ledger.settle('g', 2)).toBe(2);
    await expect(ledger.reserve('b', 'g', 5)).rejects.toThrow(/another user/);
    await expect(ledger.reserveMany('b', [{ generationId: 'g', amount: 5 }])).rejects.toThrow(/another user/);
    expect(await ledger.reserve('a', 'g', 5)).toBe('ok');
    expect(await ledger.release('g')).toBe(2);
    expect(await ledger.openReserves(10)).toEqual([]);
    expect(await ledger.account('a')).toEqual({ balance: 8, reserved: 0, settled: 2 });
    expect(await ledger.account('b')).toEqual({ balance: 10, reserved: 0, settled: 0 });
  });
});

describe('MemoryGenerationStore owner lists (issue 36: an array per owner with gaps, compacted)', () => {
  const gen = (i: number, ownerId = 'alice') => ({
    id: `g${String(i).padStart(4, '0')}`,
    ownerId,
    modelId: 'm',
    settings: {},
    status: 'completed' as const,
    reserved: 1,
    createdAt: 1000 + i,
  });
  const ids = async (store: MemoryGenerationStore, ownerId = 'alice') => (await store.list(ownerId, { limit: 1000 })).map((r) => r.id);

  it('lists what is left, newest first, across removals that compact the list and one that empties it', async () => {
    const store = new MemoryGenerationStore();
    for (let i = 0; i < 200; i++) await store.insert(gen(i), { type: 'created', data: {} });
    await store.insert(gen(999, 'bob'), { type: 'created', data: {} });
    // 150 removed: past 64 gaps and half the list, so it is compacted on the way.
    for (let i = 0; i < 150; i++) expect(await store.remove(gen(i).id, { status: ['completed'] })).toBe(true);
    const left = Array.from({ length: 50 }, (_, k) => gen(199 - k).id);
    expect(await ids(store)).toEqual(left);
    // Removing after the compaction finds each entry at its new place.
    for (const id of left.slice(0, 10)) expect(await store.remove(id, { status: ['completed'] })).toBe(true);
    expect(await ids(store)).toEqual(left.slice(10));
    expect(await store.remove(left[0]!, { status: ['completed'] })).toBe(false);
    for (const id of left.slice(10)) await store.remove(id, { status: ['completed'] });
    expect(await ids(store)).toEqual([]);
    expect(await ids(store, 'bob')).toEqual([gen(999).id]);
    // A new generation after all of them went is listed again.
    await store.insert(gen(500), { type: 'created', data: {} });
    expect(await ids(store)).toEqual([gen(500).id]);
  });

  it('keeps each event and the feed in order, with data of its own (the shared empty data is never handed out)', async () => {
    const store = new MemoryGenerationStore();
    await store.insert({ ...gen(1), status: 'pending' }, { type: 'created', data: {} });
    for (let k = 0; k < 6; k++) await store.update(gen(1).id, { expect: { status: ['pending'] }, set: {}, event: { type: 'output', data: k % 2 ? {} : { delta: String(k) } }, now: 2000 + k });
    const events = await store.eventsOf(gen(1).id);
    expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(events.map((e) => e.data)).toEqual([{}, { delta: '0' }, {}, { delta: '2' }, {}, { delta: '4' }, {}]);
    events[0]!.data.x = 1;
    const page = await store.readFeed('', 100);
    expect(page.events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(page.events[0]!.data).toEqual({});
    expect(Object.isFrozen(page.events[0]!.data)).toBe(false);
    expect((await store.readFeed(page.cursor, 100)).events).toEqual([]);
    expect((await store.readFeed('3', 2)).events.map((e) => e.seq)).toEqual([4, 5]);
  });

  it('keeps the feed as columns: a removal takes out only its events, the others keep their seq, time, data and position', async () => {
    const store = new MemoryGenerationStore();
    // Interleaved: a, b, a, b, a, then b's fourth; b is removed.
    const a = { ...gen(1), status: 'pending' as const };
    const b = { ...gen(2), status: 'pending' as const };
    await store.insert(a, { type: 'created', data: { modelId: 'm' } });
    await store.insert(b, { type: 'created', data: { modelId: 'm' } });
    await store.update(a.id, { expect: { status: ['pending'] }, set: { status: 'processing' }, event: { type: 'processing', data: { claim: 1 } }, now: 3001 });
    await store.update(b.id, { expect: { status: ['pending'] }, set: { status: 'processing' }, event: { type: 'processing', data: { claim: 1 } }, now: 3002 });
    await store.update(a.id, { expect: { status: ['processing'] }, set: { status: 'completed' }, event: { type: 'completed', data: { price: 2.5, note: 'two fields' } }, now: 3003 });
    await store.update(b.id, { expect: { status: ['processing'] }, set: {}, event: { type: 'progress', data: { progress: { percent: 10 } } }, now: 3004 });
    expect(await store.remove(b.id, { status: ['processing'] })).toBe(true);
    const feed = await store.readFeed('', 100);
    expect(feed.events).toEqual([
      { seq: 1, generationId: a.id, ownerId: 'alice', type: 'created', at: a.createdAt, data: { modelId: 'm' } },
      { seq: 2, generationId: a.id, ownerId: 'alice', type: 'processing', at: 3001, data: { claim: 1 } },
      { seq: 3, generationId: a.id, ownerId: 'alice', type: 'completed', at: 3003, data: { price: 2.5, note: 'two fields' } },
    ]);
    // Positions are kept: the cursor after a's second event is 3 (b's first was 2), and reading from it gives a's third.
    expect((await store.readFeed('3', 1)).events.map((e) => e.seq)).toEqual([3]);
    expect(await store.eventsOf(a.id, 1)).toEqual(feed.events.slice(1));
    expect(await store.eventsOf(b.id)).toEqual([]);
    // Data the store shares between events ({ claim: 1 } twice) is never handed out: each read is a copy of its own.
    const [, claimed] = await store.eventsOf(a.id);
    claimed!.data.claim = 99;
    expect(Object.isFrozen(claimed!.data)).toBe(false);
    expect((await store.eventsOf(a.id))[1]!.data).toEqual({ claim: 1 });
    const c = { ...gen(3), status: 'pending' as const };
    await store.insert(c, { type: 'processing', data: { claim: 1 } });
    expect((await store.eventsOf(c.id))[0]!.data).toEqual({ claim: 1 });
    // A number and a string of the same text are different data; -0 stays -0; a name holding the separator of the
    // shared data's key cannot pass for another field: each reads back exactly as given.
    const given = [{ claim: '1' }, { claim: true }, { claim: -0 }, { claim: 0 }, { 'claim\u00000': 1 }, { claim: 1 }];
    for (const [k, data] of given.entries()) await store.update(c.id, { expect: { status: ['pending'] }, set: {}, event: { type: 'processing', data }, now: 3005 + k });
    const back = (await store.eventsOf(c.id, 1)).map((e) => e.data);
    expect(back).toEqual(given);
    expect(Object.is(back[2]!.claim, -0)).toBe(true);
    expect(Object.is(back[3]!.claim, 0)).toBe(true);
  });

  it('leaves a removed generation\'s events as gaps that reads skip (no rewrite of the feed per removal), dropped once they are half of it', async () => {
    const store = new MemoryGenerationStore();
    for (let i = 0; i < 200; i++) await store.insert(gen(i), { type: 'created', data: {} });
    // The feed's columns are rewritten only by the compaction; a spy on their `set` counts it (the owner lists are
    // Chunked too: only the calls on the feed's position column count).
    const positions = (store as unknown as { logPos: { set: (...a: unknown[]) => unknown } }).logPos;
    const set = vi.spyOn(Object.getPrototypeOf(positions) as typeof positions, 'set');
    const feedWrites = () => set.mock.contexts.filter((c) => c === positions).length;
    for (let i = 0; i < 100; i++) expect(await store.remove(gen(i).id, { status: ['completed'] })).toBe(true);
    expect(feedWrites()).toBe(0);
    // A page counts only live events; its cursor is the position of the last one it holds (gen i's event is at i + 1).
    const first = await store.readFeed('', 3);
    expect(first.events.map((e) => e.generationId)).toEqual([gen(100).id, gen(101).id, gen(102).id]);
    expect(first.cursor).toBe('103');
    expect((await store.readFeed(first.cursor, 2)).events.map((e) => e.generationId)).toEqual([gen(103).id, gen(104).id]);
    expect((await store.readFeed('', 1000)).events).toHaveLength(100);
    // One more gap than live events: the feed is compacted, and reads the same from every cursor.
    expect(await store.remove(gen(100).id, { status: ['completed'] })).toBe(true);
    expect(feedWrites()).toBeGreaterThan(0);
    set.mockRestore();
    const all = await store.readFeed('', 1000);
    expect(all.events.map((e) => e.generationId)).toEqual(Array.from({ length: 99 }, (_, k) => gen(101 + k).id));
    expect(all.cursor).toBe('200');
    expect((await store.readFeed('103', 2)).events.map((e) => e.generationId)).toEqual([gen(103).id, gen(104).id]);
    // A page that reaches the end over gaps only moves its cursor past them.
    for (let i = 195; i < 200; i++) await store.remove(gen(i).id, { status: ['completed'] });
    const tail = await store.readFeed('195', 10);
    expect(tail.events).toEqual([]);
    expect(Number(tail.cursor)).toBeGreaterThanOrEqual(195);
    expect(await store.eventsOf(gen(150).id)).toHaveLength(1);
    expect(await store.eventsOf(gen(196).id)).toEqual([]);
  });

  it("shares a record's progress of one number between records, and never hands it out", async () => {
    const store = new MemoryGenerationStore();
    const [a, b] = [{ ...gen(4), status: 'pending' as const }, { ...gen(5), status: 'pending' as const }];
    for (const g of [a, b]) {
      await store.insert(g, { type: 'created', data: {} });
      await store.update(g.id, { expect: { status: ['pending'] }, set: { status: 'completed', progress: { fraction: 1 } }, now: 4000 });
    }
    const read = (await store.getById(a.id))!;
    expect(read.progress).toEqual({ fraction: 1 });
    expect(Object.isFrozen(read.progress)).toBe(false);
    read.progress!.fraction = 0.25;
    expect((await store.getById(a.id))!.progress).toEqual({ fraction: 1 });
    expect((await store.getById(b.id))!.progress).toEqual({ fraction: 1 });
    // A progress with a message is its own copy: changing what was given changes nothing kept.
    const given = { fraction: 0.5, message: 'half' };
    await store.update(b.id, { expect: { status: ['completed'] }, set: { progress: given }, now: 4001 });
    given.message = 'changed';
    expect((await store.getById(b.id))!.progress).toEqual({ fraction: 0.5, message: 'half' });
  });
});

describe('MemoryBlobStore keys', () => {
  it('are 32 random bytes in base64url', async () => {
    const blobs = new MemoryBlobStore();
    const key = await blobs.put(new Uint8Array([1]), 'text/plain');
    expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(key, 'base64url')).toHaveLength(32);
  });
});

describe('DiskBlobStore', () => {
  let root: string;
  let directory: string;

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'genservice-disk-'));
    directory = join(root, 'blobs');
  });

  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('creates its directory on first put and keeps files only inside it', async () => {
    const blobs = new DiskBlobStore({ directory });
    const key = await blobs.put(new Uint8Array([1, 2]), 'image/png');
    expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await readdir(root)).toEqual(['blobs']);
    const files = (await readdir(directory, { recursive: true })).sort();
    expect(files).toEqual([key.slice(0, 2), join(key.slice(0, 2), key), join(key.slice(0, 2), `${key}.json`)].sort());
  });

  it("answers a file system that fails as the port's outage (UnavailableError), naming its code and not the path", async () => {
    // Its directory is a regular file: nothing can be made, read or deleted below it.
    await writeFile(directory, 'not a directory');
    const blobs = new DiskBlobStore({ directory });
    const failures = [blobs.put(new Uint8Array([1]), 'image/png'), blobs.get('A'.repeat(43)), blobs.delete('A'.repeat(43))];
    for (const failing of failures) {
      const err = await failing.then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(UnavailableError);
      expect((err as Error).message).toMatch(/^The blob directory could not be (written|read|deleted from) \(ENOTDIR\)\.$/);
      expect((err as Error).message).not.toContain(root);
    }
  });

  it("a result the disk cannot keep fails its generation free (storage_unavailable), not as the provider's fault", async () => {
    await writeFile(directory, 'not a directory');
    const ledger = new MemoryLedger({ balances: { alice: 100 } });
    const service = createGenerationService({
      providers: [
        {
          models: [{ modelId: 'img', title: 'Image', resultType: 'image', estimatedGenerationTime: 0.01, settings: [], price: 10, failureFee: 4 }],
          generate: async () => ({ bytes: new Uint8Array([9]), mimeType: 'image/png' }),
        },
      ],
      ledger,
      blobs: new DiskBlobStore({ directory }),
      runner: { retryBaseDelayMs: 1 },
      recovery: { onStart: false, intervalMs: 0 },
    });
    try {
      await service.start();
      const { generationId } = await service.create('alice', { modelId: 'img' });
      const failed = await until(() => service.get('alice', generationId), { accept: (g) => g.status === 'failed', what: 'the generation failed' });
      expect(failed).toEqual({ status: 'failed', price: 0 });
      expect((await service.details('alice', generationId)).error?.code).toBe('storage_unavailable');
      expect(await ledger.balance('alice')).toBe(100);
    } finally {
      await service.stop({ timeoutMs: 500 });
    }
  });

  it('survives a restart: a new instance on the same directory reads what the old one wrote', async () => {
    const key = await new DiskBlobStore({ directory }).put(new Uint8Array([9, 8, 7]), 'audio/mpeg');
    const blob = await new DiskBlobStore({ directory }).get(key);
    expect(blob?.mimeType).toBe('audio/mpeg');
    expect(Array.from(blob!.bytes)).toEqual([9, 8, 7]);
  });

  it('never reads a file outside its directory, even one that exists where a traversal would land', async () => {
    const blobs = new DiskBlobStore({ directory });
    await mkdir(directory, { recursive: true });
    await writeFile(join(root, 'secret'), 'top secret');
    await writeFile(join(root, 'secret.json'), JSON.stringify({ mimeType: 'text/plain' }));
    const attempts = ['../secret', '..%2fsecret', `${'../'.repeat(10)}${root.slice(1)}/secret`, join(root, 'secret'), 'ab/../../secret'];
    for (const key of attempts) expect(await blobs.get(key)).toBeNull();
    for (const key of attempts) await blobs.delete(key);
    expect((await readdir(root)).sort()).toEqual(['blobs', 'secret', 'secret.json']);
  });

  it('does not serve a sidecar or a temp file as a blob', async () => {
    const blobs = new DiskBlobStore({ directory });
    const key = await blobs.put(new Uint8Array([1]), 'text/plain');
    await writeFile(join(directory, key.slice(0, 2), `${key}.0123.tmp`), 'partial');
    for (const k of [`${key}.json`, `${key}.0123.tmp`, `${key}.0123`]) expect(await blobs.get(k)).toBeNull();
  });

  it('answers null when the bytes are present but the sidecar is gone', async () => {
    const blobs = new DiskBlobStore({ directory });
    const key = await blobs.put(new Uint8Array([1]), 'text/plain');
    await rm(join(directory, key.slice(0, 2), `${key}.json`));
    expect(await blobs.get(key)).toBeNull();
  });

  it('leaves no temp files after many concurrent puts', async () => {
    const blobs = new DiskBlobStore({ directory });
    const keys = await Promise.all(Array.from({ length: 40 }, (_, i) => blobs.put(new Uint8Array([i]), 'text/plain')));
    expect(new Set(keys).size).toBe(40);
    const files = await readdir(directory, { recursive: true });
    expect(files.filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });
});
