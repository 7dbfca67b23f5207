// Issue 24, item 1: event streams and `Prefer: wait` long-polls are capped per user (`limits.streamsPerUser`, exact
// over every service of the process) and per process (`limits.streamsTotal`); a stream holds its slot until it ends,
// and it ends when its generation finishes.
import { randomBytes } from 'node:crypto';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createGenerationService,
  DEFAULT_LIMITS,
  MemoryApiKeyStore,
  MemoryLedger,
  type GenerationService,
  type HttpResponse,
  type LimitsOptions,
} from '@genservice/core';
import { writeNodeResponse } from '@genservice/core/adapter';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

// Names of this file's own: the slot table is the process's, shared with whatever else runs in this worker.
const TAG = randomBytes(4).toString('hex');
const USERS = ['alice', 'bob', 'carol', 'dave', 'erin', 'frank', 'gina'].map((u) => `${u}-${TAG}`);
const [ALICE, BOB, CAROL, DAVE, ERIN, FRANK, GINA] = USERS as [string, string, string, string, string, string, string];

/** A service whose generations each wait for a `release()` (one run each); every user has a key `k-<user>`. */
function make(limits: LimitsOptions = {}) {
  // Each release lets one run finish: the one waiting now, or the next to start (a run starts on the queue's next
  // turn, so it may not have begun when the test releases it).
  let permits = 0;
  const waiting: Array<() => void> = [];
  const service = createGenerationService({
    providers: [
      {
        models: [{ modelId: 'held', title: 'Held', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 }],
        generate: async () => {
          if (permits > 0) permits--;
          else await new Promise<void>((r) => waiting.push(r));
          return { text: 'done' };
        },
      },
    ],
    apiKeys: new MemoryApiKeyStore({ keys: USERS.map((u) => ({ apiKey: `k-${u}`, userId: u })) }),
    ledger: new MemoryLedger({ balances: Object.fromEntries(USERS.map((u) => [u, 1000])) }),
    recovery: { intervalMs: 0 },
    limits,
  });
  cleanups.push(async () => {
    permits = Number.POSITIVE_INFINITY;
    for (const w of waiting.splice(0)) w();
    await service.stop({ timeoutMs: 500 });
  });
  return {
    service,
    release: () => {
      const next = waiting.shift();
      if (next) next();
      else permits++;
    },
  };
}

async function create(service: GenerationService, user: string): Promise<string> {
  const r = await service.handle({
    method: 'POST',
    path: '/v1/generations',
    headers: { authorization: `Bearer k-${user}`, 'content-type': 'application/json' },
    body: '{"modelId":"held"}',
  });
  expect(r.status).toBe(201);
  return JSON.parse(String(r.body)).generationId as string;
}

/** Opens a stream; the caller ends it with `close()` (as an adapter does when the client goes away). */
async function stream(service: GenerationService, user: string, id: string) {
  const res = await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: { authorization: `Bearer k-${user}` } });
  const it = typeof res.body === 'object' && res.body !== null && Symbol.asyncIterator in res.body ? (res.body as AsyncIterable<string>)[Symbol.asyncIterator]() : null;
  if (it) cleanups.push(async () => it.return?.());
  return { res, it, close: async () => void (await it?.return?.()) };
}

function longPoll(service: GenerationService, user: string, id: string, seconds = 30): Promise<HttpResponse> {
  return service.handle({ method: 'GET', path: `/v1/generations/${id}`, headers: { authorization: `Bearer k-${user}`, prefer: `wait=${seconds}` } });
}

function errorOf(res: HttpResponse): { code: string; message: string } {
  return JSON.parse(String(res.body)).error;
}

describe('stream caps (issue 24, item 1)', () => {
  it('defaults to 20 per user and 5000 per process', () => {
    expect(DEFAULT_LIMITS.streamsPerUser).toBe(20);
    expect(DEFAULT_LIMITS.streamsTotal).toBe(5000);
  });

  it('the next stream or long-poll past limits.streamsPerUser answers 429 with Retry-After; closing one frees its slot', async () => {
    const { service } = make({ streamsPerUser: 3 });
    await service.start();
    const id = await create(service, ALICE);
    const open = [await stream(service, ALICE, id), await stream(service, ALICE, id), await stream(service, ALICE, id)];
    for (const s of open) expect(s.res.status).toBe(200);
    const fourth = await stream(service, ALICE, id);
    expect(fourth.res.status).toBe(429);
    expect(fourth.res.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    expect(errorOf(fourth.res)).toMatchObject({ code: 'rate_limited' });
    expect(errorOf(fourth.res).message).toContain('3 event streams');
    // A long-poll counts against the same cap.
    const poll = await longPoll(service, ALICE, id);
    expect(poll.status).toBe(429);
    // Another user is not affected.
    const bobs = await create(service, BOB);
    expect((await stream(service, BOB, bobs)).res.status).toBe(200);
    // One closed (the client went away): one more may open.
    await open[0]!.close();
    expect((await stream(service, ALICE, id)).res.status).toBe(200);
    expect((await stream(service, ALICE, id)).res.status).toBe(429);
  });

  it('a stream never read (HEAD) and a 404 hold no slot', async () => {
    const { service } = make({ streamsPerUser: 1 });
    await service.start();
    const id = await create(service, CAROL);
    for (let i = 0; i < 5; i++) {
      const head = await service.handle({ method: 'HEAD', path: `/v1/generations/${id}/events`, headers: { authorization: `Bearer k-${CAROL}` } });
      expect(head.status).toBe(200);
      const missing = await service.handle({ method: 'GET', path: '/v1/generations/AAAAAAAAAAAAAAAAAAAAAA/events', headers: { authorization: `Bearer k-${CAROL}` } });
      expect(missing.status).toBe(404);
    }
    expect((await stream(service, CAROL, id)).res.status).toBe(200);
  });

  it('is exact across the services of one process', async () => {
    const a = make({ streamsPerUser: 3 });
    const b = make({ streamsPerUser: 3 });
    await a.service.start();
    await b.service.start();
    const ida = await create(a.service, DAVE);
    const idb = await create(b.service, DAVE);
    expect((await stream(a.service, DAVE, ida)).res.status).toBe(200);
    expect((await stream(b.service, DAVE, idb)).res.status).toBe(200);
    expect((await stream(a.service, DAVE, ida)).res.status).toBe(200);
    expect((await stream(b.service, DAVE, idb)).res.status).toBe(429);
    expect((await stream(a.service, DAVE, ida)).res.status).toBe(429);
  });

  it('past limits.streamsTotal for the process, answers 503 with a clear message', async () => {
    const { service } = make({ streamsPerUser: 10, streamsTotal: 4 });
    await service.start();
    for (const user of [ALICE, BOB, CAROL, DAVE]) {
      const id = await create(service, user);
      expect((await stream(service, user, id)).res.status).toBe(200);
    }
    const id = await create(service, ERIN);
    const refused = await stream(service, ERIN, id);
    expect(refused.res.status).toBe(503);
    expect(refused.res.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    expect(errorOf(refused.res)).toEqual({
      code: 'unavailable',
      message: 'The server holds as many event streams and long-polls as it allows; try again shortly.',
    });
    expect((await longPoll(service, ERIN, id)).status).toBe(503);
  });

  it('a stream ends after its generation finishes, and frees its slot; so does a long-poll that answered', async () => {
    const { service, release } = make({ streamsPerUser: 1 });
    await service.start();
    const id = await create(service, FRANK);
    const s = await stream(service, FRANK, id);
    expect(s.res.status).toBe(200);
    const events: string[] = [];
    const reading = (async () => {
      for (;;) {
        const next = await s.it!.next();
        if (next.done) return;
        const type = /^event: (\w+)$/m.exec(next.value)?.[1];
        if (type) events.push(type);
      }
    })();
    // The slot is taken while it runs.
    expect((await longPoll(service, FRANK, id)).status).toBe(429);
    release();
    await reading;
    expect(events.at(-1)).toBe('completed');
    // Ended by itself (no close() by the client): the slot is free again, for a stream or a long-poll.
    const after = await longPoll(service, FRANK, id);
    expect(after.status).toBe(200);
    expect(JSON.parse(String(after.body))).toMatchObject({ status: 'completed' });
    const second = await create(service, FRANK);
    const poll = longPoll(service, FRANK, second, 30);
    release();
    expect((await poll).status).toBe(200);
    expect((await stream(service, FRANK, second)).res.status).toBe(200);
  });

  it('a client that left before its stream was written (between the answer and writeNodeResponse) frees its slot', async () => {
    const { service } = make({ streamsPerUser: 1 });
    await service.start();
    const id = await create(service, GINA);
    // A real server: the stream is answered (its slot taken), then the client leaves, and only then is the answer
    // written, as when a host awaits something of its own in between.
    let answered!: () => void;
    const isAnswered = new Promise<void>((r) => (answered = r));
    let written: Promise<void> | undefined;
    let wrote!: () => void;
    const isWriting = new Promise<void>((r) => (wrote = r));
    const server = createServer(async (req, res) => {
      const out = await service.handle({ method: 'GET', path: `/v1/generations/${id}/events`, headers: { authorization: `Bearer k-${GINA}` } });
      expect(out.status).toBe(200);
      res.once('close', () => {
        written = writeNodeResponse(res, out);
        wrote();
      });
      answered();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise((r) => server.close(r)));
    const client = request({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, path: '/' });
    client.on('error', () => undefined);
    client.end();
    await isAnswered;
    client.destroy();
    await isWriting;
    // Its slot is free again: the next stream of the same user is granted.
    const next = await stream(service, GINA, id);
    expect(next.res.status).toBe(200);
    await next.close();
    await written;
  });
});
