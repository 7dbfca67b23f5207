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
import type { Pool } from 'pg';
import { PgDatabase, decodeKey, encodeKey, num, optNum, optStr, storableText, type PgStatementOptions } from './db.js';

type Row = Record<string, unknown>;

function toDelivery(r: Row): Delivery {
  const d: Delivery = {
    id: decodeKey(String(r.id)),
    generationId: decodeKey(String(r.generation_id)),
    ownerId: decodeKey(String(r.owner_id)),
    seq: num(r.seq),
    type: r.type as Delivery['type'],
    url: String(r.url),
    payload: String(r.payload),
    nextAttemptAt: num(r.next_attempt_at),
    createdAt: num(r.created_at),
    state: r.state as Delivery['state'],
    attempts: num(r.attempts),
  };
  const owner = optStr(r.lease_owner);
  if (owner !== undefined) d.leaseOwner = decodeKey(owner);
  const until = optNum(r.lease_expires_at);
  if (until !== undefined) d.leaseExpiresAt = until;
  const traceparent = optStr(r.traceparent);
  if (traceparent !== undefined) d.traceparent = traceparent;
  const endpointId = optStr(r.endpoint_id);
  if (endpointId !== undefined) d.endpointId = endpointId;
  return d;
}

function toEndpoint(r: Row): WebhookEndpointRecord {
  const e: WebhookEndpointRecord = {
    id: String(r.id),
    ownerId: decodeKey(String(r.owner_id)),
    url: String(r.url),
    events: JSON.parse(String(r.events)) as WebhookEndpointRecord['events'],
    secret: String(r.secret),
    createdAt: num(r.created_at),
    updatedAt: num(r.updated_at),
  };
  const description = optStr(r.description);
  if (description !== undefined) e.description = description;
  const previous = optStr(r.previous_secret);
  const expiresAt = optNum(r.previous_expires_at);
  if (previous !== undefined && expiresAt !== undefined) e.previousSecret = { key: previous, expiresAt };
  const disabledAt = optNum(r.disabled_at);
  if (disabledAt !== undefined) e.disabledAt = disabledAt;
  const failingSince = optNum(r.failing_since);
  if (failingSince !== undefined) e.failingSince = failingSince;
  return e;
}

/**
 * Candidates among the due deliveries to lease ($1 now, $2 limit, $5 per endpoint, $6 per owner): an endpoint's and an owner's
 * deliveries count on from those already leased (a leased delivery was due when taken, so the due index finds them
 * too), and owners take turns: everyone's first before anyone's second. Uses the existing indexes; no schema change.
 */
function fairChoice(s: string): string {
  return `WITH busy AS (
      SELECT owner_id, url, count(*) AS n FROM ${s}.webhook_deliveries
      WHERE state = 'pending' AND next_attempt_at <= $1 AND lease_expires_at > $1 GROUP BY owner_id, url),
    busy_owner AS (SELECT owner_id, sum(n) AS n FROM busy GROUP BY owner_id),
    due AS (
      SELECT d.id, d.owner_id, d.next_attempt_at, d.ord,
        row_number() OVER (PARTITION BY d.owner_id, d.url ORDER BY d.next_attempt_at, d.ord) + coalesce(b.n, 0) AS at_endpoint
      FROM ${s}.webhook_deliveries d LEFT JOIN busy b ON b.owner_id = d.owner_id AND b.url = d.url
      WHERE d.state = 'pending' AND d.next_attempt_at <= $1 AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= $1)),
    fair AS (
      SELECT due.id, due.next_attempt_at, due.ord,
        row_number() OVER (PARTITION BY due.owner_id ORDER BY due.next_attempt_at, due.ord) + coalesce(o.n, 0) AS at_owner
      FROM due LEFT JOIN busy_owner o ON o.owner_id = due.owner_id
      WHERE due.at_endpoint <= $5)
    SELECT id FROM fair WHERE at_owner <= $6 ORDER BY at_owner, next_attempt_at, ord LIMIT $2 * 4`;
}

/**
 * Webhook secrets and the delivery outbox on PostgreSQL (tables from migration 2; cursors are text since migration 3; a delivery's traceparent since 8). Claims use `FOR UPDATE SKIP LOCKED`
 * inside one UPDATE, so instances claiming at once each get different deliveries without waiting on each other; every
 * other change is one conditional statement.
 */
export class PostgresWebhookStore implements WebhookStore {
  private readonly db: PgDatabase;

  constructor(pool: Pool, options: { schema?: string } & PgStatementOptions = {}) {
    this.db = new PgDatabase(pool, options.schema ?? 'genservice', options);
  }

  async getSecrets(userId: string, now: number): Promise<WebhookSecrets | null> {
    const { rows } = await this.db.query(`SELECT current_key, previous_key, previous_expires_at FROM ${this.db.s}.webhook_secrets WHERE user_id = $1`, [
      encodeKey(userId),
    ]);
    const r = rows[0];
    if (!r) return null;
    const expires = optNum(r.previous_expires_at);
    return r.previous_key !== null && expires !== undefined && expires > now
      ? { current: String(r.current_key), previous: { key: String(r.previous_key), expiresAt: expires } }
      : { current: String(r.current_key) };
  }

  async ensureSecret(userId: string, candidate: string, _now: number): Promise<string> {
    const { rows } = await this.db.query(
      `WITH ins AS (INSERT INTO ${this.db.s}.webhook_secrets (user_id, current_key) VALUES ($1, $2) ON CONFLICT (user_id) DO NOTHING RETURNING current_key)
       SELECT current_key FROM ins UNION ALL SELECT current_key FROM ${this.db.s}.webhook_secrets WHERE user_id = $1 LIMIT 1`,
      [encodeKey(userId), candidate],
    );
    if (rows[0]) return String(rows[0].current_key);
    // The racing insert committed after this statement's snapshot: read it now.
    return (await this.getSecrets(userId, 0))!.current;
  }

  async rotateSecret(userId: string, newKey: string, now: number, overlapMs: number): Promise<WebhookSecrets> {
    await this.db.query(
      `INSERT INTO ${this.db.s}.webhook_secrets (user_id, current_key) VALUES ($1, $2)
       ON CONFLICT (user_id) DO UPDATE SET previous_key = ${this.db.s}.webhook_secrets.current_key,
         previous_expires_at = $3, current_key = EXCLUDED.current_key`,
      [encodeKey(userId), newKey, now + overlapMs],
    );
    return (await this.getSecrets(userId, now))!;
  }

  async addDeliveries(deliveries: NewDelivery[]): Promise<void> {
    if (deliveries.length === 0) return;
    const col = <T>(f: (d: NewDelivery) => T): T[] => deliveries.map(f);
    await this.db.query(
      `INSERT INTO ${this.db.s}.webhook_deliveries (id, generation_id, owner_id, seq, type, url, payload, next_attempt_at, created_at, traceparent, endpoint_id)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[], $10::text[], $11::text[])
       ON CONFLICT (id) DO NOTHING`,
      [
        col((d) => encodeKey(d.id)),
        col((d) => encodeKey(d.generationId)),
        col((d) => encodeKey(d.ownerId)),
        col((d) => d.seq),
        col((d) => d.type),
        col((d) => storableText(d.url)),
        col((d) => storableText(d.payload)),
        col((d) => d.nextAttemptAt),
        col((d) => d.createdAt),
        col((d) => d.traceparent ?? null),
        col((d) => d.endpointId ?? null),
      ],
    );
  }

  async claimDue(now: number, limit: number, workerId: string, leaseMs: number, fairness?: ClaimFairness): Promise<Delivery[]> {
    if (!(limit > 0)) return [];
    const s = this.db.s;
    if (fairness) {
      // Window functions cannot take FOR UPDATE: the fair choice reads a few times `limit` candidates (any subset of them
      // keeps within the caps), and the first `limit` of them not locked by a racing instance are taken in that order.
      const { rows } = await this.db.query(
        `WITH chosen AS (SELECT ARRAY(${fairChoice(s)}) AS ids)
         UPDATE ${s}.webhook_deliveries SET lease_owner = $3, lease_expires_at = $1 + $4::bigint
         WHERE id = ANY(ARRAY(
           SELECT d.id FROM ${s}.webhook_deliveries d, chosen
           WHERE d.id = ANY(chosen.ids) AND d.state = 'pending' AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= $1)
           ORDER BY array_position(chosen.ids, d.id) LIMIT $2 FOR UPDATE OF d SKIP LOCKED))
         RETURNING *`,
        [now, Math.floor(limit), encodeKey(workerId), leaseMs, fairness.perEndpoint, fairness.perOwner],
      );
      return rows.map(toDelivery).sort((a, b) => a.nextAttemptAt - b.nextAttemptAt);
    }
    const { rows } = await this.db.query(
      `UPDATE ${s}.webhook_deliveries SET lease_owner = $3, lease_expires_at = $1 + $4::bigint
       WHERE id = ANY(ARRAY(
         SELECT id FROM ${s}.webhook_deliveries
         WHERE state = 'pending' AND next_attempt_at <= $1 AND (lease_expires_at IS NULL OR lease_expires_at <= $1)
         ORDER BY next_attempt_at, ord LIMIT $2 FOR UPDATE SKIP LOCKED))
         AND state = 'pending' AND (lease_expires_at IS NULL OR lease_expires_at <= $1)
       RETURNING *`,
      [now, Math.floor(limit), encodeKey(workerId), leaseMs],
    );
    return rows.map(toDelivery).sort((a, b) => a.nextAttemptAt - b.nextAttemptAt);
  }

  async recordAttempt(id: string, workerId: string, attempt: DeliveryAttempt, outcome: DeliveryOutcome): Promise<boolean> {
    const s = this.db.s;
    const { rows } = await this.db.query<{ n: number }>(
      `WITH u AS (
         UPDATE ${s}.webhook_deliveries
         SET attempts = attempts + 1, state = $4, next_attempt_at = coalesce($5::bigint, next_attempt_at),
             lease_owner = NULL, lease_expires_at = NULL
         WHERE id = $1 AND state = 'pending' AND lease_owner = $2 AND lease_expires_at > $3
         RETURNING id, attempts),
       a AS (INSERT INTO ${s}.webhook_attempts (delivery_id, n, at, status, error, duration_ms)
         SELECT id, attempts, $3, $6, $7, $8 FROM u)
       SELECT count(*)::int AS n FROM u`,
      [
        encodeKey(id),
        encodeKey(workerId),
        attempt.at,
        outcome.state,
        outcome.state === 'pending' ? (outcome.nextAttemptAt ?? null) : null,
        attempt.status ?? null,
        attempt.error === undefined ? null : storableText(attempt.error),
        Math.max(0, Math.round(attempt.durationMs)),
      ],
    );
    return rows[0]!.n === 1;
  }

  async stopEndpoint(ownerId: string, url: string): Promise<number> {
    const res = await this.db.query(`UPDATE ${this.db.s}.webhook_deliveries SET state = 'gone' WHERE owner_id = $1 AND url = $2 AND state = 'pending'`, [
      encodeKey(ownerId),
      storableText(url),
    ]);
    return res.rowCount ?? 0;
  }

  async deliveriesOf(generationId: string): Promise<DeliveryWithAttempts[]> {
    const s = this.db.s;
    const { rows } = await this.db.query(`SELECT * FROM ${s}.webhook_deliveries WHERE generation_id = $1 ORDER BY seq, ord`, [encodeKey(generationId)]);
    return this.withAttempts(rows);
  }

  private async withAttempts(rows: Row[]): Promise<DeliveryWithAttempts[]> {
    const s = this.db.s;
    if (rows.length === 0) return [];
    const { rows: attempts } = await this.db.query(
      `SELECT * FROM ${s}.webhook_attempts WHERE delivery_id = ANY($1::text[]) ORDER BY delivery_id, n`,
      [rows.map((r) => r.id)],
    );
    const byDelivery = new Map<string, DeliveryAttempt[]>();
    for (const a of attempts) {
      const list = byDelivery.get(String(a.delivery_id)) ?? [];
      const entry: DeliveryAttempt = { at: num(a.at), durationMs: num(a.duration_ms) };
      if (a.status !== null) entry.status = num(a.status);
      if (a.error !== null) entry.error = String(a.error);
      list.push(entry);
      byDelivery.set(String(a.delivery_id), list);
    }
    return rows.map((r) => ({ ...toDelivery(r), history: byDelivery.get(String(r.id)) ?? [] }));
  }

  async getCursor(name: string): Promise<string> {
    const { rows } = await this.db.query(`SELECT value FROM ${this.db.s}.cursors WHERE name = $1`, [encodeKey(name)]);
    return rows[0] ? String(rows[0].value) : '';
  }

  async advanceCursor(name: string, from: string, to: string): Promise<boolean> {
    const s = this.db.s;
    const moved = await this.db.query(`UPDATE ${s}.cursors SET value = $3 WHERE name = $1 AND value = $2`, [encodeKey(name), from, to]);
    if (moved.rowCount === 1) return true;
    if (from !== '') return false;
    // Never set: it reads '', so a move from '' creates it (one of racing creators wins).
    const made = await this.db.query(`INSERT INTO ${s}.cursors (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, [encodeKey(name), to]);
    return made.rowCount === 1;
  }

  async deleteForGenerations(generationIds: string[]): Promise<number> {
    if (generationIds.length === 0) return 0;
    const s = this.db.s;
    const { rows } = await this.db.query<{ n: number }>(
      `WITH gone AS (DELETE FROM ${s}.webhook_deliveries WHERE generation_id = ANY($1::text[]) RETURNING id),
       a AS (DELETE FROM ${s}.webhook_attempts WHERE delivery_id = ANY(ARRAY(SELECT id FROM gone)))
       SELECT count(*)::int AS n FROM gone`,
      [generationIds.map(encodeKey)],
    );
    return rows[0]!.n;
  }

  async createEndpoint(e: WebhookEndpointRecord): Promise<void> {
    await this.db.query(
      `INSERT INTO ${this.db.s}.webhook_endpoints
         (id, owner_id, url, events, description, secret, previous_secret, previous_expires_at, created_at, updated_at, disabled_at, failing_since)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
      [
        e.id,
        encodeKey(e.ownerId),
        storableText(e.url),
        JSON.stringify(e.events),
        storableText(e.description),
        e.secret,
        e.previousSecret?.key ?? null,
        e.previousSecret?.expiresAt ?? null,
        e.createdAt,
        e.updatedAt,
        e.disabledAt ?? null,
        e.failingSince ?? null,
      ],
    );
  }

  async getEndpoint(id: string, ownerId: string): Promise<WebhookEndpointRecord | null> {
    const { rows } = await this.db.query(`SELECT * FROM ${this.db.s}.webhook_endpoints WHERE id = $1 AND owner_id = $2`, [id, encodeKey(ownerId)]);
    return rows[0] ? toEndpoint(rows[0]) : null;
  }

  async listEndpoints(ownerId: string): Promise<WebhookEndpointRecord[]> {
    const { rows } = await this.db.query(`SELECT * FROM ${this.db.s}.webhook_endpoints WHERE owner_id = $1 ORDER BY created_at, ord`, [encodeKey(ownerId)]);
    return rows.map(toEndpoint);
  }

  /** One statement: the fields given ($3-$8 null when not), and a disable that ends the pending deliveries with it. */
  async updateEndpoint(id: string, ownerId: string, change: WebhookEndpointChange): Promise<WebhookEndpointRecord | null> {
    const s = this.db.s;
    const { rows } = await this.db.query(
      `WITH before AS (SELECT id, disabled_at FROM ${s}.webhook_endpoints WHERE id = $1 AND owner_id = $2 FOR UPDATE),
       u AS (
         UPDATE ${s}.webhook_endpoints e SET
           url = coalesce($3, e.url),
           events = coalesce($4, e.events),
           description = CASE WHEN $5::boolean THEN $6 ELSE e.description END,
           disabled_at = CASE WHEN $7::boolean THEN NULL WHEN e.disabled_at IS NULL THEN coalesce($8::bigint, NULL) ELSE e.disabled_at END,
           failing_since = CASE WHEN $7::boolean THEN NULL ELSE e.failing_since END,
           updated_at = $9
         FROM before WHERE e.id = before.id
         RETURNING e.*, before.disabled_at AS was_disabled_at),
       ended AS (
         UPDATE ${s}.webhook_deliveries d SET state = 'failed' FROM u
         WHERE d.endpoint_id = u.id AND d.state = 'pending' AND u.was_disabled_at IS NULL AND u.disabled_at IS NOT NULL)
       SELECT * FROM u`,
      [
        id,
        encodeKey(ownerId),
        change.url === undefined ? null : storableText(change.url),
        change.events === undefined ? null : JSON.stringify(change.events),
        change.description !== undefined,
        change.description === undefined || change.description === null ? null : storableText(change.description),
        change.disabledAt === null,
        typeof change.disabledAt === 'number' ? change.disabledAt : null,
        change.updatedAt,
      ],
    );
    return rows[0] ? toEndpoint(rows[0]) : null;
  }

  async deleteEndpoint(id: string, ownerId: string): Promise<boolean> {
    const s = this.db.s;
    const { rows } = await this.db.query<{ n: number }>(
      `WITH gone AS (DELETE FROM ${s}.webhook_endpoints WHERE id = $1 AND owner_id = $2 RETURNING id),
       ended AS (UPDATE ${s}.webhook_deliveries d SET state = 'gone' FROM gone WHERE d.endpoint_id = gone.id AND d.state = 'pending')
       SELECT count(*)::int AS n FROM gone`,
      [id, encodeKey(ownerId)],
    );
    return rows[0]!.n === 1;
  }

  async rotateEndpointSecret(id: string, ownerId: string, newKey: string, now: number, overlapMs: number): Promise<WebhookEndpointRecord | null> {
    const { rows } = await this.db.query(
      `UPDATE ${this.db.s}.webhook_endpoints SET previous_secret = secret, previous_expires_at = $3, secret = $4, updated_at = $5
       WHERE id = $1 AND owner_id = $2 RETURNING *`,
      [id, encodeKey(ownerId), now + overlapMs, newKey, now],
    );
    return rows[0] ? toEndpoint(rows[0]) : null;
  }

  async noteEndpointAttempt(id: string, ok: boolean, at: number): Promise<number | null> {
    const { rows } = await this.db.query(
      `UPDATE ${this.db.s}.webhook_endpoints SET failing_since = CASE WHEN $2::boolean THEN NULL ELSE coalesce(failing_since, $3) END
       WHERE id = $1 AND disabled_at IS NULL RETURNING failing_since`,
      [id, ok, at],
    );
    return rows[0] ? (optNum(rows[0].failing_since) ?? null) : null;
  }

  async disableEndpoint(id: string, at: number): Promise<boolean> {
    const s = this.db.s;
    const { rows } = await this.db.query<{ n: number }>(
      `WITH u AS (UPDATE ${s}.webhook_endpoints SET disabled_at = $2, updated_at = $2 WHERE id = $1 AND disabled_at IS NULL RETURNING id),
       ended AS (UPDATE ${s}.webhook_deliveries d SET state = 'failed' FROM u WHERE d.endpoint_id = u.id AND d.state = 'pending')
       SELECT count(*)::int AS n FROM u`,
      [id, at],
    );
    return rows[0]!.n === 1;
  }

  async endpointDeliveries(endpointId: string, ownerId: string, limit: number): Promise<DeliveryWithAttempts[]> {
    const { rows } = await this.db.query(
      `SELECT * FROM ${this.db.s}.webhook_deliveries WHERE endpoint_id = $1 AND owner_id = $2 ORDER BY created_at DESC, ord DESC LIMIT $3`,
      [endpointId, encodeKey(ownerId), Math.max(0, Math.floor(limit))],
    );
    return this.withAttempts(rows);
  }

  /** Row-locked, so a replay and a claim of the same delivery are ordered: the replay sees the lease, or the claim the replay. */
  async replayDelivery(id: string, endpointId: string, now: number): Promise<Delivery | 'busy' | null> {
    const s = this.db.s;
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query(`SELECT endpoint_id, lease_expires_at FROM ${s}.webhook_deliveries WHERE id = $1 FOR UPDATE`, [encodeKey(id)]);
      const r = rows[0];
      if (!r || r.endpoint_id !== endpointId) return null;
      const lease = optNum(r.lease_expires_at);
      if (lease !== undefined && lease > now) return 'busy';
      const { rows: updated } = await tx.query(
        `UPDATE ${s}.webhook_deliveries SET state = 'pending', next_attempt_at = $2, lease_owner = NULL, lease_expires_at = NULL WHERE id = $1 RETURNING *`,
        [encodeKey(id), now],
      );
      return toDelivery(updated[0]!);
    });
  }
}
