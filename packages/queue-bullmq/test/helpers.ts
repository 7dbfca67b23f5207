import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { createPostgresStores, type PostgresStores } from '@genservice/store-postgres';
import { createTestDatabase } from '../../store-postgres/test/helpers.js';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
export const QUEUE_NAME = 'genservice';
const pkgDir = fileURLToPath(new URL('..', import.meta.url));
/**
 * tsx applies a tsconfig only to the files it includes; the root one includes every package's source, so core's
 * decorators compile when a host process loads it through the `@genservice/source` condition.
 */
const rootTsconfig = fileURLToPath(new URL('../../../tsconfig.json', import.meta.url));

export function randomName(prefix: string): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

/** Removes every key of one BullMQ queue under a test's prefix. */
export async function obliterate(prefix: string, queueName = QUEUE_NAME): Promise<void> {
  const q = new Queue(queueName, { connection: { url: REDIS_URL }, prefix });
  q.on('error', () => undefined);
  try {
    await q.obliterate({ force: true });
  } finally {
    await q.close();
  }
}

/** Waiting/active/delayed counts of a test's queue, read from Redis by a connection of the test's own. */
export async function jobCounts(prefix: string, queueName = QUEUE_NAME): Promise<Record<string, number>> {
  const q = new Queue(queueName, { connection: { url: REDIS_URL }, prefix });
  q.on('error', () => undefined);
  try {
    return await q.getJobCounts('waiting', 'active', 'delayed', 'failed', 'prioritized');
  } finally {
    await q.close();
  }
}

export interface FreshStores extends PostgresStores {
  /** The URL of the test's own database (host processes connect to it). */
  databaseUrl: string;
  schema: string;
  /** Closes the pool and drops the database. */
  drop(): Promise<void>;
}

/** Stores in a database of their own (created here, from the `postgres` maintenance database), dropped afterwards. */
export async function freshStores(): Promise<FreshStores> {
  const db = await createTestDatabase('genservice_qb');
  const schema = randomName('qb');
  const stores = await createPostgresStores({ connectionString: db.url, schema, poolSize: 5 }).catch(async (err: unknown) => {
    await db.drop();
    throw err;
  });
  return {
    ...stores,
    databaseUrl: db.url,
    schema,
    async drop(): Promise<void> {
      try {
        await stores.close();
      } finally {
        await db.drop();
      }
    },
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Settings of one host process (test/fixtures/host.ts); all optional ones have test-friendly defaults there. */
export interface HostEnv {
  DATABASE_URL: string;
  SCHEMA: string;
  REDIS_URL: string;
  PREFIX: string;
  INSTANCE_ID: string;
  CONCURRENCY?: string;
  LEASE_MS?: string;
  LOCK_MS?: string;
  STALLED_MS?: string;
  RECOVERY_MS?: string;
  MAX_CLAIMS?: string;
  STOP_TIMEOUT_MS?: string;
  LOG_LEVEL?: string;
}

/** One host process: a genservice instance on BullMQ + Postgres behind node:http. */
export class HostProcess {
  readonly child: ChildProcess;
  port = 0;
  output = '';
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private readonly listening: Promise<number>;

  constructor(readonly env: HostEnv) {
    this.child = spawn(process.execPath, ['--conditions=@genservice/source', '--import', 'tsx', 'test/fixtures/host.ts'], {
      cwd: pkgDir,
      env: { ...process.env, TSX_TSCONFIG_PATH: rootTsconfig, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        resolve({ code, signal });
      });
    });
    this.listening = new Promise<number>((resolve, reject) => {
      const onData = (d: Buffer): void => {
        this.output += d.toString();
        const m = /"event":"listening","port":(\d+)/.exec(this.output);
        if (m && this.port === 0) {
          this.port = Number(m[1]);
          resolve(this.port);
        }
      };
      this.child.stdout!.on('data', onData);
      this.child.stderr!.on('data', (d: Buffer) => (this.output += d.toString()));
      void this.exited.then(({ code, signal }) => reject(new Error(`host ${env.INSTANCE_ID} exited (${code ?? signal}) before listening:\n${this.output}`)));
    });
    this.listening.catch(() => undefined);
  }

  get alive(): boolean {
    return this.exitInfo === undefined;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  ready(timeoutMs = 30_000): Promise<number> {
    return Promise.race([
      this.listening,
      sleep(timeoutMs).then(() => {
        throw new Error(`host ${this.env.INSTANCE_ID} did not listen within ${timeoutMs} ms:\n${this.output}`);
      }),
    ]);
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    if (this.alive) this.child.kill(signal);
  }

  /** SIGTERM, then SIGKILL if it has not exited within `timeoutMs`. */
  async terminate(timeoutMs = 15_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (!this.alive) return this.exitInfo!;
    this.child.kill('SIGTERM');
    const done = await Promise.race([this.exited, sleep(timeoutMs).then(() => undefined)]);
    if (done) return done;
    this.child.kill('SIGKILL');
    return this.exited;
  }

  /** JSON log lines the host printed. */
  logs(): Array<Record<string, unknown>> {
    const out: Array<Record<string, unknown>> = [];
    for (const line of this.output.split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        out.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // A line cut off by SIGKILL.
      }
    }
    return out;
  }
}

export interface CreateAnswer {
  status: number;
  generationId?: string;
  code?: string;
}

/** POST /v1/generations against a host; network failures (a killed host) come back as status 0. */
export async function createOn(baseUrl: string, apiKey: string, prompt: string, timeoutMs = 10_000): Promise<CreateAnswer> {
  try {
    const res = await fetch(`${baseUrl}/v1/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ modelId: 'fake', settings: { prompt } }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = (await res.json()) as { generationId?: string; error?: { code?: string } };
    return { status: res.status, generationId: body.generationId, code: body.error?.code };
  } catch {
    return { status: 0 };
  }
}

/** Per-generation rows of the store and the ledger, read straight from the schema. */
export async function generationRows(
  stores: FreshStores,
): Promise<Array<{ id: string; ownerId: string; status: string; price: number | null; claims: number; resultText: string | null; reserveState: string | null; charged: number | null; amount: number | null }>> {
  const s = `"${stores.schema}"`;
  const { rows } = await stores.pool.query(
    `SELECT g.id, g.owner_id, g.status, g.price, g.claims, g.result_text, r.state, r.charged, r.amount
       FROM ${s}.generations g LEFT JOIN ${s}.reserves r ON r.generation_id = g.id`,
  );
  return rows.map((r: Record<string, unknown>) => ({
    id: String(r.id),
    ownerId: String(r.owner_id),
    status: String(r.status),
    price: r.price === null ? null : Number(r.price),
    claims: Number(r.claims),
    resultText: r.result_text === null ? null : String(r.result_text),
    reserveState: r.state === null ? null : String(r.state),
    charged: r.charged === null ? null : Number(r.charged),
    amount: r.amount === null ? null : Number(r.amount),
  }));
}

/** Gives each user a key (`key-<user>`) and a balance. */
export async function seedUsers(stores: FreshStores, balances: Record<string, number>): Promise<void> {
  for (const [user, balance] of Object.entries(balances)) {
    await stores.apiKeys.addKey(`key-${user}`, user);
    await stores.ledger.credit(user, balance);
  }
}
