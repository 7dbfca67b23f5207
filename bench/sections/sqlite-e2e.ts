/**
 * SQLite end to end: N generations created and run to completion on the SQLite stores (`service.create` in a loop,
 * the in-process runner at concurrency 8, the no-op provider), against raw better-sqlite3 running the same statements
 * in the same IMMEDIATE transactions (copied from packages/store-sqlite/src: ledger.ts reserve and settle,
 * generation-store.ts insert, claim and complete, each with its event) on raw p-queue at the same concurrency, with
 * the same pragmas and schema. Both sides validate the settings, reserve, insert, claim, call the provider, complete
 * and settle every generation; the figure is generations per second until the last one is settled.
 */
import Database from 'better-sqlite3';
import PQueue from 'p-queue';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { createGenerationService, type GenerationContext } from '@genservice/core';
import { createSqliteStores } from '@genservice/store-sqlite';
import { BALANCE, MODEL, MODEL_ID, RUNNER_CONCURRENCY, SETTINGS, USER_ID, noopProvider } from '../lib/fixture.js';
import { rawSqlite } from './stores.js';

/** The service's in-flight cap in these runs (far above what a run holds), passed to the insert's count on both sides. */
const IN_FLIGHT = 10_000_000;
const LEASE_MS = 30_000;

/** Generations per second through the service on the SQLite stores; throws unless every one completed. */
export async function oursSqliteE2E(dir: string, n: number, tag: string): Promise<number> {
  const stores = createSqliteStores({ filename: path.join(dir, `e2e-ours-${tag}.db`) });
  await stores.ledger.credit(USER_ID, BALANCE);
  // Counts settles, the last step of every run, to know when all are done (a wrapper on the instance only).
  const ledger = stores.ledger;
  const settle = ledger.settle.bind(ledger);
  let settled = 0;
  let wake: (() => void) | undefined;
  ledger.settle = async (id: string, amount: number) => {
    const r = await settle(id, amount);
    if (++settled >= n) wake?.();
    return r;
  };
  const service = createGenerationService({
    ...stores,
    providers: [noopProvider],
    limits: { inFlightPerUser: IN_FLIGHT },
    runner: { concurrency: RUNNER_CONCURRENCY, leaseMs: LEASE_MS },
    recovery: { onStart: false, intervalMs: 0 },
  });
  await service.start();
  try {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await service.create(USER_ID, { modelId: MODEL_ID, settings: SETTINGS });
    if (settled < n) await new Promise<void>((resolve) => (wake = resolve));
    const seconds = (performance.now() - t0) / 1000;
    const counts = await stores.store.countByStatus();
    if (counts.completed !== n) throw new Error(`sqlite e2e: expected ${n} completed, got ${JSON.stringify(counts)}`);
    return n / seconds;
  } finally {
    await service.stop({ timeoutMs: 5000 });
    await stores.close();
  }
}

// Copied from packages/store-sqlite/src/ledger.ts and generation-store.ts (GENERATION_SQL.insert, and the UPDATE its
// updateSql builds for the Lifecycle's claim from pending and complete, each bumping last_seq for its event's seq).
const SQL = {
  findReserve: 'SELECT user_id, amount, state, charged FROM reserves WHERE generation_id = ?',
  hold: `UPDATE accounts SET balance = balance - @amount, reserved = reserved + @amount
        WHERE user_id = @userId AND balance >= @amount`,
  insertReserve: `INSERT INTO reserves (generation_id, user_id, amount, state, created_at)
       VALUES (@generationId, @userId, @amount, 'open', @now)`,
  closeReserve: `UPDATE reserves SET state = 'settled', charged = @charged, settled_at = @now
        WHERE generation_id = @generationId AND state = 'open'`,
  applySettle: `UPDATE accounts
          SET reserved = reserved - @amount, settled = settled + @charged, balance = balance + (@amount - @charged)
        WHERE user_id = @userId`,
  credit: `INSERT INTO accounts (user_id, balance) VALUES (@userId, @amount)
       ON CONFLICT (user_id) DO UPDATE SET balance = balance + excluded.balance`,
  countUnfinished: `SELECT count(*) AS n FROM
     (SELECT 1 FROM generations WHERE owner_id = ? AND finished_at IS NULL LIMIT ?)`,
  insert: `INSERT INTO generations (id, owner_id, model_id, settings, status, reserved, claims, metadata, webhook,
                                    last_seq, created_at, updated_at)
    VALUES (@id, @ownerId, @modelId, @settings, 'pending', @reserved, 0, @metadata, @webhook, 1, @createdAt, @createdAt)`,
  claim: `UPDATE generations
       SET status = 'processing', claims = 1, lease_owner = @workerId,
           lease_expires_at = @expiresAt, updated_at = @now, started_at = @now, last_seq = last_seq + 1
     WHERE id = @id AND status = 'pending'
    RETURNING id, owner_id, model_id, settings, status, reserved, price, result_text, result_key, failure_reason,
  error_code, error_message, metadata, webhook, progress_fraction, progress_message, remote_handle, parked_until,
  claims, lease_owner, lease_expires_at, last_seq, created_at, updated_at, started_at, finished_at`,
  complete: `UPDATE generations
       SET status = 'completed', price = @price, result_text = coalesce(@resultText, result_text),
           result_key = coalesce(@resultKey, result_key), finished_at = @now, updated_at = @now, last_seq = last_seq + 1
     WHERE id = @id AND status = 'processing' AND lease_owner = @workerId AND lease_expires_at > @now
    RETURNING owner_id, price, last_seq`,
  appendEvent: 'INSERT INTO events (generation_id, seq, owner_id, type, at, data) VALUES (?, ?, ?, ?, ?, ?)',
  count: 'SELECT status, count(*) AS n FROM generations GROUP BY status',
};

/** The settings check a hand-written service would do for the bench model: declared names, types, select options, required. */
function validSettings(settings: Record<string, unknown>): boolean {
  for (const [name, v] of Object.entries(settings)) {
    const def = MODEL.settings.find((s) => s.name === name);
    if (!def || typeof v !== 'string' || (def.fieldType === 'select' && !def.options!.includes(v))) return false;
  }
  return MODEL.settings.every((s) => !s.required || settings[s.name] !== undefined);
}

/** The same work on better-sqlite3 and p-queue alone. */
export async function rawSqliteE2E(dir: string, n: number, tag: string): Promise<number> {
  const db: Database.Database = rawSqlite(path.join(dir, `e2e-raw-${tag}.db`));
  const s = Object.fromEntries(Object.entries(SQL).map(([k, sql]) => [k, db.prepare(sql)])) as Record<keyof typeof SQL, Database.Statement>;
  s.credit.run({ userId: USER_ID, amount: BALANCE });
  const append = (id: string, owner: string, seq: number, type: string, at: number, data: unknown): void => {
    s.appendEvent.run(id, seq, owner, type, at, JSON.stringify(data));
  };
  const reserve = db.transaction((userId: string, generationId: string, amount: number, now: number): boolean => {
    if (s.findReserve.get(generationId)) return true;
    if (s.hold.run({ userId, amount }).changes === 0) return false;
    s.insertReserve.run({ generationId, userId, amount, now });
    return true;
  }).immediate;
  const insert = db.transaction((id: string, settings: Record<string, unknown>, now: number): boolean => {
    if ((s.countUnfinished.get(USER_ID, IN_FLIGHT) as { n: number }).n >= IN_FLIGHT) return false;
    s.insert.run({ id, ownerId: USER_ID, modelId: MODEL_ID, settings: JSON.stringify(settings), reserved: 1, metadata: null, webhook: null, createdAt: now });
    append(id, USER_ID, 1, 'created', now, { modelId: MODEL_ID });
    return true;
  }).immediate;
  const claim = db.transaction((id: string, now: number) => {
    const row = s.claim.get({ id, workerId: 'raw', expiresAt: now + LEASE_MS, now }) as { owner_id: string; settings: string; last_seq: number } | undefined;
    if (row) append(id, row.owner_id, row.last_seq, 'processing', now, { claim: 1 });
    return row;
  }).immediate;
  const complete = db.transaction((id: string, price: number, text: string, now: number): boolean => {
    const row = s.complete.get({ id, workerId: 'raw', price, resultText: text, resultKey: null, now }) as { owner_id: string; price: number; last_seq: number } | undefined;
    if (!row) return false;
    append(id, row.owner_id, row.last_seq, 'completed', now, { price: row.price });
    return true;
  }).immediate;
  const settle = db.transaction((generationId: string, amount: number): number | null => {
    const r = s.findReserve.get(generationId) as { user_id: string; amount: number; state: string; charged: number | null } | undefined;
    if (!r) return null;
    if (r.state === 'settled') return r.charged ?? 0;
    const charged = Math.min(Math.max(amount, 0), r.amount);
    s.closeReserve.run({ generationId, charged, now: Date.now() });
    s.applySettle.run({ userId: r.user_id, amount: r.amount, charged });
    return charged;
  }).immediate;

  const queue = new PQueue({ concurrency: RUNNER_CONCURRENCY });
  const ctx = {} as GenerationContext;
  let done = 0;
  const create = async (settings: Record<string, unknown>): Promise<{ generationId: string }> => {
    if (!validSettings(settings)) throw new Error('invalid settings');
    const id = randomUUID();
    const now = Date.now();
    if (!reserve(USER_ID, id, 1, now)) throw new Error('insufficient');
    if (!insert(id, { ...settings }, now)) throw new Error('limit');
    void queue.add(async () => {
      const row = claim(id, Date.now());
      if (!row) return;
      const out = await noopProvider.generate({ model: MODEL, settings: JSON.parse(row.settings) as Record<string, string> }, ctx);
      if (complete(id, 1, 'text' in out ? out.text : '', Date.now())) settle(id, 1);
      done++;
    });
    return { generationId: id };
  };
  try {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await create(SETTINGS);
    await queue.onIdle();
    const seconds = (performance.now() - t0) / 1000;
    const counts = Object.fromEntries((s.count.all() as Array<{ status: string; n: number }>).map((r) => [r.status, r.n]));
    if (done !== n || counts.completed !== n) throw new Error(`raw sqlite e2e: ${done}/${n} done, ${JSON.stringify(counts)}`);
    return n / seconds;
  } finally {
    db.close();
  }
}
