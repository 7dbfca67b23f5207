import pg from 'pg';
import { silentLogger, type Logger, type Notifier } from '@genservice/core/ports';

export interface PostgresNotifierOptions {
  /** The database every instance shares (a dedicated connection LISTENs; a pooled one NOTIFYs). */
  connectionString?: string;
  /** Publish through this pool (the stores' pool); the listening connection is opened from `connectionString`. */
  pool?: pg.Pool;
  /** Channel name (an identifier). Default `genservice_events`. */
  channel?: string;
  /** Connection trouble is reported here (at most every 10 s). Default: silent. */
  logger?: Logger;
}

/**
 * Wakes every instance's live streams and webhook outbox when any instance commits a transition, over Postgres
 * LISTEN/NOTIFY: for hosts that have Postgres and no Redis. It only says "read the log now"; a notification lost while
 * the listening connection reconnects costs latency (readers also poll the log), never an event.
 */
export class PostgresNotifier implements Notifier {
  private readonly channel: string;
  private listener: pg.Client | undefined;
  private ownPool: pg.Pool | undefined;
  private pending = false;
  private stopped = false;
  /** Counts starts and stops: a connection made for an earlier start is closed, not kept. */
  private epoch = 0;
  private lastReport = 0;
  private readonly logger: Logger;

  constructor(private readonly options: PostgresNotifierOptions) {
    this.channel = options.channel ?? 'genservice_events';
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(this.channel)) throw new TypeError(`PostgresNotifier: invalid channel ${JSON.stringify(this.channel)}`);
    if (!options.connectionString) throw new TypeError('PostgresNotifier: options.connectionString is required (the listening connection)');
    this.logger = options.logger ?? silentLogger;
  }

  async start(onWake: () => void): Promise<void> {
    this.stopped = false;
    this.epoch++;
    if (!this.options.pool) {
      this.ownPool = new pg.Pool({ connectionString: this.options.connectionString, max: 2 });
      this.ownPool.on('error', () => undefined);
    }
    await this.listen(onWake);
  }

  private async listen(onWake: () => void): Promise<void> {
    if (this.stopped) return;
    const epoch = this.epoch;
    const gone = (): boolean => this.stopped || this.epoch !== epoch;
    const client = new pg.Client({ connectionString: this.options.connectionString, application_name: 'genservice-notifier' });
    client.on('notification', (n) => {
      if (n.channel === this.channel) onWake();
    });
    client.on('error', (err) => {
      this.report(err);
      // Reconnect after a moment; meanwhile readers poll.
      client.end().catch(() => undefined);
      if (this.listener === client) this.listener = undefined;
      if (gone()) return;
      setTimeout(() => void this.listen(onWake).catch((e: unknown) => this.report(e)), 1000).unref();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
      if (gone()) {
        // Stopped while this connection was being made: close it rather than keep it listening for nobody.
        await client.end().catch(() => undefined);
        return;
      }
      this.listener = client;
      // Whatever was committed while not listening: read the log once.
      onWake();
    } catch (err) {
      this.report(err);
      client.end().catch(() => undefined);
      if (gone()) return;
      setTimeout(() => void this.listen(onWake).catch((e: unknown) => this.report(e)), 1000).unref();
    }
  }

  publish(): void {
    const pool = this.options.pool ?? this.ownPool;
    if (!pool || this.pending) return;
    // A burst of transitions in one tick makes one notification.
    this.pending = true;
    queueMicrotask(() => {
      this.pending = false;
      pool.query('SELECT pg_notify($1, $2)', [this.channel, '1']).catch((err: unknown) => this.report(err));
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.epoch++;
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => undefined);
    await this.ownPool?.end().catch(() => undefined);
    this.ownPool = undefined;
  }

  private report(err: unknown): void {
    const now = Date.now();
    if (now - this.lastReport < 10_000) return;
    this.lastReport = now;
    this.logger.warn({ component: 'postgres-notifier', err: err instanceof Error ? err : new Error(String(err)) }, 'postgres notifier error; readers fall back to polling');
  }
}
