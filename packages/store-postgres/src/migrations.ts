import type { Pool } from 'pg';
import { PgDatabase } from './db.js';
import type { Queryable } from './db.js';

export interface Migration {
  version: number;
  name: string;
  /** Statements for a schema, given quoted (`"genservice"`). Additive only: a migration never drops data. */
  up(s: string): string[];
}

/**
 * Every instance takes this transaction-scoped advisory lock before looking at `schema_migrations`, so instances
 * that start together apply each migration once, in order, and the losers see the winners' work. Constant (not
 * per schema) so even `CREATE SCHEMA IF NOT EXISTS` - which races on its own - runs under it.
 */
export const MIGRATION_LOCK_KEY = 7_340_512_846_113_201;

/** Migration 3: each delivery's old id, its event's number within the generation, and the id the outbox now gives it. */
function deliveryIds(s: string): string {
  return `SELECT d.id AS old_id, e.seq, 'msg_' || left(translate(encode(sha256(convert_to(
      d.generation_id || chr(10) || e.seq || chr(10) || d.url, 'UTF8')), 'base64'), '+/', '-_'), 24) AS new_id
    FROM ${s}.webhook_deliveries d JOIN ${s}.events e ON e.generation_id = d.generation_id AND e.pos = d.seq`;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'generations, ledger, api keys, idempotency',
    up: (s) => [
      `CREATE TABLE ${s}.generations (
        id text PRIMARY KEY,
        owner_id text NOT NULL,
        model_id text NOT NULL,
        settings json NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'processing', 'completed', 'failed')),
        reserved numeric NOT NULL,
        price numeric,
        result_text text,
        result_key text,
        failure_reason text,
        attempts integer NOT NULL DEFAULT 0,
        lease_owner text,
        lease_expires_at bigint,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        finished_at bigint
      )`,
      // Recovery scans unfinished work oldest first; the partial index stays as small as the backlog.
      `CREATE INDEX generations_unfinished_idx ON ${s}.generations (created_at, id)
        WHERE status IN ('pending', 'processing')`,
      // Retention sweeps finished work by age.
      `CREATE INDEX generations_finished_idx ON ${s}.generations (finished_at)
        WHERE status IN ('completed', 'failed')`,
      `CREATE TABLE ${s}.accounts (
        user_id text PRIMARY KEY,
        balance numeric NOT NULL DEFAULT 0 CHECK (balance >= 0),
        reserved numeric NOT NULL DEFAULT 0 CHECK (reserved >= 0),
        settled numeric NOT NULL DEFAULT 0 CHECK (settled >= 0)
      )`,
      `CREATE TABLE ${s}.reserves (
        generation_id text PRIMARY KEY,
        user_id text NOT NULL,
        amount numeric NOT NULL CHECK (amount >= 0),
        state text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'settled')),
        charged numeric CHECK (charged >= 0 AND charged <= amount),
        created_at bigint NOT NULL,
        settled_at bigint
      )`,
      `CREATE INDEX reserves_open_idx ON ${s}.reserves (created_at, generation_id) WHERE state = 'open'`,
      `CREATE TABLE ${s}.api_keys (
        key_hash text PRIMARY KEY,
        user_id text NOT NULL,
        created_at bigint NOT NULL
      )`,
      `CREATE TABLE ${s}.idempotency_keys (
        user_id text NOT NULL,
        key text NOT NULL,
        request_hash text NOT NULL,
        generation_id text,
        created_at bigint NOT NULL,
        PRIMARY KEY (user_id, key)
      )`,
      `CREATE INDEX idempotency_keys_created_idx ON ${s}.idempotency_keys (created_at)`,
    ],
  },
  {
    version: 2,
    name: 'event log, list indexes, failure reasons, progress, metadata, remote jobs, webhooks, idempotency takeover',
    up: (s) => [
      `ALTER TABLE ${s}.generations
        ADD COLUMN metadata jsonb,
        ADD COLUMN error_code text,
        ADD COLUMN error_message text,
        ADD COLUMN progress_fraction double precision,
        ADD COLUMN progress_message text,
        ADD COLUMN started_at bigint,
        ADD COLUMN webhook jsonb,
        ADD COLUMN remote_handle jsonb,
        ADD COLUMN parked_until bigint,
        ADD COLUMN claim_resumed boolean NOT NULL DEFAULT false`,
      // seq: a sequence never hands out a number twice, also after its rows are deleted.
      `CREATE TABLE ${s}.events (
        seq bigserial PRIMARY KEY,
        generation_id text NOT NULL,
        owner_id text NOT NULL,
        type text NOT NULL,
        at bigint NOT NULL,
        data jsonb NOT NULL
      )`,
      `CREATE INDEX events_generation_idx ON ${s}.events (generation_id, seq)`,
      // A user's list, newest first, with or without a filter: each an index the keyset cursor walks.
      `CREATE INDEX generations_owner_idx ON ${s}.generations (owner_id, created_at DESC, id DESC)`,
      `CREATE INDEX generations_owner_status_idx ON ${s}.generations (owner_id, status, created_at DESC, id DESC)`,
      `CREATE INDEX generations_owner_model_idx ON ${s}.generations (owner_id, model_id, created_at DESC, id DESC)`,
      // Unfinished records without a generation are what crashed creates left: they only ever answered 409.
      `DELETE FROM ${s}.idempotency_keys WHERE generation_id IS NULL`,
      `ALTER TABLE ${s}.idempotency_keys ADD COLUMN done boolean NOT NULL DEFAULT false, ADD COLUMN started_at bigint`,
      `UPDATE ${s}.idempotency_keys SET done = true, started_at = created_at`,
      `CREATE TABLE ${s}.webhook_secrets (
        user_id text PRIMARY KEY,
        current_key text NOT NULL,
        previous_key text,
        previous_expires_at bigint
      )`,
      `CREATE TABLE ${s}.webhook_deliveries (
        id text PRIMARY KEY,
        generation_id text NOT NULL,
        owner_id text NOT NULL,
        seq bigint NOT NULL,
        type text NOT NULL,
        url text NOT NULL,
        payload text NOT NULL,
        state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed', 'gone')),
        attempts integer NOT NULL DEFAULT 0,
        next_attempt_at bigint NOT NULL,
        lease_owner text,
        lease_expires_at bigint,
        created_at bigint NOT NULL,
        ord bigserial
      )`,
      `CREATE INDEX webhook_deliveries_due_idx ON ${s}.webhook_deliveries (next_attempt_at, ord) WHERE state = 'pending'`,
      `CREATE INDEX webhook_deliveries_generation_idx ON ${s}.webhook_deliveries (generation_id, seq)`,
      `CREATE INDEX webhook_deliveries_endpoint_idx ON ${s}.webhook_deliveries (owner_id, url) WHERE state = 'pending'`,
      `CREATE TABLE ${s}.webhook_attempts (
        delivery_id text NOT NULL,
        n integer NOT NULL,
        at bigint NOT NULL,
        status integer,
        error text,
        duration_ms integer NOT NULL,
        PRIMARY KEY (delivery_id, n)
      )`,
      `CREATE TABLE ${s}.cursors (name text PRIMARY KEY, value bigint NOT NULL)`,
    ],
  },
  {
    version: 3,
    name: 'per-generation event numbers, a feed without a global lock, claims, unfinished = finished_at IS NULL',
    up: (s) => [
      `ALTER TABLE ${s}.generations RENAME COLUMN attempts TO claims`,
      // Each generation numbers its own events from this counter, so appending one locks only its row.
      `ALTER TABLE ${s}.generations ADD COLUMN last_seq integer NOT NULL DEFAULT 0`,
      // The feed position of its last event: the next one never sorts before it (see updateSql).
      `ALTER TABLE ${s}.generations ADD COLUMN last_tx xid8 NOT NULL DEFAULT '0'`,
      // The old global number becomes the feed position (same order); seq becomes the number within the generation.
      `ALTER TABLE ${s}.events RENAME COLUMN seq TO pos`,
      `ALTER TABLE ${s}.events ADD COLUMN seq integer`,
      `UPDATE ${s}.events e SET seq = n.seq
        FROM (SELECT pos, row_number() OVER (PARTITION BY generation_id ORDER BY pos) AS seq FROM ${s}.events) n
        WHERE e.pos = n.pos`,
      `ALTER TABLE ${s}.events ALTER COLUMN seq SET NOT NULL`,
      `UPDATE ${s}.generations g SET last_seq = c.n
        FROM (SELECT generation_id, max(seq) AS n FROM ${s}.events GROUP BY generation_id) c WHERE g.id = c.generation_id`,
      // Every event carries the transaction that wrote it; the existing ones all get this migration's, and readers
      // read only below the oldest running transaction (see generationSql().readFeed).
      `ALTER TABLE ${s}.events ADD COLUMN tx xid8 NOT NULL DEFAULT pg_current_xact_id()`,
      `ALTER TABLE ${s}.events DROP CONSTRAINT events_pkey`,
      `ALTER TABLE ${s}.events ADD PRIMARY KEY (generation_id, seq)`,
      `DROP INDEX ${s}.events_generation_idx`,
      `CREATE INDEX events_feed_idx ON ${s}.events (tx, pos)`,
      // A delivery names its event by the generation's number now, and its id is derived from that number as the
      // outbox derives it (sha256 of "generation \n seq \n url", base64url, 24 characters): an id left from the old
      // numbering could equal the id of a later event of the same generation, which would then never be delivered.
      // Keys dropped while they are rewritten: a new id may equal another row's old one until both are rewritten.
      `ALTER TABLE ${s}.webhook_attempts DROP CONSTRAINT webhook_attempts_pkey`,
      `ALTER TABLE ${s}.webhook_deliveries DROP CONSTRAINT webhook_deliveries_pkey`,
      `UPDATE ${s}.webhook_attempts a SET delivery_id = m.new_id FROM (${deliveryIds(s)}) m WHERE a.delivery_id = m.old_id`,
      `UPDATE ${s}.webhook_deliveries d SET id = m.new_id, seq = m.seq FROM (${deliveryIds(s)}) m WHERE d.id = m.old_id`,
      `ALTER TABLE ${s}.webhook_attempts ADD PRIMARY KEY (delivery_id, n)`,
      `ALTER TABLE ${s}.webhook_deliveries ADD PRIMARY KEY (id)`,
      // A cursor was the last global number read; it is now "<tx>:<pos>", and every old event has this tx.
      `ALTER TABLE ${s}.cursors ALTER COLUMN value TYPE text USING (pg_current_xact_id()::text || ':' || value::text)`,
      // "Unfinished" is finished_at IS NULL: the store's statements name no status.
      `DROP INDEX ${s}.generations_unfinished_idx`,
      `CREATE INDEX generations_unfinished_idx ON ${s}.generations (created_at, id) WHERE finished_at IS NULL`,
      `DROP INDEX ${s}.generations_finished_idx`,
      `CREATE INDEX generations_finished_idx ON ${s}.generations (finished_at) WHERE finished_at IS NOT NULL`,
      `CREATE INDEX generations_owner_unfinished_idx ON ${s}.generations (owner_id) WHERE finished_at IS NULL`,
    ],
  },
  // Version 3 is the generation store's rewrite (issue 22); this one touches only keys and the ledger.
  {
    version: 4,
    name: 'keys as objects, key budgets, usage rollup, audit log',
    up: (s) => [
      // scopes and models are JSON in text (not jsonb): jsonb refuses \u0000, which JSON text carries escaped.
      // Keys of earlier versions may do everything, as they could before.
      `ALTER TABLE ${s}.api_keys
        ADD COLUMN key_id text,
        ADD COLUMN name text NOT NULL DEFAULT 'default',
        ADD COLUMN scopes text NOT NULL DEFAULT '["generate","read"]',
        ADD COLUMN models text,
        ADD COLUMN budget_amount numeric,
        ADD COLUMN budget_period text CHECK (budget_period IN ('day', 'month')),
        ADD COLUMN expires_at bigint,
        ADD COLUMN last_used_at bigint,
        ADD COLUMN ord bigserial`,
      `UPDATE ${s}.api_keys SET key_id = 'key_' || replace(gen_random_uuid()::text, '-', '') WHERE key_id IS NULL`,
      `ALTER TABLE ${s}.api_keys ALTER COLUMN key_id SET NOT NULL`,
      `CREATE UNIQUE INDEX api_keys_key_id_idx ON ${s}.api_keys (key_id)`,
      `CREATE INDEX api_keys_user_idx ON ${s}.api_keys (user_id, created_at, ord)`,
      // What a reserve was for (usage) and the key window it holds spend in (given back at settle).
      `ALTER TABLE ${s}.reserves ADD COLUMN model_id text, ADD COLUMN key_id text, ADD COLUMN window_start bigint`,
      // Held plus charged per key and budget window; the reserve's upsert ... WHERE spent + amount <= limit is the check.
      `CREATE TABLE ${s}.key_spend (
        key_id text NOT NULL,
        window_start bigint NOT NULL,
        spent numeric NOT NULL,
        PRIMARY KEY (key_id, window_start)
      )`,
      // Settled spend per user, UTC day (days since the epoch), model and key ('' for none), written by settle:
      // usage reads at most days x models x keys rows, however many generations there were.
      `CREATE TABLE ${s}.usage_daily (
        user_id text NOT NULL,
        day integer NOT NULL,
        model_id text NOT NULL,
        key_id text NOT NULL,
        count bigint NOT NULL,
        tokens numeric NOT NULL,
        PRIMARY KEY (user_id, day, model_id, key_id)
      )`,
      // Earlier versions' settled reserves, so the report starts complete.
      `INSERT INTO ${s}.usage_daily (user_id, day, model_id, key_id, count, tokens)
        SELECT user_id, (settled_at / 86400000)::integer, '', '', count(*), sum(charged)
          FROM ${s}.reserves WHERE state = 'settled' AND settled_at IS NOT NULL
         GROUP BY user_id, (settled_at / 86400000)::integer`,
      // Every admin action, newest first by seq. Text, not jsonb, for details: jsonb refuses \u0000.
      `CREATE TABLE ${s}.audit_log (
        seq bigserial PRIMARY KEY,
        at bigint NOT NULL,
        actor text NOT NULL,
        action text NOT NULL,
        user_id text,
        key_id text,
        details text
      )`,
    ],
  },
  {
    version: 5,
    name: 'a shorter life asked for at create (expiresAfterSeconds) and when it ends',
    up: (s) => [
      // Both nullable: rows of earlier versions asked for no life of their own (the service's retention decides).
      // expires_after_seconds is as asked at create and never changes; life_ends_at (epoch ms) is written when it finishes.
      `ALTER TABLE ${s}.generations ADD COLUMN expires_after_seconds integer, ADD COLUMN life_ends_at bigint`,
      // Partial: the sweep walks only rows with a life of their own, the soonest ended first.
      `CREATE INDEX generations_life_ends_idx ON ${s}.generations (life_ends_at, id) WHERE life_ends_at IS NOT NULL`,
    ],
  },
  {
    version: 6,
    name: 'the create trace context of a generation',
    up: (s) => [`ALTER TABLE ${s}.generations ADD COLUMN traceparent text`],
  },
  {
    version: 7,
    name: 'batches, the model that served a generation',
    up: (s) => [
      // A batch: the generations one POST /v1/batches created. Its counts and price are read from its generations.
      // generation_ids is a JSON array in text (the request's order).
      `CREATE TABLE ${s}.batches (
        id text PRIMARY KEY,
        owner_id text NOT NULL,
        generation_ids text NOT NULL,
        webhook_url text,
        created_at bigint NOT NULL,
        completed_at bigint
      )`,
      // served_model_id is set only when a fallback model produced the result.
      `ALTER TABLE ${s}.generations ADD COLUMN batch_id text, ADD COLUMN served_model_id text`,
      // A batch's counts and its paged list; only batch generations are in it.
      `CREATE INDEX generations_batch_idx ON ${s}.generations (batch_id, created_at DESC, id DESC) WHERE batch_id IS NOT NULL`,
    ],
  },
  {
    version: 8,
    name: 'the trace context of a webhook delivery',
    // Its generation's create traceparent, so the delivery continues that trace; NULL for rows of earlier versions.
    up: (s) => [`ALTER TABLE ${s}.webhook_deliveries ADD COLUMN traceparent text`],
  },
  {
    version: 9,
    name: 'open batches, for the sweep that completes them after a crash',
    // Partial: only batches not completed yet are in it, oldest first, so the sweep never reads a completed one.
    up: (s) => [`CREATE INDEX batches_open_idx ON ${s}.batches (created_at, id) WHERE completed_at IS NULL`],
  },
  {
    version: 10,
    name: 'revoked keys are kept, so that no later add brings one back',
    // A revoke sets revoked_at instead of deleting the row: the digest stays known, and adding the key again (a host
    // seeding its users file at every start) finds it and changes nothing. Keys revoked before this version were
    // deleted, and are unknown.
    up: (s) => [`ALTER TABLE ${s}.api_keys ADD COLUMN revoked_at bigint`],
  },
  {
    version: 11,
    name: 'the in-flight count on the account row; usage over spans of days; webhooks in use',
    // Issue 36: a reserve checks the in-flight cap on the account row it debits (one statement), instead of the
    // insert counting the owner's unfinished generations under a lock. in_flight is the user's open reserves; it is
    // filled here from the reserves table. Every instance must run this release: an older one's settle would not
    // lower the count.
    up: (s) => [
      `ALTER TABLE ${s}.accounts ADD COLUMN in_flight bigint NOT NULL DEFAULT 0`,
      `UPDATE ${s}.accounts a SET in_flight = o.n
        FROM (SELECT user_id, count(*) AS n FROM ${s}.reserves WHERE state = 'open' GROUP BY user_id) o
        WHERE a.user_id = o.user_id`,
      // Issue 36 too: the outbox is written from the log only once webhooks are in use (core's WebhookUse, a named
      // cursor). A database that already holds a generation with a webhook, or a delivery, is in use.
      // And the usage rollup over aligned spans of 8 and 64 days (core's USAGE_SPANS), beside usage_daily: a report by
      // model or key over a long range reads a few spans and the days at its ends. Filled from usage_daily.
      `CREATE TABLE ${s}.usage_spans (
        user_id text NOT NULL,
        span integer NOT NULL,
        start integer NOT NULL,
        model_id text NOT NULL,
        key_id text NOT NULL,
        count bigint NOT NULL,
        tokens numeric NOT NULL,
        PRIMARY KEY (user_id, span, start, model_id, key_id)
      )`,
      `INSERT INTO ${s}.usage_spans (user_id, span, start, model_id, key_id, count, tokens)
        SELECT d.user_id, sp.span, d.day - d.day % sp.span, d.model_id, d.key_id, sum(d.count), sum(d.tokens)
          FROM ${s}.usage_daily d, (VALUES (8), (64)) AS sp(span)
         GROUP BY 1, 2, 3, 4, 5`,
      `INSERT INTO ${s}.cursors (name, value)
        SELECT 'webhooks.in-use', '1'
        WHERE EXISTS (SELECT 1 FROM ${s}.webhook_deliveries) OR EXISTS (SELECT 1 FROM ${s}.generations WHERE webhook IS NOT NULL)
        ON CONFLICT (name) DO NOTHING`,
    ],
  },
  {
    version: 12,
    name: 'organisations: members, limits, what their reserves hold, usage by member; in-flight caps of keys',
    up: (s) => [
      // in_flight counts the members' open reserves (held at reserve, given back at settle) and spent what its
      // budget's window (spent_window: the day's or month's start, 0 for 'total') holds plus what it charged, on the
      // one row a reserve locks: a reserve and a settle take it after the account and the key, so they never wait on
      // each other in opposite orders. budget_period is 'day', 'month' or 'total'.
      `CREATE TABLE ${s}.organizations (
        id text PRIMARY KEY,
        budget_amount numeric CHECK (budget_amount > 0),
        budget_period text CHECK (budget_period IN ('day', 'month', 'total')),
        max_in_flight integer CHECK (max_in_flight > 0),
        weight integer NOT NULL DEFAULT 1 CHECK (weight > 0),
        in_flight integer NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
        spent numeric NOT NULL DEFAULT 0,
        spent_window bigint NOT NULL DEFAULT 0,
        created_at bigint NOT NULL
      )`,
      // One organisation per user: the user id is the key.
      `CREATE TABLE ${s}.organization_members (
        user_id text PRIMARY KEY,
        organization_id text NOT NULL REFERENCES ${s}.organizations (id),
        role text NOT NULL CHECK (role IN ('member', 'admin')),
        joined_at bigint NOT NULL
      )`,
      `CREATE INDEX organization_members_org_idx ON ${s}.organization_members (organization_id, joined_at, user_id)`,
      // Settled spend of the reserves held under an organisation, per UTC day and member, written by settle.
      `CREATE TABLE ${s}.organization_usage_daily (
        organization_id text NOT NULL,
        day integer NOT NULL,
        user_id text NOT NULL,
        count bigint NOT NULL,
        tokens numeric NOT NULL,
        PRIMARY KEY (organization_id, day, user_id)
      )`,
      // The organisation a reserve was held under and its budget window: its settle gives back there.
      `ALTER TABLE ${s}.reserves ADD COLUMN organization_id text, ADD COLUMN organization_window bigint`,
      // A key may cap its generations in flight: key_in_flight counts them (taken after key_spend, before the
      // organisation), and a reserve counted there says so, so its settle gives the slot back.
      `ALTER TABLE ${s}.api_keys ADD COLUMN max_in_flight integer CHECK (max_in_flight > 0)`,
      `CREATE TABLE ${s}.key_in_flight (
        key_id text PRIMARY KEY,
        in_flight integer NOT NULL CHECK (in_flight >= 0)
      )`,
      `ALTER TABLE ${s}.reserves ADD COLUMN key_in_flight boolean NOT NULL DEFAULT false`,
    ],
  },
  {
    version: 13,
    name: 'webhook endpoints as objects, and the endpoint of a delivery',
    up: (s) => [
      // events is a JSON array in text. failing_since is the first failed attempt since the last success (NULL while
      // healthy); disabled_at is set when it failed for too long or its owner disabled it.
      `CREATE TABLE ${s}.webhook_endpoints (
        id text PRIMARY KEY,
        owner_id text NOT NULL,
        url text NOT NULL,
        events text NOT NULL,
        description text,
        secret text NOT NULL,
        previous_secret text,
        previous_expires_at bigint,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        disabled_at bigint,
        failing_since bigint,
        ord bigserial
      )`,
      `CREATE INDEX webhook_endpoints_owner_idx ON ${s}.webhook_endpoints (owner_id, created_at, ord)`,
      // NULL for every receiver that is not a registered endpoint (a create's webhook, a host's default endpoint).
      `ALTER TABLE ${s}.webhook_deliveries ADD COLUMN endpoint_id text`,
      `CREATE INDEX webhook_deliveries_registered_idx ON ${s}.webhook_deliveries (endpoint_id, created_at DESC, ord DESC) WHERE endpoint_id IS NOT NULL`,
    ],
  },
  {
    version: 14,
    name: "provider lanes' shared counters (slots in flight, requests of the last minute, pauses); a create's priority and deadline",
    // One function decides an ask under the lane row's lock (one round trip): racing asks of a lane queue on it.
    up: (s) => [
      `CREATE TABLE ${s}.capacity_lanes (lane text PRIMARY KEY, paused_until bigint NOT NULL DEFAULT 0)`,
      `CREATE TABLE ${s}.capacity_permits (
        lane text NOT NULL,
        permit_id text NOT NULL,
        expires_at bigint NOT NULL,
        PRIMARY KEY (lane, permit_id)
      )`,
      `CREATE TABLE ${s}.capacity_requests (lane text NOT NULL, at bigint NOT NULL, units double precision NOT NULL, permit_id text NOT NULL)`,
      `CREATE INDEX capacity_requests_lane_at_idx ON ${s}.capacity_requests (lane, at)`,
      // A create's priority and a low one's deadline; NULL for rows of earlier versions (normal, no deadline).
      `ALTER TABLE ${s}.generations ADD COLUMN priority text, ADD COLUMN deadline_at bigint`,
      `CREATE FUNCTION ${s}.capacity_acquire(p_lane text, p_concurrency integer, p_rpm integer, p_upm double precision,
          p_permit text, p_units double precision, p_now bigint, p_hold_ms bigint, p_window_ms bigint,
          OUT granted boolean, OUT retry_after_ms bigint) LANGUAGE plpgsql AS $fn$
        DECLARE
          v_paused bigint;
          v_held integer;
          v_n integer;
          v_units double precision;
          v_oldest bigint;
        BEGIN
          INSERT INTO ${s}.capacity_lanes (lane) VALUES (p_lane) ON CONFLICT (lane) DO NOTHING;
          SELECT paused_until INTO v_paused FROM ${s}.capacity_lanes WHERE lane = p_lane FOR UPDATE;
          IF v_paused > p_now THEN
            granted := false; retry_after_ms := v_paused - p_now; RETURN;
          END IF;
          DELETE FROM ${s}.capacity_permits WHERE lane = p_lane AND expires_at <= p_now;
          IF p_concurrency IS NOT NULL THEN
            SELECT count(*) INTO v_held FROM ${s}.capacity_permits WHERE lane = p_lane AND permit_id <> p_permit;
            IF v_held >= p_concurrency THEN
              granted := false; retry_after_ms := NULL; RETURN;
            END IF;
          END IF;
          DELETE FROM ${s}.capacity_requests WHERE lane = p_lane AND at <= p_now - p_window_ms;
          SELECT count(*), coalesce(sum(units), 0), min(at) INTO v_n, v_units, v_oldest FROM ${s}.capacity_requests WHERE lane = p_lane;
          IF (p_rpm IS NOT NULL AND v_n >= p_rpm) OR (p_upm IS NOT NULL AND v_units > 0 AND v_units + p_units > p_upm) THEN
            granted := false; retry_after_ms := v_oldest + p_window_ms - p_now; RETURN;
          END IF;
          INSERT INTO ${s}.capacity_permits (lane, permit_id, expires_at) VALUES (p_lane, p_permit, p_now + p_hold_ms)
            ON CONFLICT (lane, permit_id) DO UPDATE SET expires_at = excluded.expires_at;
          INSERT INTO ${s}.capacity_requests (lane, at, units, permit_id) VALUES (p_lane, p_now, p_units, p_permit);
          granted := true; retry_after_ms := NULL;
        END
      $fn$`,
    ],
  },
  {
    version: 15,
    name: 'uploads and their expiry, for the clean-up that deletes their files',
    up: (s) => [
      `CREATE TABLE ${s}.uploads (
        key text PRIMARY KEY,
        owner_id text NOT NULL,
        mime_type text NOT NULL,
        size bigint NOT NULL,
        created_at bigint NOT NULL,
        expires_at bigint NOT NULL
      )`,
      `CREATE INDEX uploads_expiry_idx ON ${s}.uploads (expires_at, key)`,
    ],
  },
  {
    version: 16,
    name: "users' own limits: a budget and an in-flight cap held by the reserve, like an organisation's",
    // One row per user with limits (kept when they are cleared, so its open reserves still settle back): in_flight
    // counts its reserves made since, spent is held plus charged in spent_window (0 for a total budget), as an
    // organisation's row keeps them. A reserve held on them says so (user_limited) with the window it counted in.
    up: (s) => [
      `CREATE TABLE ${s}.user_limits (
        user_id text PRIMARY KEY,
        budget_amount numeric CHECK (budget_amount > 0),
        budget_period text CHECK (budget_period IN ('day', 'month', 'total')),
        max_in_flight integer CHECK (max_in_flight > 0),
        in_flight integer NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
        spent numeric NOT NULL DEFAULT 0,
        spent_window bigint NOT NULL DEFAULT 0
      )`,
      `ALTER TABLE ${s}.reserves ADD COLUMN user_limited boolean NOT NULL DEFAULT false, ADD COLUMN user_window bigint`,
    ],
  },
  {
    version: 17,
    name: "provider lanes' turns: tenants' virtual times and live waiters, so a lane's free slots follow the weights across instances",
    // domain/lane-turns.ts: a tenant's virtual time and its count of live waiters (capacity_tenants), each waiter and
    // until when it is live (capacity_waiters), the lane's floor; a fair grant's request says whose turn it paid, so a
    // refund gives it back (NULL: granted without fairness, and every row of earlier versions). capacity_acquire gets
    // a second form with the ask's fairness (p_tenant NULL: none), which mirrors laneTurn step for step under the
    // lane row's lock; the first form stays for instances of the previous release during a rolling upgrade.
    // capacity_release frees a slot and refunds under the same lock.
    up: (s) => [
      `CREATE TABLE ${s}.capacity_tenants (
        lane text NOT NULL,
        tenant text NOT NULL,
        vt bigint NOT NULL,
        waiting integer NOT NULL DEFAULT 0,
        PRIMARY KEY (lane, tenant)
      )`,
      `CREATE INDEX capacity_tenants_live_idx ON ${s}.capacity_tenants (lane, vt) WHERE waiting > 0`,
      `CREATE TABLE ${s}.capacity_waiters (
        lane text NOT NULL,
        waiter text NOT NULL,
        tenant text NOT NULL,
        until bigint NOT NULL,
        PRIMARY KEY (lane, waiter)
      )`,
      `CREATE INDEX capacity_waiters_until_idx ON ${s}.capacity_waiters (lane, until)`,
      `ALTER TABLE ${s}.capacity_lanes ADD COLUMN fair_floor bigint NOT NULL DEFAULT 0`,
      `ALTER TABLE ${s}.capacity_requests ADD COLUMN tenant text, ADD COLUMN cost bigint`,
      `CREATE FUNCTION ${s}.capacity_acquire(p_lane text, p_concurrency integer, p_rpm integer, p_upm double precision,
          p_permit text, p_units double precision, p_now bigint, p_hold_ms bigint, p_window_ms bigint,
          p_tenant text, p_cost bigint, p_waiter text, p_ttl_ms bigint,
          OUT granted boolean, OUT retry_after_ms bigint) LANGUAGE plpgsql AS $fn$
        DECLARE
          v_paused bigint;
          v_floor bigint;
          v_held integer;
          v_n integer;
          v_units double precision;
          v_oldest bigint;
          v_refused boolean := false;
          v_retry bigint;
          v_vt bigint;
          v_waiting integer;
          v_lowest bigint;
          v_new_floor bigint;
          v_was text;
        BEGIN
          INSERT INTO ${s}.capacity_lanes (lane) VALUES (p_lane) ON CONFLICT (lane) DO NOTHING;
          SELECT paused_until, fair_floor INTO v_paused, v_floor FROM ${s}.capacity_lanes WHERE lane = p_lane FOR UPDATE;
          -- The limits (as the first form decides them), kept as a refusal rather than returned at once.
          IF v_paused > p_now THEN
            v_refused := true; v_retry := v_paused - p_now;
          ELSE
            DELETE FROM ${s}.capacity_permits WHERE lane = p_lane AND expires_at <= p_now;
            IF p_concurrency IS NOT NULL THEN
              SELECT count(*) INTO v_held FROM ${s}.capacity_permits WHERE lane = p_lane AND permit_id <> p_permit;
              IF v_held >= p_concurrency THEN v_refused := true; END IF;
            END IF;
            IF NOT v_refused THEN
              DELETE FROM ${s}.capacity_requests WHERE lane = p_lane AND at <= p_now - p_window_ms;
              SELECT count(*), coalesce(sum(units), 0), min(at) INTO v_n, v_units, v_oldest FROM ${s}.capacity_requests WHERE lane = p_lane;
              IF (p_rpm IS NOT NULL AND v_n >= p_rpm) OR (p_upm IS NOT NULL AND v_units > 0 AND v_units + p_units > p_upm) THEN
                v_refused := true; v_retry := v_oldest + p_window_ms - p_now;
              END IF;
            END IF;
          END IF;
          IF p_tenant IS NULL THEN
            IF v_refused THEN
              granted := false; retry_after_ms := v_retry; RETURN;
            END IF;
          ELSE
            -- The lane's turns: laneTurn of domain/lane-turns.ts, mirrored. Expired waiters leave first.
            WITH gone AS (DELETE FROM ${s}.capacity_waiters WHERE lane = p_lane AND until <= p_now RETURNING tenant)
            UPDATE ${s}.capacity_tenants t SET waiting = t.waiting - g.n
              FROM (SELECT tenant, count(*)::integer AS n FROM gone GROUP BY tenant) g
              WHERE t.lane = p_lane AND t.tenant = g.tenant;
            SELECT vt, waiting INTO v_vt, v_waiting FROM ${s}.capacity_tenants WHERE lane = p_lane AND tenant = p_tenant;
            SELECT min(vt) INTO v_lowest FROM ${s}.capacity_tenants WHERE lane = p_lane AND waiting > 0 AND tenant <> p_tenant;
            -- Not live: no lower than the floor. The floor rises to the lowest of the asker's and the live tenants' times.
            IF v_vt IS NULL OR coalesce(v_waiting, 0) <= 0 THEN v_vt := greatest(coalesce(v_vt, v_floor), v_floor); END IF;
            v_new_floor := greatest(v_floor, least(v_vt, coalesce(v_lowest, v_vt)));
            IF v_new_floor > v_floor THEN
              UPDATE ${s}.capacity_lanes SET fair_floor = v_new_floor WHERE lane = p_lane;
              DELETE FROM ${s}.capacity_tenants WHERE lane = p_lane AND waiting = 0 AND vt <= v_new_floor;
            END IF;
            DELETE FROM ${s}.capacity_waiters WHERE lane = p_lane AND waiter = p_waiter RETURNING tenant INTO v_was;
            IF v_was IS NOT NULL THEN
              UPDATE ${s}.capacity_tenants SET waiting = waiting - 1 WHERE lane = p_lane AND tenant = v_was;
            END IF;
            -- Refused by the limits, or another live tenant is lower (not owed): the waiter is kept.
            IF v_refused OR (v_lowest IS NOT NULL AND v_vt > v_lowest) THEN
              INSERT INTO ${s}.capacity_tenants (lane, tenant, vt, waiting) VALUES (p_lane, p_tenant, v_vt, 1)
                ON CONFLICT (lane, tenant) DO UPDATE SET vt = excluded.vt, waiting = ${s}.capacity_tenants.waiting + 1;
              INSERT INTO ${s}.capacity_waiters (lane, waiter, tenant, until)
                VALUES (p_lane, p_waiter, p_tenant, p_now + coalesce(v_retry, 0) + p_ttl_ms);
              granted := false; retry_after_ms := v_retry; RETURN;
            END IF;
            INSERT INTO ${s}.capacity_tenants (lane, tenant, vt) VALUES (p_lane, p_tenant, v_vt + p_cost)
              ON CONFLICT (lane, tenant) DO UPDATE SET vt = excluded.vt;
          END IF;
          INSERT INTO ${s}.capacity_permits (lane, permit_id, expires_at) VALUES (p_lane, p_permit, p_now + p_hold_ms)
            ON CONFLICT (lane, permit_id) DO UPDATE SET expires_at = excluded.expires_at;
          INSERT INTO ${s}.capacity_requests (lane, at, units, permit_id, tenant, cost)
            VALUES (p_lane, p_now, p_units, p_permit, p_tenant, CASE WHEN p_tenant IS NULL THEN NULL ELSE p_cost END);
          granted := true; retry_after_ms := NULL;
        END
      $fn$`,
      `CREATE FUNCTION ${s}.capacity_release(p_lane text, p_permit text, p_at bigint) RETURNS void LANGUAGE plpgsql AS $fn$
        DECLARE
          v_tenant text;
          v_cost bigint;
        BEGIN
          PERFORM 1 FROM ${s}.capacity_lanes WHERE lane = p_lane FOR UPDATE;
          DELETE FROM ${s}.capacity_permits WHERE lane = p_lane AND permit_id = p_permit;
          IF p_at IS NULL THEN RETURN; END IF;
          DELETE FROM ${s}.capacity_requests WHERE ctid = (
            SELECT ctid FROM ${s}.capacity_requests WHERE lane = p_lane AND permit_id = p_permit AND at = p_at LIMIT 1
          ) RETURNING tenant, cost INTO v_tenant, v_cost;
          -- The turn was never used either: its tenant's virtual time goes back.
          IF v_tenant IS NOT NULL AND v_cost IS NOT NULL THEN
            UPDATE ${s}.capacity_tenants SET vt = vt - v_cost WHERE lane = p_lane AND tenant = v_tenant;
          END IF;
        END
      $fn$`,
    ],
  },
  {
    version: 18,
    name: "provider lanes' turns: a waiter asking again while refused only moves its time to live",
    // The same decision as migration 17's capacity_acquire (its second form), one statement lighter in the common
    // case: a refused ask whose waiter is already there for its tenant updates the waiter's until, and nothing else.
    up: (s) => [
      `CREATE OR REPLACE FUNCTION ${s}.capacity_acquire(p_lane text, p_concurrency integer, p_rpm integer, p_upm double precision,
          p_permit text, p_units double precision, p_now bigint, p_hold_ms bigint, p_window_ms bigint,
          p_tenant text, p_cost bigint, p_waiter text, p_ttl_ms bigint,
          OUT granted boolean, OUT retry_after_ms bigint) LANGUAGE plpgsql AS $fn$
        DECLARE
          v_paused bigint;
          v_floor bigint;
          v_held integer;
          v_n integer;
          v_units double precision;
          v_oldest bigint;
          v_refused boolean := false;
          v_retry bigint;
          v_vt bigint;
          v_waiting integer;
          v_lowest bigint;
          v_new_floor bigint;
          v_was text;
        BEGIN
          INSERT INTO ${s}.capacity_lanes (lane) VALUES (p_lane) ON CONFLICT (lane) DO NOTHING;
          SELECT paused_until, fair_floor INTO v_paused, v_floor FROM ${s}.capacity_lanes WHERE lane = p_lane FOR UPDATE;
          -- The limits (as the first form decides them), kept as a refusal rather than returned at once.
          IF v_paused > p_now THEN
            v_refused := true; v_retry := v_paused - p_now;
          ELSE
            DELETE FROM ${s}.capacity_permits WHERE lane = p_lane AND expires_at <= p_now;
            IF p_concurrency IS NOT NULL THEN
              SELECT count(*) INTO v_held FROM ${s}.capacity_permits WHERE lane = p_lane AND permit_id <> p_permit;
              IF v_held >= p_concurrency THEN v_refused := true; END IF;
            END IF;
            IF NOT v_refused THEN
              DELETE FROM ${s}.capacity_requests WHERE lane = p_lane AND at <= p_now - p_window_ms;
              SELECT count(*), coalesce(sum(units), 0), min(at) INTO v_n, v_units, v_oldest FROM ${s}.capacity_requests WHERE lane = p_lane;
              IF (p_rpm IS NOT NULL AND v_n >= p_rpm) OR (p_upm IS NOT NULL AND v_units > 0 AND v_units + p_units > p_upm) THEN
                v_refused := true; v_retry := v_oldest + p_window_ms - p_now;
              END IF;
            END IF;
          END IF;
          IF p_tenant IS NULL THEN
            IF v_refused THEN
              granted := false; retry_after_ms := v_retry; RETURN;
            END IF;
          ELSE
            -- The lane's turns: laneTurn of domain/lane-turns.ts, mirrored. Expired waiters leave first.
            WITH gone AS (DELETE FROM ${s}.capacity_waiters WHERE lane = p_lane AND until <= p_now RETURNING tenant)
            UPDATE ${s}.capacity_tenants t SET waiting = t.waiting - g.n
              FROM (SELECT tenant, count(*)::integer AS n FROM gone GROUP BY tenant) g
              WHERE t.lane = p_lane AND t.tenant = g.tenant;
            SELECT vt, waiting INTO v_vt, v_waiting FROM ${s}.capacity_tenants WHERE lane = p_lane AND tenant = p_tenant;
            SELECT min(vt) INTO v_lowest FROM ${s}.capacity_tenants WHERE lane = p_lane AND waiting > 0 AND tenant <> p_tenant;
            -- Not live: no lower than the floor. The floor rises to the lowest of the asker's and the live tenants' times.
            IF v_vt IS NULL OR coalesce(v_waiting, 0) <= 0 THEN v_vt := greatest(coalesce(v_vt, v_floor), v_floor); END IF;
            v_new_floor := greatest(v_floor, least(v_vt, coalesce(v_lowest, v_vt)));
            IF v_new_floor > v_floor THEN
              UPDATE ${s}.capacity_lanes SET fair_floor = v_new_floor WHERE lane = p_lane;
              DELETE FROM ${s}.capacity_tenants WHERE lane = p_lane AND waiting = 0 AND vt <= v_new_floor;
            END IF;
            -- Refused by the limits, or another live tenant is lower (not owed): the waiter is kept.
            v_refused := v_refused OR (v_lowest IS NOT NULL AND v_vt > v_lowest);
            SELECT tenant INTO v_was FROM ${s}.capacity_waiters WHERE lane = p_lane AND waiter = p_waiter;
            IF v_refused AND v_was = p_tenant THEN
              -- A waiter asking again: its tenant is live (its time unchanged), only its time to live moves.
              UPDATE ${s}.capacity_waiters SET until = p_now + coalesce(v_retry, 0) + p_ttl_ms WHERE lane = p_lane AND waiter = p_waiter;
              granted := false; retry_after_ms := v_retry; RETURN;
            END IF;
            IF v_was IS NOT NULL THEN
              DELETE FROM ${s}.capacity_waiters WHERE lane = p_lane AND waiter = p_waiter;
              UPDATE ${s}.capacity_tenants SET waiting = waiting - 1 WHERE lane = p_lane AND tenant = v_was;
            END IF;
            IF v_refused THEN
              INSERT INTO ${s}.capacity_tenants (lane, tenant, vt, waiting) VALUES (p_lane, p_tenant, v_vt, 1)
                ON CONFLICT (lane, tenant) DO UPDATE SET vt = excluded.vt, waiting = ${s}.capacity_tenants.waiting + 1;
              INSERT INTO ${s}.capacity_waiters (lane, waiter, tenant, until)
                VALUES (p_lane, p_waiter, p_tenant, p_now + coalesce(v_retry, 0) + p_ttl_ms);
              granted := false; retry_after_ms := v_retry; RETURN;
            END IF;
            INSERT INTO ${s}.capacity_tenants (lane, tenant, vt) VALUES (p_lane, p_tenant, v_vt + p_cost)
              ON CONFLICT (lane, tenant) DO UPDATE SET vt = excluded.vt;
          END IF;
          INSERT INTO ${s}.capacity_permits (lane, permit_id, expires_at) VALUES (p_lane, p_permit, p_now + p_hold_ms)
            ON CONFLICT (lane, permit_id) DO UPDATE SET expires_at = excluded.expires_at;
          INSERT INTO ${s}.capacity_requests (lane, at, units, permit_id, tenant, cost)
            VALUES (p_lane, p_now, p_units, p_permit, p_tenant, CASE WHEN p_tenant IS NULL THEN NULL ELSE p_cost END);
          granted := true; retry_after_ms := NULL;
        END
      $fn$`,
    ],
  },
];

/**
 * Applies the migrations this schema lacks, in version order, in one transaction. A database migrated by a newer
 * release (versions we do not know) is left alone.
 *
 * @returns the versions applied by this call.
 */
export async function runMigrations(pool: Pool, schema: string = 'genservice'): Promise<number[]> {
  // Run once per start, and on whatever pool the caller gives: nothing to gain from preparing them.
  const db = new PgDatabase(pool, schema, { preparedStatements: false });
  const s = db.s;
  return db.transaction(async (tx: Queryable) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    // Checked first so a role without CREATE on the database can use a schema its DBA made.
    const exists = await tx.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [db.schema]);
    if (exists.rowCount === 0) await tx.query(`CREATE SCHEMA ${s}`);
    await tx.query(
      `CREATE TABLE IF NOT EXISTS ${s}.schema_migrations (
        version integer PRIMARY KEY,
        name text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`,
    );
    const { rows } = await tx.query<{ version: number }>(`SELECT version FROM ${s}.schema_migrations`);
    const done = new Set(rows.map((r) => r.version));
    const applied: number[] = [];
    for (const m of [...MIGRATIONS].sort((a, b) => a.version - b.version)) {
      if (done.has(m.version)) continue;
      for (const stmt of m.up(s)) await tx.query(stmt);
      await tx.query(`INSERT INTO ${s}.schema_migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
      applied.push(m.version);
    }
    return applied;
  });
}
