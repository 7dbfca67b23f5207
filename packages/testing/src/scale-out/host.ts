// The host process of the scale-out suite (see suite.ts): genservice behind a bare node:http server, with the fake model
// whose behaviour the prompt chooses. A queue package's `test/fixtures/host.ts` calls `startScaleOutHost` with its
// stores, queue and notifier. Imported by relative path from those fixtures (it must not load vitest).
//   kill         the process SIGKILLs itself (a job that takes its worker down every time)
//   block:<ms>   on the first claim, blocks the event loop for <ms> (a worker that stalls past its lease)
//   sleep:<ms>   works for <ms>, honouring the abort signal
//   anything     works for 20-100 ms
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createGenerationService, createJsonLogger, type GenerationServiceOptions, type LogLevel, type Logger, type ModelProvider } from '@genservice/core';
import { writeNodeResponse } from '@genservice/core/adapter';
import type { JobQueue, Notifier } from '@genservice/core/ports';

/** What a host fixture is given to build its parts. */
export interface ScaleOutHostContext {
  /** An environment variable, or its fallback; throws when neither is there. */
  env(name: string, fallback?: string): string;
  instanceId: string;
  /** Jobs this instance runs at once (`CONCURRENCY`, default 4). */
  concurrency: number;
  logger: Logger;
}

/** The parts a queue package brings: the shared stores, its queue and its notifier. */
export interface ScaleOutHostParts {
  stores: Required<Pick<GenerationServiceOptions, 'store' | 'ledger' | 'apiKeys' | 'idempotency' | 'webhookStore'>> & { close(): Promise<void> };
  queue: JobQueue;
  notifier: Notifier;
  /** A route of the package's own, answered before genservice's; true when it answered. */
  route?(req: IncomingMessage, res: ServerResponse): boolean;
}

function env(name: string, fallback?: string): string {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is required`);
  return value;
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function fakeProvider(instanceId: string): ModelProvider {
  return {
    models: [
      {
        modelId: 'fake',
        title: 'Fake',
        resultType: 'text',
        estimatedGenerationTime: 1,
        settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }],
        price: 3,
        failureFee: 1,
        timeoutMs: 60_000,
      },
    ],
    async generate(input, ctx) {
      const prompt = String(input.settings.prompt);
      if (prompt === 'kill') {
        process.kill(process.pid, 'SIGKILL');
        await pause(60_000, ctx.signal);
      } else if (prompt.startsWith('block:')) {
        if (ctx.claim === 1) {
          const deadline = Date.now() + Number(prompt.slice('block:'.length));
          while (Date.now() < deadline) {
            // Busy: timers, lock and lease renewals cannot run.
          }
        }
      } else if (prompt.startsWith('sleep:')) {
        await pause(Number(prompt.slice('sleep:'.length)), ctx.signal);
      } else {
        await pause(20 + Math.random() * 80, ctx.signal);
      }
      return { text: `done by ${instanceId} on attempt ${ctx.claim}` };
    },
  };
}

/**
 * Starts the host: the service on the parts `make` builds, a node:http server on `PORT` (0: any), a JSON line
 * `{"event":"listening","port":N}` once it listens, and on SIGTERM a graceful stop (`STOP_TIMEOUT_MS`) that ends with
 * `{"event":"stopped"}` and exit code 0. Reads `INSTANCE_ID`, `CONCURRENCY`, `LEASE_MS`, `MAX_CLAIMS`, `RUNNER` (0: an
 * API-only instance), `PUSH_POLL_MS`, `RECOVERY_MS`, `ORPHAN_MS` and `LOG_LEVEL`.
 */
export async function startScaleOutHost(make: (ctx: ScaleOutHostContext) => Promise<ScaleOutHostParts>): Promise<void> {
  const instanceId = env('INSTANCE_ID');
  const concurrency = Number(env('CONCURRENCY', '4'));
  const logger = createJsonLogger({ level: env('LOG_LEVEL', 'info') as LogLevel, bindings: { instance: instanceId } });
  const { stores, queue, notifier, route } = await make({ env, instanceId, concurrency, logger });
  const service = createGenerationService({
    providers: [fakeProvider(instanceId)],
    store: stores.store,
    ledger: stores.ledger,
    apiKeys: stores.apiKeys,
    idempotency: stores.idempotency,
    queue,
    instanceId,
    runner: {
      enabled: env('RUNNER', '1') === '1',
      concurrency,
      leaseMs: Number(env('LEASE_MS', '1500')),
      maxClaims: Number(env('MAX_CLAIMS', '3')),
      retryBaseDelayMs: 50,
    },
    // Durable webhooks on the shared database, delivered to receivers on this machine, on a short schedule.
    webhookStore: stores.webhookStore,
    webhooks: { allowHttp: true, allowPrivateUrls: true, timeoutMs: 1000, leaseMs: 1500, retrySchedule: [200, 400, 800, 1600], pollIntervalMs: 100 },
    // Live streams on one instance see the other's transitions at once (the notifier). PUSH_POLL_MS: how often readers
    // also poll the log (long, when a test must see that only the notifier woke them).
    push: { notifier, ...(process.env.PUSH_POLL_MS ? { pollIntervalMs: Number(process.env.PUSH_POLL_MS) } : {}) },
    // Short, so that a crashed instance's work is taken over and a reserve whose create died with its host (reserved,
    // never inserted) is released within the test.
    recovery: { intervalMs: Number(env('RECOVERY_MS', '500')), orphanReserveMs: Number(env('ORPHAN_MS', '2000')) },
    logger,
  });
  await service.start();

  // The whole framework adapter: raw bytes in, core's status/headers/body out.
  const server = createServer((req, res) => {
    if (route?.(req, res)) return;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      service
        .handle({ method: req.method ?? 'GET', path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks) })
        .then(
          (out) => writeNodeResponse(res, out),
          (err: unknown) => {
            res.writeHead(500, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ error: { code: 'internal', message: String(err) } }));
          },
        );
    });
  });
  server.listen(Number(env('PORT', '0')), '127.0.0.1', () => {
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    process.stdout.write(`${JSON.stringify({ event: 'listening', port, instance: instanceId })}\n`);
  });

  process.on('SIGTERM', () => {
    const started = Date.now();
    process.stdout.write(`${JSON.stringify({ event: 'stopping', instance: instanceId })}\n`);
    server.close();
    service
      .stop({ timeoutMs: Number(env('STOP_TIMEOUT_MS', '10000')) })
      .then(() => stores.close())
      .then(
        () => {
          process.stdout.write(`${JSON.stringify({ event: 'stopped', instance: instanceId, tookMs: Date.now() - started })}\n`);
          process.exit(0);
        },
        (err: unknown) => {
          process.stderr.write(`stop failed: ${String(err)}\n`);
          process.exit(1);
        },
      );
  });
}
