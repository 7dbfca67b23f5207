// A loopback fake upstream speaking OpenAI's chat completions wire format (POST /v1/chat/completions, 429 with
// `Retry-After` and OpenAI's error body), which counts what it sees: requests in flight at once and requests in any
// window of its clock. For tests of provider capacity: the upstream's own counters are the judge.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProviderError, type Clock, type GenerateProvider } from '@genservice/core';
import type { ProviderCapacity } from '@genservice/core/ports';

/** The window of `requestsPerMinute` (the ports' CAPACITY_WINDOW_MS). */
const MINUTE_MS = 60_000;
import { fakeModel } from './fakes.js';
import type { FakeClock } from './clock.js';
import { until } from './until.js';

export interface FakeUpstreamOptions {
  /** Stamps each request's arrival (a test's FakeClock). */
  clock: Clock;
}

export interface FakeUpstream {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Requests being answered now, and the most there ever were at once. */
  readonly inFlight: number;
  readonly maxInFlight: number;
  /** Every request's arrival time, by the clock, in order (429s included). */
  readonly arrivals: number[];
  /** Requests answered 429. */
  readonly rateLimited: number;
  /** Completions answered 200. */
  readonly completed: number;
  /** The prompt (the first message's content) of each completion answered 200, in the order they were answered. */
  readonly prompts: string[];
  /** The most requests that arrived in any `windowMs` (default 60 s) of the clock. */
  maxInWindow(windowMs?: number): number;
  /** Answers the next `n` requests 429 with `Retry-After: seconds`. */
  rateLimitNext(n: number, seconds: number): void;
  close(): Promise<void>;
}

/** Starts the fake upstream on 127.0.0.1 (a free port). */
export async function createFakeUpstream(options: FakeUpstreamOptions): Promise<FakeUpstream> {
  const arrivals: number[] = [];
  const prompts: string[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  let rateLimited = 0;
  let completed = 0;
  let limitNext = 0;
  let retryAfter = 1;
  const server: Server = createServer((req, res) => {
    arrivals.push(options.clock.now());
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      // Answered on a later turn of the event loop, so requests sent together overlap here.
      setImmediate(() => {
        inFlight--;
        if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
          res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error' } }));
          return;
        }
        if (limitNext > 0) {
          limitNext--;
          rateLimited++;
          res
            .writeHead(429, { 'content-type': 'application/json', 'retry-after': String(retryAfter) })
            .end(JSON.stringify({ error: { message: 'Rate limit reached', type: 'rate_limit_error', code: 'rate_limit_exceeded' } }));
          return;
        }
        completed++;
        let prompt = '';
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { messages?: Array<{ content?: string }> };
          prompt = String(body.messages?.[0]?.content ?? '');
        } catch {
          // an empty prompt
        }
        prompts.push(prompt);
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({ id: `chatcmpl-${completed}`, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: `echo: ${prompt}` }, finish_reason: 'stop' }] }),
        );
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get inFlight() {
      return inFlight;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    arrivals,
    prompts,
    get rateLimited() {
      return rateLimited;
    },
    get completed() {
      return completed;
    },
    maxInWindow(windowMs = MINUTE_MS) {
      let most = 0;
      let start = 0;
      for (let end = 0; end < arrivals.length; end++) {
        while (arrivals[end]! - arrivals[start]! >= windowMs) start++;
        most = Math.max(most, end - start + 1);
      }
      return most;
    },
    rateLimitNext(n, seconds) {
      limitNext = n;
      retryAfter = seconds;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * A provider of one text model (`upstream-text`) that calls a chat completions API (the fake upstream's), with the
 * given capacity. A 429 is a retryable ProviderError carrying its `Retry-After` (seconds) as `retryAfterMs`.
 */
export function createUpstreamProvider(url: string, capacity?: ProviderCapacity): GenerateProvider {
  return {
    models: [fakeModel({ modelId: 'upstream-text', title: 'Upstream text', settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text' }], maxAttempts: 1 })],
    ...(capacity ? { capacity } : {}),
    async generate(input, ctx) {
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fake', messages: [{ role: 'user', content: String(input.settings.prompt ?? '') }] }),
        signal: ctx.signal,
      });
      const body = (await res.json()) as { choices?: Array<{ message: { content: string } }>; error?: { message: string } };
      if (res.status === 429) {
        const seconds = Number(res.headers.get('retry-after'));
        throw new ProviderError(`upstream answered 429: ${body.error?.message}`, { retryable: true, ...(Number.isFinite(seconds) ? { retryAfterMs: seconds * 1000 } : {}) });
      }
      if (!res.ok) throw new ProviderError(`upstream answered ${res.status}`, { retryable: res.status >= 500 });
      return { text: body.choices?.[0]?.message.content ?? '' };
    },
  };
}

/**
 * Moves `clock` a step at a time, each step only once nothing is running in any of `queues` (an `InProcessQueue`'s
 * `active`: what is left waits for the clock, delayed or held back by a lane), so every request of a step is sent,
 * and counted by the upstream, at that step's time. Until `done()` answers true; throws after `maxSteps`.
 */
export async function stepClockUntil(
  clock: FakeClock,
  queues: Array<{ readonly active: number }>,
  done: () => boolean | Promise<boolean>,
  options: { stepMs?: number; maxSteps?: number } = {},
): Promise<void> {
  const { stepMs = 1000, maxSteps = 2000 } = options;
  for (let step = 0; ; step++) {
    // One turn of the event loop first: an in-process queue starts the jobs enqueued in this turn on the next.
    await new Promise<void>((resolve) => setImmediate(resolve));
    await until(() => queues.every((q) => q.active === 0), { what: 'the queues to be idle', timeoutMs: 20_000, intervalMs: 2 });
    if (await done()) return;
    if (step >= maxSteps) throw new Error(`not done after ${maxSteps} steps of ${stepMs} ms`);
    await clock.advance(stepMs);
  }
}
