import { Redis, type RedisOptions } from 'ioredis';
import { silentLogger, type Logger, type Notifier } from '@genservice/core/ports';

export interface RedisNotifierOptions {
  /** A `redis://` URL or ioredis options (the notifier opens its own two connections: one publishes, one listens). */
  connection: string | RedisOptions;
  /** The pub/sub channel every instance of one service shares. Default `genservice:events`. */
  channel?: string;
  /** Connection trouble is reported here (at most every 10 s). Default: silent. */
  logger?: Logger;
}

/**
 * Wakes every instance's live streams and webhook outbox when any instance commits a transition, over Redis pub/sub.
 * It only says "read the log now": a message lost while Redis is down costs latency (readers also poll the log),
 * never an event.
 *
 * @example
 * createGenerationService({ ..., push: { notifier: new RedisNotifier({ connection: process.env.REDIS_URL! }) } });
 */
export class RedisNotifier implements Notifier {
  private readonly channel: string;
  private readonly base: RedisOptions;
  private readonly logger: Logger;
  private pub: Redis | undefined;
  private sub: Redis | undefined;
  private lastReport = 0;
  private pending = false;

  constructor(options: RedisNotifierOptions) {
    if (!options || options.connection === undefined || options.connection === null) {
      throw new TypeError('RedisNotifier: options.connection (a Redis URL or ioredis options) is required');
    }
    this.channel = options.channel ?? 'genservice:events';
    const given: RedisOptions = typeof options.connection === 'string' ? parseUrl(options.connection) : { ...options.connection };
    this.base = { retryStrategy: (times: number) => Math.min(250 * times, 2000), maxRetriesPerRequest: 1, ...given };
    this.logger = options.logger ?? silentLogger;
  }

  async start(onWake: () => void): Promise<void> {
    if (this.sub) return;
    this.pub = new Redis({ ...this.base, enableOfflineQueue: false, lazyConnect: false });
    this.sub = new Redis({ ...this.base, lazyConnect: false });
    for (const client of [this.pub, this.sub]) client.on('error', (err: unknown) => this.report(err));
    this.sub.on('message', (channel: string) => {
      if (channel === this.channel) onWake();
    });
    // ioredis re-subscribes by itself after a reconnect.
    await this.sub.subscribe(this.channel).catch((err: unknown) => this.report(err));
  }

  publish(): void {
    const pub = this.pub;
    if (!pub || this.pending) return;
    // A burst of transitions in one tick makes one message.
    this.pending = true;
    queueMicrotask(() => {
      this.pending = false;
      pub.publish(this.channel, '1').catch((err: unknown) => this.report(err));
    });
  }

  async stop(): Promise<void> {
    const clients = [this.pub, this.sub].filter((c): c is Redis => c !== undefined);
    this.pub = undefined;
    this.sub = undefined;
    await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
  }

  private report(err: unknown): void {
    const now = Date.now();
    if (now - this.lastReport < 10_000) return;
    this.lastReport = now;
    this.logger.warn({ component: 'redis-notifier', err: err instanceof Error ? err : new Error(String(err)) }, 'redis notifier error; readers fall back to polling');
  }
}

function parseUrl(url: string): RedisOptions {
  const u = new URL(url);
  return {
    host: u.hostname,
    port: u.port ? Number(u.port) : 6379,
    ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
    ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
    ...(u.pathname.length > 1 ? { db: Number(u.pathname.slice(1)) } : {}),
    ...(u.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}
