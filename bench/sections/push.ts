/**
 * Push: what an idle live stream costs the server, and how soon a committed transition reaches a client.
 *
 * - Memory: a server child (bench/servers/sse.ts) holds one generation in `processing`; this process opens N raw
 *   TCP connections asking for its event stream and waits for each first event; the child reports its heap and RSS
 *   (after GC) before and after. Per stream = delta / N. Loopback only.
 * - Output deltas: 100 generations stream words as fast as a model emits tokens; one event stream each reads them.
 *   The figure is the output messages delivered per second: coalesced by the runner (at most 4 log events per
 *   generation per second), so it says what a client gets, and that nothing is lost, rather than a raw rate.
 * - Latency: the time from a transition's commit (the event's `at`, taken by the store) to the client reading that
 *   event from the stream: in-process (one service), and across instances (the worker on one service, the stream on
 *   another, sharing a store and woken by Redis pub/sub, or by Postgres LISTEN/NOTIFY for hosts without Redis).
 */
import { connect } from 'node:net';
import { createGenerationService, MemoryApiKeyStore, MemoryGenerationStore, MemoryLedger, type GenerationService } from '@genservice/core';
import { RedisNotifier } from '@genservice/queue-bullmq';
import { PostgresNotifier } from '@genservice/store-postgres';
import type { Notifier } from '@genservice/core/ports';
import { nextMessage, spawnTs, stopChild } from '../lib/proc.js';

export interface OutputDeltasResult {
  streams: number;
  seconds: number;
  /** `event: output` messages all streams read, per second. */
  eventsPerSecond: number;
  /** `ctx.output.append` calls per second, all providers together. */
  deltasPerSecond: number;
  /** Output events written to the log per second per generation (coalesced). */
  logEventsPerGenerationPerSecond: number;
  /** Characters of text delivered per second, all streams together. */
  charsPerSecond: number;
}

export interface PushResult {
  outputDeltas: OutputDeltasResult;
  memory: { streams: number; heapPerStreamB: number; rssPerStreamB: number };
  latency: {
    inProcess: { p50Ms: number; p99Ms: number; n: number };
    acrossInstances: { p50Ms: number; p99Ms: number; n: number };
    /** The same across instances woken by PostgresNotifier (when a database was given). */
    acrossInstancesPostgres?: { p50Ms: number; p99Ms: number; n: number };
  };
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

async function openIdleStreams(port: number, id: string, n: number): Promise<() => void> {
  const sockets: ReturnType<typeof connect>[] = [];
  const request = `GET /v1/generations/${id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer bench-key\r\n\r\n`;
  // In batches, so the server's accept queue is not overrun.
  for (let done = 0; done < n; ) {
    const batch = Math.min(250, n - done);
    await Promise.all(
      Array.from(
        { length: batch },
        () =>
          new Promise<void>((resolve, reject) => {
            const s = connect(port, '127.0.0.1', () => s.write(request));
            let seen = '';
            const onData = (d: Buffer): void => {
              seen += d.toString('latin1');
              if (seen.includes('\n\n') && seen.includes('event: ')) {
                s.off('data', onData);
                resolve();
              }
            };
            s.on('data', onData);
            s.on('error', reject);
            sockets.push(s);
          }),
      ),
    );
    done += batch;
  }
  return () => {
    for (const s of sockets) s.destroy();
  };
}

async function measureMemory(n: number): Promise<PushResult['memory']> {
  const child = spawnTs('servers/sse.ts', { nodeArgs: ['--expose-gc'], quiet: true });
  try {
    const ready = await nextMessage<{ port: number; id: string }>(child, (m) => m.type === 'ready', 60_000);
    // Warm up the paths a stream takes, so the baseline has the code and structures a stream needs.
    const warm = await openIdleStreams(ready.port, ready.id, 20);
    warm();
    await new Promise((r) => setTimeout(r, 200));
    child.send({ type: 'memory' });
    const before = await nextMessage<{ heapUsed: number; rss: number; streams: number }>(child, (m) => m.type === 'memory', 30_000);
    const close = await openIdleStreams(ready.port, ready.id, n);
    child.send({ type: 'memory' });
    const after = await nextMessage<{ heapUsed: number; rss: number; streams: number }>(child, (m) => m.type === 'memory', 30_000);
    close();
    if (after.streams < n) throw new Error(`push: only ${after.streams} of ${n} streams open`);
    return { streams: n, heapPerStreamB: (after.heapUsed - before.heapUsed) / n, rssPerStreamB: (after.rss - before.rss) / n };
  } finally {
    await stopChild(child);
  }
}

interface Gate {
  provider: unknown;
  release(prompt: string): void;
  started(prompt: string): Promise<void>;
}

function gated(): Gate {
  const waiting = new Map<string, () => void>();
  const startedWaiters = new Map<string, () => void>();
  return {
    provider: {
      models: [{ modelId: 'g', title: 'G', resultType: 'text', estimatedGenerationTime: 1, settings: [{ name: 'p', title: 'P', fieldType: 'text', required: true }], price: 1 }],
      generate: (input: { settings: Record<string, unknown> }) =>
        new Promise<{ text: string }>((resolve) => {
          const p = String(input.settings.p);
          waiting.set(p, () => resolve({ text: p }));
          startedWaiters.get(p)?.();
        }),
    },
    release: (p) => waiting.get(p)?.(),
    started: (p) =>
      new Promise<void>((resolve) => {
        if (waiting.has(p)) resolve();
        else startedWaiters.set(p, resolve);
      }),
  };
}

/** Commit-to-client latency, in ms: `worker` runs the generations, `api` serves the streams (the same service or not). */
async function measureLatency(worker: GenerationService, api: GenerationService, gate: Gate, n: number): Promise<{ p50Ms: number; p99Ms: number; n: number }> {
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const p = `run-${i}`;
    const { generationId } = await worker.create('u', { modelId: 'g', settings: { p } });
    await gate.started(p);
    const res = await api.handle({ method: 'GET', path: `/v1/generations/${generationId}/events`, headers: { authorization: 'Bearer k' } });
    const it = (res.body as AsyncIterable<string>)[Symbol.asyncIterator]();
    await it.next(); // the current state
    gate.release(p);
    for (;;) {
      const r = await it.next();
      if (r.done) break;
      const text = String(r.value);
      if (!text.includes('event: completed')) continue;
      const received = performance.timeOrigin + performance.now();
      // finishedAt is the time the store was given for the transition: the moment of the commit, to the ms.
      const at = JSON.parse(/data: (.*)/.exec(text)![1]!).finishedAt as string;
      samples.push(Math.max(0, received - Date.parse(at)));
    }
  }
  samples.sort((a, b) => a - b);
  return { p50Ms: quantile(samples, 0.5), p99Ms: quantile(samples, 0.99), n };
}

/**
 * Partial output: `streams` generations each stream a word every `everyMs` for `seconds` while one event stream per
 * generation reads them (in-process, one service). Counts the output messages the streams read and checks that each
 * stream's deltas join to the generation's text.
 */
export async function outputDeltasBench(streams: number, seconds: number, everyMs = 2): Promise<OutputDeltasResult> {
  let appended = 0;
  const started = new Set<string>();
  const provider = {
    models: [{ modelId: 'w', title: 'W', resultType: 'text', estimatedGenerationTime: 1, settings: [{ name: 'p', title: 'P', fieldType: 'text', required: true }], price: 1 }],
    generate: async (input: { settings: Record<string, unknown> }, ctx: { output: { append(t: string): void } }) => {
      started.add(String(input.settings.p));
      const until = Date.now() + seconds * 1000;
      let text = '';
      for (let i = 0; Date.now() < until; i++) {
        const word = i === 0 ? 'word' : ` w${i}`;
        text += word;
        ctx.output.append(word);
        appended++;
        await new Promise((r) => setTimeout(r, everyMs));
      }
      return { text };
    },
  };
  const service = createGenerationService({
    providers: [provider as never],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'u' }] }),
    ledger: new MemoryLedger({ balances: { u: 1_000_000 } }),
    recovery: { intervalMs: 0 },
    limits: { inFlightPerUser: 1_000_000, streamsPerUser: streams + 10 },
    runner: { concurrency: streams },
  });
  await service.start();
  try {
    const ids: string[] = [];
    for (let i = 0; i < streams; i++) ids.push((await service.create('u', { modelId: 'w', settings: { p: `g${i}` } })).generationId);
    const t0 = performance.now();
    let events = 0;
    let chars = 0;
    const readers = ids.map(async (id) => {
      const res = await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: { authorization: 'Bearer k' } });
      let text = '';
      for await (const chunk of res.body as AsyncIterable<string>) {
        const m = /^id: \d+\nevent: output\ndata: (.*)\n\n$/s.exec(String(chunk));
        if (!m) continue;
        const delta = (JSON.parse(m[1]!) as { delta: string }).delta;
        events++;
        chars += delta.length;
        text += delta;
      }
      const done = await service.get('u', id);
      if (done.status !== 'completed' || done.result !== text) throw new Error(`output deltas: stream of ${id} read ${text.length} chars, result has ${done.result?.length}`);
    });
    await Promise.all(readers);
    const elapsed = (performance.now() - t0) / 1000;
    const logEvents = events; // one stream per generation: each output event in the log is read once
    return {
      streams,
      seconds: elapsed,
      eventsPerSecond: events / elapsed,
      deltasPerSecond: appended / elapsed,
      logEventsPerGenerationPerSecond: logEvents / streams / elapsed,
      charsPerSecond: chars / elapsed,
    };
  } finally {
    await service.stop({ timeoutMs: 100 });
  }
}

export async function pushBench(opts: { streams: number; samples: number; redisUrl: string; postgresUrl?: string }): Promise<PushResult> {
  const outputDeltas = await outputDeltasBench(100, 3);
  const memory = await measureMemory(opts.streams);

  const apiKeys = new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'u' }] });
  const inGate = gated();
  const single = createGenerationService({
    providers: [inGate.provider as never],
    apiKeys,
    ledger: new MemoryLedger({ balances: { u: 1_000_000 } }),
    recovery: { intervalMs: 0 },
    limits: { inFlightPerUser: 1_000_000 },
  });
  await single.start();
  const inProcess = await measureLatency(single, single, inGate, opts.samples);
  await single.stop({ timeoutMs: 100 });

  const channel = `gs-bench-${process.pid}`;
  const acrossInstances = await acrossTwo(apiKeys, () => new RedisNotifier({ connection: opts.redisUrl, channel }), opts.samples);
  const pgUrl = opts.postgresUrl;
  const acrossInstancesPostgres = pgUrl
    ? await acrossTwo(apiKeys, () => new PostgresNotifier({ connectionString: pgUrl, channel: `gs_bench_${process.pid}` }), opts.samples)
    : undefined;
  return { outputDeltas, memory, latency: { inProcess, acrossInstances, ...(acrossInstancesPostgres ? { acrossInstancesPostgres } : {}) } };
}

/** Two services sharing a store, the worker on one and the streams on the other, woken through `notifier()`s. */
async function acrossTwo(apiKeys: MemoryApiKeyStore, notifier: () => Notifier, samples: number): Promise<{ p50Ms: number; p99Ms: number; n: number }> {
  const store = new MemoryGenerationStore();
  const ledger = new MemoryLedger({ balances: { u: 1_000_000 } });
  const crossGate = gated();
  const make = (runner: boolean): GenerationService =>
    createGenerationService({
      providers: [crossGate.provider as never],
      apiKeys,
      store,
      ledger,
      runner: { enabled: runner },
      recovery: { intervalMs: 0 },
      limits: { inFlightPerUser: 1_000_000 },
      // A long poll interval: the figure is the notifier's path, not the fallback's.
      push: { notifier: notifier(), pollIntervalMs: 60_000 },
    });
  const workerSide = make(true);
  const apiSide = make(false);
  await workerSide.start();
  await apiSide.start();
  try {
    return await measureLatency(workerSide, apiSide, crossGate, samples);
  } finally {
    await workerSide.stop({ timeoutMs: 100 });
    await apiSide.stop({ timeoutMs: 100 });
  }
}
