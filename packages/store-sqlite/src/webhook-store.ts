import { retryMethodsWhileBusy } from './busy.js';
import type {
  ClaimFairness,
  Delivery,
  DeliveryAttempt,
  DeliveryOutcome,
  DeliveryWithAttempts,
  NewDelivery,
  WebhookEndpointChange,
  WebhookEndpointRecord,
  WebhookSecrets,
  WebhookStore,
} from '@genservice/core/ports';
import type { SqliteDatabase } from './database.js';
import type Database from 'better-sqlite3';

interface DeliveryRow {
  id: string;
  generation_id: string;
  owner_id: string;
  seq: number;
  type: Delivery['type'];
  url: string;
  payload: string;
  state: Delivery['state'];
  attempts: number;
  next_attempt_at: number;
  lease_owner: string | null;
  lease_expires_at: number | null;
  created_at: number;
  traceparent: string | null;
  endpoint_id: string | null;
}

interface EndpointRow {
  id: string;
  owner_id: string;
  url: string;
  events: string;
  description: string | null;
  secret: string;
  previous_secret: string | null;
  previous_expires_at: number | null;
  created_at: number;
  updated_at: number;
  disabled_at: number | null;
  failing_since: number | null;
}

function toEndpoint(r: EndpointRow): WebhookEndpointRecord {
  return {
    id: r.id,
    ownerId: r.owner_id,
    url: r.url,
    events: JSON.parse(r.events) as WebhookEndpointRecord['events'],
    ...(r.description !== null ? { description: r.description } : {}),
    secret: r.secret,
    ...(r.previous_secret !== null && r.previous_expires_at !== null ? { previousSecret: { key: r.previous_secret, expiresAt: r.previous_expires_at } } : {}),
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    ...(r.disabled_at !== null ? { disabledAt: r.disabled_at } : {}),
    ...(r.failing_since !== null ? { failingSince: r.failing_since } : {}),
  };
}

function toDelivery(r: DeliveryRow): Delivery {
  const d: Delivery = {
    id: r.id,
    generationId: r.generation_id,
    ownerId: r.owner_id,
    seq: r.seq,
    type: r.type,
    url: r.url,
    payload: r.payload,
    nextAttemptAt: r.next_attempt_at,
    createdAt: r.created_at,
    state: r.state,
    attempts: r.attempts,
  };
  if (r.lease_owner !== null) d.leaseOwner = r.lease_owner;
  if (r.lease_expires_at !== null) d.leaseExpiresAt = r.lease_expires_at;
  if (r.traceparent !== null) d.traceparent = r.traceparent;
  if (r.endpoint_id !== null) d.endpointId = r.endpoint_id;
  return d;
}

/**
 * Webhook secrets and the delivery outbox on SQLite (tables from migration 4, a delivery's traceparent from 10). SQLite serialises writers across
 * processes, and every change here is one statement or one IMMEDIATE transaction, so racing claimers each get different
 * deliveries.
 */
export class SqliteWebhookStore implements WebhookStore {
  private readonly claimTx: (now: number, limit: number, workerId: string, leaseMs: number, fairness?: ClaimFairness) => DeliveryRow[];
  private readonly recordTx: (id: string, workerId: string, attempt: DeliveryAttempt, outcome: DeliveryOutcome) => boolean;
  private readonly addTx: (deliveries: NewDelivery[]) => void;

  /**
   * Statements prepared on first use and kept: the outbox reads and moves its cursor after every committed transition,
   * and compiling the SQL each time cost more than running it.
   */
  private readonly statements = new Map<string, Database.Statement>();

  private stmt(sql: string): Database.Statement {
    let stmt = this.statements.get(sql);
    if (!stmt) {
      stmt = this.db.prepare(sql);
      this.statements.set(sql, stmt);
    }
    return stmt;
  }

  constructor(private readonly db: SqliteDatabase) {
    retryMethodsWhileBusy(this, db);
    const due = db.prepare(
      `SELECT id FROM webhook_deliveries
       WHERE state = 'pending' AND next_attempt_at <= ? AND (lease_expires_at IS NULL OR lease_expires_at <= ?)
       ORDER BY next_attempt_at, rowid LIMIT ?`,
    );
    const lease = db.prepare(`UPDATE webhook_deliveries SET lease_owner = ?, lease_expires_at = ? WHERE id = ? RETURNING *`);
    // An endpoint's and an owner's deliveries count on from those already leased (a leased delivery was due when taken),
    // and owners take turns: everyone's first before anyone's second. Existing columns and indexes; no schema change.
    const fairDue = db.prepare(
      `WITH busy AS (
          SELECT owner_id, url, count(*) AS n FROM webhook_deliveries
          WHERE state = 'pending' AND next_attempt_at <= @now AND lease_expires_at > @now GROUP BY owner_id, url),
        busy_owner AS (SELECT owner_id, sum(n) AS n FROM busy GROUP BY owner_id),
        due AS (
          SELECT d.id, d.owner_id, d.next_attempt_at, d.rowid AS ord,
            row_number() OVER (PARTITION BY d.owner_id, d.url ORDER BY d.next_attempt_at, d.rowid) + coalesce(b.n, 0) AS at_endpoint
          FROM webhook_deliveries d LEFT JOIN busy b ON b.owner_id = d.owner_id AND b.url = d.url
          WHERE d.state = 'pending' AND d.next_attempt_at <= @now AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= @now)),
        fair AS (
          SELECT due.id, due.next_attempt_at, due.ord,
            row_number() OVER (PARTITION BY due.owner_id ORDER BY due.next_attempt_at, due.ord) + coalesce(o.n, 0) AS at_owner
          FROM due LEFT JOIN busy_owner o ON o.owner_id = due.owner_id
          WHERE due.at_endpoint <= @perEndpoint)
        SELECT id FROM fair WHERE at_owner <= @perOwner ORDER BY at_owner, next_attempt_at, ord LIMIT @limit`,
    );
    this.claimTx = db.transaction((now: number, limit: number, workerId: string, leaseMs: number, fairness?: ClaimFairness) => {
      const ids = (
        fairness ? fairDue.all({ now, limit, perEndpoint: fairness.perEndpoint, perOwner: fairness.perOwner }) : due.all(now, now, limit)
      ) as Array<{ id: string }>;
      return ids.map(({ id }) => lease.get(workerId, now + leaseMs, id) as DeliveryRow);
    }).immediate;
    const update = db.prepare(
      `UPDATE webhook_deliveries SET attempts = attempts + 1, state = @state,
         next_attempt_at = coalesce(@next, next_attempt_at), lease_owner = NULL, lease_expires_at = NULL
       WHERE id = @id AND state = 'pending' AND lease_owner = @workerId AND lease_expires_at > @at
       RETURNING attempts`,
    );
    const insertAttempt = db.prepare(`INSERT INTO webhook_attempts (delivery_id, n, at, status, error, duration_ms) VALUES (?, ?, ?, ?, ?, ?)`);
    this.recordTx = db.transaction((id: string, workerId: string, attempt: DeliveryAttempt, outcome: DeliveryOutcome) => {
      const row = update.get({
        id,
        workerId,
        at: attempt.at,
        state: outcome.state,
        next: outcome.state === 'pending' ? (outcome.nextAttemptAt ?? null) : null,
      }) as { attempts: number } | undefined;
      if (!row) return false;
      insertAttempt.run(id, row.attempts, attempt.at, attempt.status ?? null, attempt.error ?? null, Math.max(0, Math.round(attempt.durationMs)));
      return true;
    }).immediate;
    const insert = db.prepare(
      `INSERT INTO webhook_deliveries (id, generation_id, owner_id, seq, type, url, payload, next_attempt_at, created_at, traceparent, endpoint_id)
       VALUES (@id, @generationId, @ownerId, @seq, @type, @url, @payload, @nextAttemptAt, @createdAt, @traceparent, @endpointId)
       ON CONFLICT (id) DO NOTHING`,
    );
    this.addTx = db.transaction((deliveries: NewDelivery[]) => {
      for (const d of deliveries) insert.run({ ...d, traceparent: d.traceparent ?? null, endpointId: d.endpointId ?? null });
    }).immediate;
  }

  async getSecrets(userId: string, now: number): Promise<WebhookSecrets | null> {
    const r = this.stmt(`SELECT current_key, previous_key, previous_expires_at FROM webhook_secrets WHERE user_id = ?`).get(userId) as
      | { current_key: string; previous_key: string | null; previous_expires_at: number | null }
      | undefined;
    if (!r) return null;
    return r.previous_key !== null && r.previous_expires_at !== null && r.previous_expires_at > now
      ? { current: r.current_key, previous: { key: r.previous_key, expiresAt: r.previous_expires_at } }
      : { current: r.current_key };
  }

  async ensureSecret(userId: string, candidate: string, now: number): Promise<string> {
    this.stmt(`INSERT INTO webhook_secrets (user_id, current_key) VALUES (?, ?) ON CONFLICT (user_id) DO NOTHING`).run(userId, candidate);
    return (await this.getSecrets(userId, now))!.current;
  }

  async rotateSecret(userId: string, newKey: string, now: number, overlapMs: number): Promise<WebhookSecrets> {
    this.db
      .prepare(
        `INSERT INTO webhook_secrets (user_id, current_key) VALUES (?, ?)
         ON CONFLICT (user_id) DO UPDATE SET previous_key = current_key, previous_expires_at = ?, current_key = excluded.current_key`,
      )
      .run(userId, newKey, now + overlapMs);
    return (await this.getSecrets(userId, now))!;
  }

  async addDeliveries(deliveries: NewDelivery[]): Promise<void> {
    if (deliveries.length > 0) this.addTx(deliveries);
  }

  async claimDue(now: number, limit: number, workerId: string, leaseMs: number, fairness?: ClaimFairness): Promise<Delivery[]> {
    if (!(limit > 0)) return [];
    return this.claimTx(now, Math.floor(limit), workerId, leaseMs, fairness).map(toDelivery);
  }

  async recordAttempt(id: string, workerId: string, attempt: DeliveryAttempt, outcome: DeliveryOutcome): Promise<boolean> {
    return this.recordTx(id, workerId, attempt, outcome);
  }

  async stopEndpoint(ownerId: string, url: string): Promise<number> {
    return this.stmt(`UPDATE webhook_deliveries SET state = 'gone' WHERE owner_id = ? AND url = ? AND state = 'pending'`).run(ownerId, url).changes;
  }

  async deliveriesOf(generationId: string): Promise<DeliveryWithAttempts[]> {
    return this.withAttempts(this.stmt(`SELECT * FROM webhook_deliveries WHERE generation_id = ? ORDER BY seq, rowid`).all(generationId) as DeliveryRow[]);
  }

  private withAttempts(rows: DeliveryRow[]): DeliveryWithAttempts[] {
    const attempts = this.stmt(`SELECT at, status, error, duration_ms FROM webhook_attempts WHERE delivery_id = ? ORDER BY n`);
    return rows.map((r) => ({
      ...toDelivery(r),
      history: (attempts.all(r.id) as Array<{ at: number; status: number | null; error: string | null; duration_ms: number }>).map((a) => ({
        at: a.at,
        durationMs: a.duration_ms,
        ...(a.status !== null ? { status: a.status } : {}),
        ...(a.error !== null ? { error: a.error } : {}),
      })),
    }));
  }

  async getCursor(name: string): Promise<string> {
    const r = this.stmt(`SELECT value FROM cursors WHERE name = ?`).get(name) as { value: string } | undefined;
    return r?.value ?? '';
  }

  /** `value` is TEXT (migration 5): the cursor is compared as the exact string it was written as. */
  async advanceCursor(name: string, from: string, to: string): Promise<boolean> {
    if (this.stmt(`UPDATE cursors SET value = ? WHERE name = ? AND value = ?`).run(to, name, from).changes === 1) return true;
    if (from !== '') return false;
    return this.stmt(`INSERT INTO cursors (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`).run(name, to).changes === 1;
  }

  async deleteForGenerations(generationIds: string[]): Promise<number> {
    if (generationIds.length === 0) return 0;
    const ids = JSON.stringify(generationIds);
    return this.db.transaction(() => {
      this.stmt(`DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE generation_id IN (SELECT value FROM json_each(?)))`).run(ids);
      return this.stmt(`DELETE FROM webhook_deliveries WHERE generation_id IN (SELECT value FROM json_each(?))`).run(ids).changes;
    }).immediate();
  }

  async createEndpoint(e: WebhookEndpointRecord): Promise<void> {
    this.stmt(
      `INSERT INTO webhook_endpoints (id, owner_id, url, events, description, secret, previous_secret, previous_expires_at, created_at, updated_at, disabled_at, failing_since)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      e.id,
      e.ownerId,
      e.url,
      JSON.stringify(e.events),
      e.description ?? null,
      e.secret,
      e.previousSecret?.key ?? null,
      e.previousSecret?.expiresAt ?? null,
      e.createdAt,
      e.updatedAt,
      e.disabledAt ?? null,
      e.failingSince ?? null,
    );
  }

  async getEndpoint(id: string, ownerId: string): Promise<WebhookEndpointRecord | null> {
    const r = this.stmt(`SELECT * FROM webhook_endpoints WHERE id = ? AND owner_id = ?`).get(id, ownerId) as EndpointRow | undefined;
    return r ? toEndpoint(r) : null;
  }

  async listEndpoints(ownerId: string): Promise<WebhookEndpointRecord[]> {
    return (this.stmt(`SELECT * FROM webhook_endpoints WHERE owner_id = ? ORDER BY created_at, rowid`).all(ownerId) as EndpointRow[]).map(toEndpoint);
  }

  async updateEndpoint(id: string, ownerId: string, change: WebhookEndpointChange): Promise<WebhookEndpointRecord | null> {
    return this.db.transaction(() => {
      const r = this.stmt(`SELECT * FROM webhook_endpoints WHERE id = ? AND owner_id = ?`).get(id, ownerId) as EndpointRow | undefined;
      if (!r) return null;
      const next: EndpointRow = { ...r, updated_at: change.updatedAt };
      if (change.url !== undefined) next.url = change.url;
      if (change.events !== undefined) next.events = JSON.stringify(change.events);
      if (change.description !== undefined) next.description = change.description;
      const disabling = change.disabledAt !== undefined && change.disabledAt !== null && r.disabled_at === null;
      if (change.disabledAt === null) {
        next.disabled_at = null;
        next.failing_since = null;
      } else if (disabling) next.disabled_at = change.disabledAt!;
      this.stmt(
        `UPDATE webhook_endpoints SET url = @url, events = @events, description = @description, updated_at = @updated_at,
           disabled_at = @disabled_at, failing_since = @failing_since WHERE id = @id`,
      ).run({ id, url: next.url, events: next.events, description: next.description, updated_at: next.updated_at, disabled_at: next.disabled_at, failing_since: next.failing_since });
      if (disabling) this.endDeliveries(id, 'failed');
      return toEndpoint(next);
    }).immediate();
  }

  private endDeliveries(endpointId: string, state: 'gone' | 'failed'): void {
    this.stmt(`UPDATE webhook_deliveries SET state = ? WHERE endpoint_id = ? AND state = 'pending'`).run(state, endpointId);
  }

  async deleteEndpoint(id: string, ownerId: string): Promise<boolean> {
    return this.db.transaction(() => {
      if (this.stmt(`DELETE FROM webhook_endpoints WHERE id = ? AND owner_id = ?`).run(id, ownerId).changes === 0) return false;
      this.endDeliveries(id, 'gone');
      return true;
    }).immediate();
  }

  async rotateEndpointSecret(id: string, ownerId: string, newKey: string, now: number, overlapMs: number): Promise<WebhookEndpointRecord | null> {
    const r = this.stmt(
      `UPDATE webhook_endpoints SET previous_secret = secret, previous_expires_at = ?, secret = ?, updated_at = ?
       WHERE id = ? AND owner_id = ? RETURNING *`,
    ).get(now + overlapMs, newKey, now, id, ownerId) as EndpointRow | undefined;
    return r ? toEndpoint(r) : null;
  }

  async noteEndpointAttempt(id: string, ok: boolean, at: number): Promise<number | null> {
    const r = this.stmt(
      `UPDATE webhook_endpoints SET failing_since = CASE WHEN ? THEN NULL ELSE coalesce(failing_since, ?) END
       WHERE id = ? AND disabled_at IS NULL RETURNING failing_since`,
    ).get(ok ? 1 : 0, at, id) as { failing_since: number | null } | undefined;
    return r?.failing_since ?? null;
  }

  async disableEndpoint(id: string, at: number): Promise<boolean> {
    return this.db.transaction(() => {
      if (this.stmt(`UPDATE webhook_endpoints SET disabled_at = ?, updated_at = ? WHERE id = ? AND disabled_at IS NULL`).run(at, at, id).changes === 0) return false;
      this.endDeliveries(id, 'failed');
      return true;
    }).immediate();
  }

  async endpointDeliveries(endpointId: string, ownerId: string, limit: number): Promise<DeliveryWithAttempts[]> {
    const rows = this.stmt(`SELECT * FROM webhook_deliveries WHERE endpoint_id = ? AND owner_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ?`).all(
      endpointId,
      ownerId,
      Math.max(0, Math.floor(limit)),
    ) as DeliveryRow[];
    return this.withAttempts(rows);
  }

  async replayDelivery(id: string, endpointId: string, now: number): Promise<Delivery | 'busy' | null> {
    return this.db.transaction((): Delivery | 'busy' | null => {
      const r = this.stmt(`SELECT endpoint_id, lease_expires_at FROM webhook_deliveries WHERE id = ?`).get(id) as
        | { endpoint_id: string | null; lease_expires_at: number | null }
        | undefined;
      if (!r || r.endpoint_id !== endpointId) return null;
      if (r.lease_expires_at !== null && r.lease_expires_at > now) return 'busy';
      const row = this.stmt(
        `UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = ?, lease_owner = NULL, lease_expires_at = NULL WHERE id = ? RETURNING *`,
      ).get(now, id) as DeliveryRow;
      return toDelivery(row);
    }).immediate();
  }
}
