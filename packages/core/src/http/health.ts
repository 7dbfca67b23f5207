import { inject, injectable } from 'tsyringe';
import { asError, childLogger } from '../logger.js';
import type { BlobStore } from '../ports/blob.js';
import type { Ledger } from '../ports/ledger.js';
import type { Logger } from '../ports/logger.js';
import type { JobQueue } from '../ports/queue.js';
import type { GenerationStore } from '../ports/store.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { json } from './respond.js';
import type { HttpResponse } from './types.js';

/** What one readiness check came to: nothing else (no error text, no address) leaves the process. */
export type CheckOutcome = 'ok' | 'error' | 'timeout';

/** An id no generation or account has (ids never contain `#`): the checks read nothing and write nothing. */
const PROBE = 'genservice#readyz';
/**
 * A key of the shape blob stores hand out (43 URL-safe characters) that none ever will (they are random): `get` of it
 * reaches the backing service and answers null, or throws when the service cannot be reached.
 */
const BLOB_PROBE = 'genservice-readyz-probe'.padEnd(43, '_');

/**
 * `/healthz` (the process serves requests) and `/readyz` (the parts a request needs answer within the deadline).
 * Concurrent readiness polls share one round of checks, so polling every second from several balancers stays cheap.
 */
@injectable()
export class HealthRoute {
  private readonly checks: Array<[string, () => unknown]>;
  private running: Promise<HttpResponse> | undefined;
  private readonly logger: Logger;

  constructor(
    @inject(TOKENS.Store) store: GenerationStore,
    @inject(TOKENS.Ledger) ledger: Ledger,
    @inject(TOKENS.Queue) queue: JobQueue,
    @inject(TOKENS.Blobs) blobs: BlobStore,
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'health' });
    this.checks = [
      ['store', () => store.get(PROBE, PROBE)],
      ['ledger', () => ledger.balance(PROBE)],
      ['blobs', () => blobs.get(BLOB_PROBE)],
    ];
    if (queue.ping) this.checks.push(['queue', () => queue.ping!()]);
    const backend = options.rateLimits?.backend;
    const redis = backend?.type === 'redis' ? (backend.client as { ping?: () => unknown }) : undefined;
    if (typeof redis?.ping === 'function') this.checks.push(['redis', () => redis.ping!()]);
    for (const [name, check] of Object.entries(options.health.checks)) this.checks.push([name, check]);
  }

  live(): HttpResponse {
    return json(200, '{"status":"ok"}');
  }

  ready(): Promise<HttpResponse> {
    this.running ??= this.check().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async check(): Promise<HttpResponse> {
    const outcomes = await Promise.all(this.checks.map(([name, check]) => this.within(name, check)));
    const checks: Record<string, CheckOutcome> = {};
    const failing: string[] = [];
    this.checks.forEach(([name], i) => {
      checks[name] = outcomes[i]!;
      if (outcomes[i] !== 'ok') failing.push(name);
    });
    if (failing.length === 0) return json(200, JSON.stringify({ status: 'ready', checks }));
    return json(503, JSON.stringify({ status: 'unavailable', failing, checks }), { 'retry-after': '1' });
  }

  private within(name: string, check: () => unknown): Promise<CheckOutcome> {
    const timeoutMs = this.options.health.timeoutMs;
    return new Promise<CheckOutcome>((resolve) => {
      const timer = this.options.clock.setTimeout(() => {
        this.logger.warn({ check: name, timeoutMs }, 'readiness check timed out');
        resolve('timeout');
      }, timeoutMs);
      const fail = (err: unknown): void => {
        this.options.clock.clearTimeout(timer);
        this.logger.warn({ check: name, err: asError(err) }, 'readiness check failed');
        resolve('error');
      };
      try {
        Promise.resolve(check()).then(() => {
          this.options.clock.clearTimeout(timer);
          resolve('ok');
        }, fail);
      } catch (err) {
        fail(err);
      }
    });
  }
}
