/**
 * The contract suites are only worth something if a broken implementation fails them. This runs them, in a child
 * vitest, against implementations with one planted bug each, and checks every bug is caught, so a later edit that
 * weakens a suite shows up here.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const repo = fileURLToPath(new URL('../../../', import.meta.url));

/** Each mutant subclasses a correct implementation and breaks one guarantee. */
const MUTANTS: Record<string, string> = {
  'ledger: check-then-act reserve': `
    class M extends MemoryLedger {
      async reserve(u, g, a, now) {
        const balance = await this.balance(u);
        await tick();
        if (balance < a) return 'insufficient';
        await this.credit(u, a);
        return super.reserve(u, g, a, now);
      }
    }
    runPortContracts(NAME, ports({ ledger: () => new M() }));`,
  'ledger: settle charges again on retry': `
    class M extends MemoryLedger {
      async settle(g, a) { const r = this.reserves.get(g); if (r) delete r.charged; return super.settle(g, a); }
    }
    runPortContracts(NAME, ports({ ledger: () => new M() }));`,
  'ledger: settle ignores the reserve cap': `
    class M extends MemoryLedger {
      async settle(g, a) { const r = this.reserves.get(g); if (r && r.charged === undefined && a > r.amount) r.amount = a; return super.settle(g, a); }
    }
    runPortContracts(NAME, ports({ ledger: () => new M() }));`,
  'ledger: credit ignores the bound on balances': `
    class M extends MemoryLedger {
      async credit(u, a) { if (!(a >= 0 && a < Infinity)) throw new RangeError('bad amount'); this.accountOf(u).balance += a; }
    }
    runPortContracts(NAME, ports({ ledger: () => new M() }));`,
  'store: update ignores the lease': `
    class M extends MemoryGenerationStore {
      async update(id, c) { const { lease, ...expect } = c.expect; return super.update(id, { ...c, expect }); }
    }
    runPortContracts(NAME, ports({ store: () => new M() }));`,
  'store: update ignores the claims count': `
    class M extends MemoryGenerationStore {
      async update(id, c) { const { claims, ...expect } = c.expect; return super.update(id, { ...c, expect }); }
    }
    runPortContracts(NAME, ports({ store: () => new M() }));`,
  'store: update checks, then writes later': `
    class M extends MemoryGenerationStore {
      async update(id, c) {
        const r = await this.getById(id);
        await tick();
        if (!r || !c.expect.status.includes(r.status)) return null;
        return super.update(id, { ...c, expect: { ...c.expect, status: ['pending', 'processing', 'completed', 'failed'] } });
      }
    }
    runPortContracts(NAME, ports({ store: () => new M() }));`,
  'store: renewLeases renews whoever holds it': `
    class M extends MemoryGenerationStore {
      async renewLeases(ids, h, u, n) {
        const out = [];
        for (const id of ids) { const r = await this.getById(id); out.push(...(await super.renewLeases([id], r?.leaseOwner ?? h, u, n))); }
        return out;
      }
    }
    runPortContracts(NAME, ports({ store: () => new M() }));`,
  'store: get is not owner-scoped': `
    class M extends MemoryGenerationStore { async get(id) { return this.getById(id); } }
    runPortContracts(NAME, ports({ store: () => new M() }));`,
  'store: the feed drops the last event of a full page': `
    class M extends MemoryGenerationStore {
      async readFeed(a, l) { const p = await super.readFeed(a, l); return p.events.length === l && l > 1 ? { ...p, events: p.events.slice(0, -1) } : p; }
    }
    runPortContracts(NAME, ports({ store: () => new M() }));`,
  'store: insert ignores the in-flight cap': `
    class M extends MemoryGenerationStore { async insert(g, e) { return super.insert(g, e); } }
    runPortContracts(NAME, ports({ store: () => new M() }));`,
  'store: listUnfinished newest first': `
    class M extends MemoryGenerationStore { async listUnfinished(l) { return (await super.listUnfinished(1e6)).reverse().slice(0, l); } }
    runPortContracts(NAME, ports({ store: () => new M() }));`,
  'store: remove leaves the events': `
    class M extends MemoryGenerationStore {
      async remove(id, expect) { const events = await this.eventsOf(id); const ok = await super.remove(id, expect); if (ok) this.kept = events; return ok; }
      async eventsOf(id, after) { const own = await super.eventsOf(id, after); return own.length > 0 ? own : (this.kept ?? []).filter((e) => e.generationId === id); }
    }
    runPortContracts(NAME, ports({ store: () => new M() }));`,
  'store: listFinishedBefore includes the cutoff': `
    class M extends MemoryGenerationStore { async listFinishedBefore(b, l) { return super.listFinishedBefore(b + 1, l); } }
    runPortContracts(NAME, ports({ store: () => new M() }));`,
  'api keys: plain key kept': `
    class M extends MemoryApiKeyStore { plain = new Set(); async addKey(k, u) { this.plain.add(k); return super.addKey(k, u); } }
    runPortContracts(NAME, ports({ apiKeys: () => new M() }));`,
  'api keys: resolve cached past a revoke': `
    class M extends MemoryApiKeyStore { cache = new Map(); async resolve(k) { if (!this.cache.has(k)) this.cache.set(k, await super.resolve(k)); return this.cache.get(k); } }
    runPortContracts(NAME, ports({ apiKeys: () => new M() }));`,
  'api keys: adding a revoked key brings it back': `
    class M extends MemoryApiKeyStore { async addKey(k, u) { this.revokedOwner.clear(); return super.addKey(k, u); } }
    runPortContracts(NAME, ports({ apiKeys: () => new M() }));`,
  'api keys: whitespace-trimmed match': `
    class M extends MemoryApiKeyStore { async resolve(k) { return (await super.resolve(k)) ?? (await super.resolve(k.trim())); } }
    runPortContracts(NAME, ports({ apiKeys: () => new M() }));`,
  'idempotency: begin is not atomic': `
    class M extends MemoryIdempotencyStore {
      async begin(u, k, h, n) { const seen = this.byUser.get(u)?.has(k); await tick(); if (!seen) this.byUser.get(u)?.delete(k); return super.begin(u, k, h, n); }
    }
    runPortContracts(NAME, ports({ idempotency: () => new M() }));`,
  'idempotency: user and key joined with a colon': `
    class M extends MemoryIdempotencyStore {
      async begin(u, k, h, n) { return super.begin('', u + ':' + k, h, n); }
      async finish(u, k, g) { return super.finish('', u + ':' + k, g); }
      async abandon(u, k) { return super.abandon('', u + ':' + k); }
    }
    runPortContracts(NAME, ports({ idempotency: () => new M() }));`,
  'blobs: get shares the stored bytes': `
    class M extends MemoryBlobStore { async get(k) { return this.blobs.get(k) ?? null; } }
    runBlobStoreContract(NAME, async () => ({ blobs: new M(), close: async () => undefined }));`,
  'blobs: deleteMany stops after one batch of 1000': `
    class M extends MemoryBlobStore { async deleteMany(keys) { for (const k of keys.slice(0, 1000)) this.blobs.delete(k); } }
    runBlobStoreContract(NAME, async () => ({ blobs: new M(), close: async () => undefined }));`,
  'blobs: disk store joins the key into a path': `
    class M extends DiskBlobStore {
      constructor(d) { super({ directory: d }); this.d = d; }
      async get(k) {
        try { return { bytes: new Uint8Array(await readFile(join(this.d, k.slice(0, 2), k))), mimeType: 'x' }; }
        catch (e) { if (e.code === 'ENOENT') return null; throw e; }
      }
    }
    runBlobStoreContract(NAME, async () => { const d = await mkdtemp(join(tmpdir(), 'mut-')); return { blobs: new M(d), close: () => rm(d, { recursive: true, force: true }) }; });`,
  'capacity: a slot is never freed': `
    class M extends MemoryCapacityStore { async release() {} }
    runCapacityContract(NAME, async () => ({ capacity: new M(), close: async () => undefined }));`,
  'capacity: the minute is a fixed window': `
    class M extends MemoryCapacityStore {
      async acquire(lane, limits, ask) { return super.acquire(lane, limits, { ...ask, now: Math.floor(ask.now / 60000) * 60000 + 59999 }); }
    }
    runCapacityContract(NAME, async () => ({ capacity: new M(), close: async () => undefined }));`,
  'capacity: checks, then records later': `
    class M extends MemoryCapacityStore {
      async acquire(lane, limits, ask) {
        const probe = await super.acquire(lane + '#probe', limits, ask);
        await tick();
        return probe.granted ? super.acquire(lane, {}, ask) : probe;
      }
    }
    runCapacityContract(NAME, async () => ({ capacity: new M(), close: async () => undefined }));`,
  "capacity: ignores the lane's turns": `
    class M extends MemoryCapacityStore {
      async acquire(lane, limits, ask) { const { fair, ...plain } = ask; return super.acquire(lane, limits, plain); }
    }
    runCapacityContract(NAME, async () => ({ capacity: new M(), close: async () => undefined }));`,
  "capacity: the lane's turns ignore weights": `
    class M extends MemoryCapacityStore {
      async acquire(lane, limits, ask) { return super.acquire(lane, limits, ask.fair ? { ...ask, fair: { ...ask.fair, weight: 1 } } : ask); }
    }
    runCapacityContract(NAME, async () => ({ capacity: new M(), close: async () => undefined }));`,
  'queue: no de-duplication of waiting jobs': `
    runQueueContract(NAME, async () => { const q = new Naive({ abort: true, limit: 2 }); return { queue: q, concurrency: 2, close: () => q.stop({ timeoutMs: 10 }) }; });`,
  'queue: stop never aborts': `
    runQueueContract(NAME, async () => { const q = new Naive({ dedupe: true, limit: 2 }); return { queue: q, concurrency: 2, close: () => q.stop({ timeoutMs: 10 }) }; });`,
  'queue: ignores its concurrency': `
    runQueueContract(NAME, async () => { const q = new Naive({ dedupe: true, abort: true }); return { queue: q, concurrency: 2, close: () => q.stop({ timeoutMs: 10 }) }; });`,
  'queue: keeps starting jobs after stop': `
    runQueueContract(NAME, async () => { const q = new Naive({ dedupe: true, abort: true, limit: 2, afterStop: true }); return { queue: q, concurrency: 2, close: () => q.stop({ timeoutMs: 10 }) }; });`,
  'queue: ignores organisation weights': `
    runQueueContract(NAME, async () => { const q = new Naive({ dedupe: true, abort: true, limit: 2, unweighted: true }); return { queue: q, concurrency: 2, close: () => q.stop({ timeoutMs: 10 }) }; });`,
};

/**
 * Which part of a suite must catch each mutant: at least one failed test's full name contains one of these (a bug
 * caught only by an unrelated test means the contract that owns the guarantee does not check it).
 */
const CAUGHT_BY: Record<string, string[]> = {
  'ledger: check-then-act reserve': ['Ledger'],
  'ledger: settle charges again on retry': ['Ledger'],
  'ledger: settle ignores the reserve cap': ['Ledger'],
  'ledger: credit ignores the bound on balances': ['Ledger'],
  'store: update ignores the lease': ['GenerationStore update: the expectation lease held', 'GenerationStore update: the expectation lease free'],
  'store: update ignores the claims count': ['GenerationStore update: the expectation claims', 'GenerationStore update: races'],
  'store: update checks, then writes later': ['GenerationStore update: races'],
  'store: renewLeases renews whoever holds it': ['GenerationStore renewLeases'],
  'store: get is not owner-scoped': ["GenerationStore insert and read reads another user's generation as null"],
  'store: the feed drops the last event of a full page': ['GenerationStore the feed across generations'],
  'store: insert ignores the in-flight cap': ['GenerationStore in-flight cap on insert'],
  'store: listUnfinished newest first': ['GenerationStore listUnfinished'],
  'store: listFinishedBefore includes the cutoff': ['GenerationStore listFinishedBefore'],
  'store: remove leaves the events': ['GenerationStore remove'],
  'api keys: plain key kept': ['ApiKeyStore'],
  'api keys: resolve cached past a revoke': ['ApiKeyStore'],
  'api keys: adding a revoked key brings it back': ['ApiKeyStore'],
  'api keys: whitespace-trimmed match': ['ApiKeyStore'],
  'idempotency: begin is not atomic': ['IdempotencyStore'],
  'idempotency: user and key joined with a colon': ['IdempotencyStore'],
  'blobs: get shares the stored bytes': ['BlobStore'],
  'blobs: deleteMany stops after one batch of 1000': ['BlobStore contract deletes many at once'],
  'blobs: disk store joins the key into a path': ['BlobStore'],
  'queue: no de-duplication of waiting jobs': ['JobQueue'],
  'queue: stop never aborts': ['JobQueue'],
  'queue: ignores its concurrency': ['JobQueue'],
  'queue: keeps starting jobs after stop': ['JobQueue'],
  'queue: ignores organisation weights': ['JobQueue contract shares the runner by organisation weight'],
  'capacity: a slot is never freed': ['CapacityStore'],
  'capacity: the minute is a fixed window': ['CapacityStore'],
  'capacity: checks, then records later': ['CapacityStore'],
  "capacity: ignores the lane's turns": ['CapacityStore'],
  "capacity: the lane's turns ignore weights": ['CapacityStore'],
};

/** The same naive queue with every fault switched off: proves the queue mutants fail for their bug alone. */
const CONTROL = `
  runQueueContract('control: correct naive queue', async () => { const q = new Naive({ dedupe: true, abort: true, limit: 2 }); return { queue: q, concurrency: 2, close: () => q.stop({ timeoutMs: 10 }) }; });
  runPortContracts('control: memory ports', ports({}));
  runCapacityContract('control: memory capacity', async () => ({ capacity: new MemoryCapacityStore(), close: async () => undefined }));`;

const PRELUDE = `
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DiskBlobStore, MemoryApiKeyStore, MemoryBlobStore, MemoryCapacityStore, MemoryGenerationStore, MemoryIdempotencyStore, MemoryLedger } from '@genservice/core';
import { runBlobStoreContract, runCapacityContract, runPortContracts, runQueueContract } from '@genservice/testing';
// One turn of the event loop: the window a racing mutant needs.
const tick = () => new Promise((r) => setImmediate(r));
const ports = (o) => async () => ({
  store: (o.store ?? (() => new MemoryGenerationStore()))(),
  ledger: (o.ledger ?? (() => new MemoryLedger()))(),
  apiKeys: (o.apiKeys ?? (() => new MemoryApiKeyStore()))(),
  idempotency: (o.idempotency ?? (() => new MemoryIdempotencyStore()))(),
  close: async () => undefined,
});
class Naive {
  // The fair order of the queue port, written plainly (a sorted array): tenant = organisation or owner, weight, users, priority.
  constructor(o) { this.o = o; this.waiting = []; this.counts = new Map(); this.seq = 0; this.running = new Map(); this.stopped = false; this.active = 0; }
  get backlog() { return this.waiting.map((w) => w.j); }
  count(k, by) { const n = (this.counts.get(k) ?? 0) + by; this.counts.set(k, n); return n; }
  async enqueue(j, opts = {}) {
    if (opts.delayMs > 0) { setTimeout(() => this.enqueue(j), opts.delayMs); return; }
    if (this.o.dedupe && this.backlog.some((b) => b.generationId === j.generationId)) return;
    const tenant = j.organizationId ? 'o:' + j.organizationId : 'u:' + (j.ownerId ?? '');
    const weight = j.organizationId && !this.o.unweighted && j.weight > 0 ? j.weight : 1;
    const priority = j.priority ?? 'normal';
    const band = priority === 'low' ? 1 : 0;
    const member = tenant + '|' + (j.ownerId ?? '');
    const line = member + '|' + priority;
    const place = this.count(line, 1);
    if (this.count(member, 1) === 1) this.count(tenant, 1);
    const same = this.waiting.filter((w) => w.band === band);
    const v = same.length ? Math.min(...same.map((w) => Math.floor(w.order / 2))) : 0;
    const order = (v + Math.floor(((place - 1) * this.counts.get(tenant) * 10) / weight)) * 2 + (priority === 'high' ? 0 : 1);
    this.waiting.push({ j, band, order, seq: this.seq++, line, member, tenant });
    this.waiting.sort((a, b) => a.band - b.band || a.order - b.order || a.seq - b.seq);
    this.pump();
  }
  async start(h) { this.h = h; this.stopped = false; this.pump(); }
  pump() {
    if (!this.h || (this.stopped && !this.o.afterStop)) return;
    while (this.waiting.length && this.active < (this.o.limit ?? Infinity)) {
      const w = this.waiting.shift(); const j = w.j;
      this.count(w.line, -1);
      if (this.count(w.member, -1) === 0) this.count(w.tenant, -1);
      const c = new AbortController(); this.active++; this.running.set(j.generationId, c);
      Promise.resolve().then(() => this.h(j, c.signal)).catch(() => {}).finally(() => { this.active--; this.running.delete(j.generationId); if (!this.running.size) this.idle?.(); this.pump(); });
    }
  }
  async stop(o = {}) {
    this.stopped = true;
    // Until the running jobs are done (the last one's end calls idle) or the timeout, whichever comes first.
    let timer;
    const done = new Promise((r) => { this.idle = r; if (!this.running.size) r(); });
    await Promise.race([done, new Promise((r) => { timer = setTimeout(r, o.timeoutMs ?? 10000); })]);
    clearTimeout(timer);
    this.idle = undefined;
    if (this.o.abort) for (const c of this.running.values()) c.abort();
  }
}
`;

interface JsonReport {
  testResults: Array<{ assertionResults: Array<{ ancestorTitles: string[]; fullName: string; status: string }> }>;
}

describe('the contract suites catch planted bugs', () => {
  let dir: string;
  let report: JsonReport;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'genservice-mutants-'));
    const body = Object.entries(MUTANTS)
      .map(([name, code]) => `{ const NAME = ${JSON.stringify(`mutant: ${name}`)};\n${code}\n}`)
      .join('\n');
    await writeFile(join(dir, 'mutants.test.js'), `${PRELUDE}\n${body}\n${CONTROL}\n`);
    await writeFile(
      join(dir, 'vitest.config.mjs'),
      `export default { resolve: { alias: {
        '@genservice/core/ports': ${JSON.stringify(join(repo, 'packages/core/src/ports.ts'))},
        '@genservice/core': ${JSON.stringify(join(repo, 'packages/core/src/index.ts'))},
        '@genservice/testing': ${JSON.stringify(join(repo, 'packages/testing/src/index.ts'))},
      } }, test: { include: ['mutants.test.js'], testTimeout: 30000 } };\n`,
    );
    const out = join(dir, 'report.json');
    const child = spawnSync(
      process.execPath,
      [join(repo, 'node_modules/vitest/vitest.mjs'), 'run', '--root', dir, '--config', join(dir, 'vitest.config.mjs'), '--reporter=json', `--outputFile=${out}`],
      { cwd: repo, encoding: 'utf8', timeout: 240_000 },
    );
    const raw = await readFile(out, 'utf8').catch(() => {
      throw new Error(`the child vitest wrote no report:\n${child.stdout}\n${child.stderr}`);
    });
    report = JSON.parse(raw) as JsonReport;
  }, 300_000);

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  function outcomes(prefix: string): { failed: string[]; passed: number } {
    const tests = report.testResults.flatMap((f) => f.assertionResults).filter((t) => t.ancestorTitles[0]?.startsWith(prefix));
    return { failed: tests.filter((t) => t.status === 'failed').map((t) => t.fullName), passed: tests.filter((t) => t.status === 'passed').length };
  }

  it('runs the correct controls green', () => {
    const queue = outcomes('control: correct naive queue');
    const memory = outcomes('control: memory ports');
    expect(queue.failed).toEqual([]);
    expect(memory.failed).toEqual([]);
    expect(queue.passed).toBeGreaterThan(5);
    expect(memory.passed).toBeGreaterThan(50);
    const capacity = outcomes('control: memory capacity');
    expect(capacity.failed).toEqual([]);
    expect(capacity.passed).toBeGreaterThan(5);
  });

  it('names the contract that must catch every mutant', () => {
    expect(Object.keys(CAUGHT_BY).sort()).toEqual(Object.keys(MUTANTS).sort());
  });

  for (const name of Object.keys(MUTANTS)) {
    it(`fails ${name}, in the contract that owns the guarantee`, () => {
      const { failed } = outcomes(`mutant: ${name}`);
      expect(failed.length).toBeGreaterThan(0);
      const owners = CAUGHT_BY[name] ?? [];
      expect(failed.filter((f) => owners.some((o) => f.includes(o))), `failed: ${failed.join('; ')}`).not.toEqual([]);
    });
  }
});
