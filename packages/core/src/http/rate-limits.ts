import {
  RateLimiterMemory,
  RateLimiterPostgres,
  RateLimiterRedis,
  RateLimiterRes,
  RateLimiterSQLite,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import { inject, injectable } from 'tsyringe';
import { asError, childLogger } from '../logger.js';
import type { Logger } from '../ports/logger.js';
import type { RateLimitBackend, RateLimitRule } from '../options.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';

/** The route classes limited separately; `unauthenticated` counts requests without a valid key, per client address. */
export type RateLimitClass = 'create' | 'read' | 'stream' | 'unauthenticated';

export type RateLimitVerdict =
  | { allowed: true; headers: Record<string, string> }
  | { allowed: false; headers: Record<string, string>; retryAfterSeconds: number }
  | { allowed: 'unavailable' };

async function withRetries<T>(make: () => Promise<T>, tries = 3): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await make();
    } catch (err) {
      if (i >= tries) throw err;
      await new Promise((r) => setTimeout(r, 20 * i));
    }
  }
}

/** A limiter once it is ready: the SQL backends create their table first (asynchronously). */
function build(backend: RateLimitBackend, rule: RateLimitRule, keyPrefix: string): Promise<RateLimiterAbstract> {
  const base = { keyPrefix, points: rule.points, duration: rule.durationSeconds };
  switch (backend.type) {
    case 'memory':
      return Promise.resolve(new RateLimiterMemory(base));
    case 'redis':
      return Promise.resolve(new RateLimiterRedis({ ...base, storeClient: backend.client, useRedisPackage: false } as ConstructorParameters<typeof RateLimiterRedis>[0]));
    case 'postgres':
      // One table for every class (rows are keyed by prefix); made on first use. Instances starting together race to
      // create it and the losers get a duplicate-type error: a second try finds the table there.
      return withRetries(
        () =>
          new Promise((resolve, reject) => {
            const limiter: RateLimiterAbstract = new RateLimiterPostgres(
              { ...base, storeClient: backend.client, tableName: backend.tableName ?? 'genservice_rate_limits' },
              (err?: unknown) => (err ? reject(err instanceof Error ? err : new Error(String(err))) : resolve(limiter)),
            );
          }),
      );
    case 'sqlite':
      return new Promise((resolve, reject) => {
        const limiter: RateLimiterAbstract = new RateLimiterSQLite(
          { ...base, storeClient: backend.client, storeType: 'better-sqlite3', tableName: backend.tableName ?? 'genservice_rate_limits' },
          (err?: unknown) => (err ? reject(err instanceof Error ? err : new Error(String(err))) : resolve(limiter)),
        );
      });
  }
}

/**
 * Request rate limits per route class, on the backend the host already has (rate-limiter-flexible). Answers carry the
 * IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers: `RateLimit-Policy` and `RateLimit`), a 429 also
 * `Retry-After`. When the backend fails, requests pass and a warning is logged (`failOpen`), or get 503.
 */
@injectable()
export class RateLimits {
  private readonly limiters = new Map<
    RateLimitClass,
    { limiter: Promise<RateLimiterAbstract>; build: () => Promise<RateLimiterAbstract>; policy: string; rule: RateLimitRule }
  >();
  private readonly logger: Logger;
  private lastWarning = 0;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'rate-limits' });
    const config = options.rateLimits;
    if (!config) return;
    for (const cls of ['create', 'read', 'stream', 'unauthenticated'] as const) {
      const rule = config[cls];
      if (!rule) continue;
      const make = (): Promise<RateLimiterAbstract> => {
        const limiter = build(config.backend, rule, `${config.keyPrefix}:${cls}`);
        // A backend that cannot make its table is reported on each use (fail open or closed), not as an unhandled rejection.
        limiter.catch(() => undefined);
        return limiter;
      };
      this.limiters.set(cls, {
        limiter: make(),
        build: make,
        policy: `"${cls}";q=${rule.points};w=${rule.durationSeconds}`,
        rule,
      });
    }
  }

  has(cls: RateLimitClass): boolean {
    return this.limiters.has(cls);
  }

  /** Takes one point of `cls` for `key`. */
  async consume(cls: RateLimitClass, key: string): Promise<RateLimitVerdict> {
    return this.ask(cls, key, (l) => l.consume(key, 1));
  }

  /**
   * A request whose key is missing or not valid, from `address`: one point of `unauthenticated`. Only such requests
   * are counted and only they are refused (429 instead of 401 once the address is over its budget); a request with a
   * valid key never comes here, so bad keys cannot lock out the good ones behind one NAT, office or proxy.
   */
  async badKey(address: string): Promise<RateLimitVerdict> {
    return this.consume('unauthenticated', address);
  }

  private async ask(cls: RateLimitClass, _key: string, op: (l: RateLimiterAbstract) => Promise<RateLimiterRes>): Promise<RateLimitVerdict> {
    const entry = this.limiters.get(cls);
    if (!entry) return { allowed: true, headers: {} };
    let limiter: RateLimiterAbstract;
    try {
      limiter = await entry.limiter;
    } catch (err) {
      // Making the table failed (the database was down, or instances raced to create it): try again next time
      // rather than stay broken for the life of the process.
      entry.limiter = entry.build();
      return this.backendFailed(cls, err);
    }
    try {
      const res = await op(limiter);
      return { allowed: true, headers: this.fields(entry.policy, cls, res.remainingPoints, res.msBeforeNext) };
    } catch (err) {
      if (err instanceof RateLimiterRes) {
        const retryAfterSeconds = Math.max(1, Math.ceil(err.msBeforeNext / 1000));
        return { allowed: false, retryAfterSeconds, headers: { ...this.fields(entry.policy, cls, 0, err.msBeforeNext), 'retry-after': String(retryAfterSeconds) } };
      }
      return this.backendFailed(cls, err);
    }
  }

  private backendFailed(cls: RateLimitClass, err: unknown): RateLimitVerdict {
    const now = this.options.clock.now();
    if (now - this.lastWarning > 10_000) {
      this.lastWarning = now;
      this.logger.warn({ err: asError(err), class: cls, failOpen: this.options.rateLimits!.failOpen }, 'rate limit backend failed');
    }
    return this.options.rateLimits!.failOpen ? { allowed: true, headers: {} } : { allowed: 'unavailable' };
  }

  private fields(policy: string, cls: RateLimitClass, remaining: number, msBeforeNext: number): Record<string, string> {
    return {
      'ratelimit-policy': policy,
      ratelimit: `"${cls}";r=${Math.max(0, remaining)};t=${Math.max(0, Math.ceil(msBeforeNext / 1000))}`,
    };
  }
}
