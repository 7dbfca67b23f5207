import Database from 'better-sqlite3';
import { DEFAULT_LOCK_WAIT_MS, isBusy, setLockWait } from './busy.js';

/** The better-sqlite3 connection type, re-exported so users need not import better-sqlite3's types themselves. */
export type SqliteDatabase = Database.Database;

export interface SqliteOptions {
  /** Path of the database file. It is created (with its schema) when missing. */
  filename: string;
  /**
   * How long an operation waits for a lock another connection (another process on the same file) holds before it
   * fails with UnavailableError, which the API answers `503 unavailable` with `Retry-After`. Default 2000 ms. The
   * wait never blocks the event loop: the operation is tried again on short timers, so every other request goes on
   * being served. (Opening and migrating the file, once at start, may block up to this long.)
   */
  busyTimeoutMs?: number;
  /**
   * `NORMAL` (default): in WAL mode a committed transaction survives a crash of the process (SIGKILL, OOM kill);
   * only an OS crash or power loss can lose the last few commits. `FULL` fsyncs the WAL on every commit, so
   * those survive too, at the price of one fsync per write.
   */
  synchronous?: 'NORMAL' | 'FULL';
  /**
   * SQLite's page cache for this connection, in MiB. Default 64: SQLite's own 2 MiB default makes lookups slow
   * down as the table grows past it (more B-tree pages read from the OS per get).
   */
  cacheSizeMiB?: number;
  /** Bytes of the file read through mmap instead of read(2), in MiB. Default 256; 0 turns it off. */
  mmapSizeMiB?: number;
}

export interface Migration {
  version: number;
  name: string;
  /**
   * A migration never loses data a previous version stored. It adds tables, columns and indexes; where SQLite
   * cannot change a table in place it rebuilds it with every row (version 5); where a previous version left rows
   * broken it repairs them, said in the migration itself (version 2 forgets idempotency keys a crash left
   * unfinished).
   */
  sql: string;
}

/**
 * Ordered, append-only. Never edit a released entry: a database that already ran it would not run it again.
 *
 * Numbers are REAL because prices and balances are JavaScript numbers (doubles); timestamps are epoch-ms
 * INTEGERs. `rowid` (implicit) records insertion order, which breaks ties between equal timestamps so that
 * "oldest first" is stable, the same as the in-memory store.
 */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial',
    sql: `
      CREATE TABLE generations (
        id               TEXT    NOT NULL PRIMARY KEY,
        owner_id         TEXT    NOT NULL,
        model_id         TEXT    NOT NULL,
        settings         TEXT    NOT NULL,
        status           TEXT    NOT NULL CHECK (status IN ('pending', 'processing', 'completed', 'failed')),
        reserved         REAL    NOT NULL,
        price            REAL,
        result_text      TEXT,
        result_key       TEXT,
        failure_reason   TEXT,
        attempts         INTEGER NOT NULL DEFAULT 0,
        lease_owner      TEXT,
        lease_expires_at INTEGER,
        created_at       INTEGER NOT NULL,
        updated_at       INTEGER NOT NULL,
        finished_at      INTEGER
      );
      -- Partial: recovery scans only unfinished rows, however many finished ones pile up.
      CREATE INDEX generations_unfinished ON generations (created_at) WHERE status IN ('pending', 'processing');
      -- Partial: retention walks finished rows oldest first; unfinished rows (finished_at NULL) stay out of it.
      CREATE INDEX generations_finished ON generations (finished_at) WHERE finished_at IS NOT NULL;

      CREATE TABLE accounts (
        user_id  TEXT NOT NULL PRIMARY KEY,
        balance  REAL NOT NULL DEFAULT 0 CHECK (balance >= 0),
        reserved REAL NOT NULL DEFAULT 0,
        settled  REAL NOT NULL DEFAULT 0
      );

      CREATE TABLE reserves (
        generation_id TEXT    NOT NULL PRIMARY KEY,
        user_id       TEXT    NOT NULL REFERENCES accounts (user_id),
        amount        REAL    NOT NULL CHECK (amount >= 0),
        state         TEXT    NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'settled')),
        charged       REAL,
        created_at    INTEGER NOT NULL,
        settled_at    INTEGER
      );
      CREATE INDEX reserves_open ON reserves (created_at) WHERE state = 'open';

      CREATE TABLE api_keys (
        digest     TEXT    NOT NULL PRIMARY KEY,
        user_id    TEXT    NOT NULL,
        created_at INTEGER NOT NULL
      );

      CREATE TABLE idempotency_keys (
        user_id       TEXT    NOT NULL,
        key           TEXT    NOT NULL,
        request_hash  TEXT    NOT NULL,
        generation_id TEXT,
        created_at    INTEGER NOT NULL,
        PRIMARY KEY (user_id, key)
      );
      CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
    `,
  },
  {
    version: 2,
    name: 'event log, list, failure reasons, metadata, progress, idempotency takeover',
    sql: `
      -- Client-facing details of a generation. All nullable: rows written by version 1 simply have none.
      ALTER TABLE generations ADD COLUMN metadata          TEXT;    -- JSON object of strings, as given at create
      ALTER TABLE generations ADD COLUMN webhook           TEXT;    -- JSON {url, events}, as given at create
      ALTER TABLE generations ADD COLUMN error_code        TEXT;    -- client-safe failure reason
      ALTER TABLE generations ADD COLUMN error_message     TEXT;
      ALTER TABLE generations ADD COLUMN progress_fraction REAL;
      ALTER TABLE generations ADD COLUMN progress_message  TEXT;
      ALTER TABLE generations ADD COLUMN started_at        INTEGER; -- first claim

      -- An owner's list, newest first. The plain one is in the order of the query (DESC); the filtered ones are
      -- walked backwards, which SQLite does as cheaply. Each ends in (created_at, id) so a keyset cursor seeks.
      CREATE INDEX generations_owner_list   ON generations (owner_id, created_at DESC, id DESC);
      CREATE INDEX generations_owner_status ON generations (owner_id, status, created_at, id);
      CREATE INDEX generations_owner_model  ON generations (owner_id, model_id, created_at, id);

      -- AUTOINCREMENT (not a plain rowid alias): a plain rowid takes max(rowid) + 1, which would hand the seq of
      -- events deleted by retention out again; sqlite_sequence remembers the largest ever used.
      CREATE TABLE events (
        seq           INTEGER PRIMARY KEY AUTOINCREMENT,
        generation_id TEXT    NOT NULL,
        owner_id      TEXT    NOT NULL,
        type          TEXT    NOT NULL CHECK (type IN ('created', 'processing', 'progress', 'completed', 'failed')),
        at            INTEGER NOT NULL,
        data          TEXT    NOT NULL -- JSON
      );
      CREATE INDEX events_generation ON events (generation_id, seq);

      -- A record now names its planned generation from begin on; done says whether that is final.
      ALTER TABLE idempotency_keys ADD COLUMN done       INTEGER NOT NULL DEFAULT 0 CHECK (done IN (0, 1));
      ALTER TABLE idempotency_keys ADD COLUMN started_at INTEGER NOT NULL DEFAULT 0;
      -- Version 1 kept unfinished keys with no generation: a request that crashed left one behind (409 for a day).
      -- Forgetting them lets the retry create the generation; it is the only data this migration removes.
      DELETE FROM idempotency_keys WHERE generation_id IS NULL;
      UPDATE idempotency_keys SET done = 1, started_at = created_at;
    `,
  },
  {
    version: 3,
    name: 'remote jobs: handle and parking',
    sql: `
      -- A two-phase provider's handle of its upstream job (JSON), stored before the first check.
      ALTER TABLE generations ADD COLUMN remote_handle TEXT;
      -- Between checks a remote job is parked: processing, no lease, due again at this time.
      ALTER TABLE generations ADD COLUMN parked_until  INTEGER;
    `,
  },
  {
    version: 4,
    name: 'webhook secrets, deliveries, attempts, cursors',
    sql: `
      CREATE TABLE webhook_secrets (
        user_id             TEXT    NOT NULL PRIMARY KEY,
        current_key         TEXT    NOT NULL,
        previous_key        TEXT,
        previous_expires_at INTEGER
      );
      CREATE TABLE webhook_deliveries (
        id               TEXT    NOT NULL PRIMARY KEY,
        generation_id    TEXT    NOT NULL,
        owner_id         TEXT    NOT NULL,
        seq              INTEGER NOT NULL,
        type             TEXT    NOT NULL,
        url              TEXT    NOT NULL,
        payload          TEXT    NOT NULL,
        state            TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed', 'gone')),
        attempts         INTEGER NOT NULL DEFAULT 0,
        next_attempt_at  INTEGER NOT NULL,
        lease_owner      TEXT,
        lease_expires_at INTEGER,
        created_at       INTEGER NOT NULL
      );
      -- Due work, oldest first: the claim walks this partial index.
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
      CREATE INDEX webhook_deliveries_generation ON webhook_deliveries (generation_id, seq);
      CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (owner_id, url) WHERE state = 'pending';
      CREATE TABLE webhook_attempts (
        delivery_id TEXT    NOT NULL,
        n           INTEGER NOT NULL,
        at          INTEGER NOT NULL,
        status      INTEGER,
        error       TEXT,
        duration_ms INTEGER NOT NULL,
        PRIMARY KEY (delivery_id, n)
      );
      CREATE TABLE cursors (name TEXT NOT NULL PRIMARY KEY, value INTEGER NOT NULL);
    `,
  },
  {
    version: 5,
    name: 'compare-and-set port: claims, per-generation event numbers, feed positions, text cursors',
    // Rebuilds generations, events and cursors (every row kept): SQLite can neither drop a CHECK nor change a
    // column's type or primary key in place. The old checks named the statuses and event types, which are the
    // Lifecycle's to decide, not the schema's. This migration is the one place that still knows the old statuses:
    // it repairs a finished row without finished_at (none should exist), since "unfinished" now means exactly that.
    sql: `
      -- The event's old global seq becomes its feed position (the rowid, still AUTOINCREMENT so retention never
      -- lets a position be handed out twice); seq becomes the number within its generation, in the old order.
      CREATE TABLE events_v5 (
        position      INTEGER PRIMARY KEY AUTOINCREMENT,
        generation_id TEXT    NOT NULL,
        seq           INTEGER NOT NULL,
        owner_id      TEXT    NOT NULL,
        type          TEXT    NOT NULL,
        at            INTEGER NOT NULL,
        data          TEXT    NOT NULL -- JSON
      );
      INSERT INTO events_v5 (position, generation_id, seq, owner_id, type, at, data)
        SELECT seq, generation_id, row_number() OVER (PARTITION BY generation_id ORDER BY seq), owner_id, type, at, data
          FROM events;
      CREATE UNIQUE INDEX events_of_generation ON events_v5 (generation_id, seq);
      -- The largest position ever handed out, counting events retention already deleted.
      DELETE FROM sqlite_sequence WHERE name = 'events_v5';
      INSERT INTO sqlite_sequence (name, seq)
        SELECT 'events_v5', coalesce(max(n), 0) FROM (
          SELECT seq AS n FROM sqlite_sequence WHERE name = 'events'
          UNION ALL SELECT max(position) FROM events_v5);

      -- A delivery names its event by the generation's number now (the outbox cursor keeps the position).
      UPDATE webhook_deliveries
         SET seq = coalesce((SELECT e.seq FROM events_v5 e WHERE e.position = webhook_deliveries.seq), seq);

      CREATE TABLE generations_v5 (
        id                TEXT    NOT NULL PRIMARY KEY,
        owner_id          TEXT    NOT NULL,
        model_id          TEXT    NOT NULL,
        settings          TEXT    NOT NULL, -- JSON
        status            TEXT    NOT NULL,
        reserved          REAL    NOT NULL,
        price             REAL,
        result_text       TEXT,
        result_key        TEXT,
        failure_reason    TEXT,
        error_code        TEXT,
        error_message     TEXT,
        metadata          TEXT,             -- JSON
        webhook           TEXT,             -- JSON
        progress_fraction REAL,
        progress_message  TEXT,
        remote_handle     TEXT,             -- JSON
        parked_until      INTEGER,
        claims            INTEGER NOT NULL DEFAULT 0,
        lease_owner       TEXT,
        lease_expires_at  INTEGER,
        last_seq          INTEGER NOT NULL DEFAULT 0, -- seq of its last event: the next one takes last_seq + 1
        created_at        INTEGER NOT NULL,
        updated_at        INTEGER NOT NULL,
        started_at        INTEGER,
        finished_at       INTEGER
      );
      -- rowid kept: it breaks created_at ties in recovery's "oldest first".
      INSERT INTO generations_v5 (rowid, id, owner_id, model_id, settings, status, reserved, price, result_text,
          result_key, failure_reason, error_code, error_message, metadata, webhook, progress_fraction,
          progress_message, remote_handle, parked_until, claims, lease_owner, lease_expires_at, last_seq,
          created_at, updated_at, started_at, finished_at)
        SELECT g.rowid, g.id, g.owner_id, g.model_id, g.settings, g.status, g.reserved, g.price, g.result_text,
          g.result_key, g.failure_reason, g.error_code, g.error_message, g.metadata, g.webhook, g.progress_fraction,
          g.progress_message, g.remote_handle, g.parked_until, g.attempts, g.lease_owner, g.lease_expires_at,
          coalesce((SELECT max(e.seq) FROM events_v5 e WHERE e.generation_id = g.id), 0),
          g.created_at, g.updated_at, g.started_at,
          CASE WHEN g.finished_at IS NULL AND g.status IN ('completed', 'failed') THEN g.updated_at ELSE g.finished_at END
          FROM generations g;

      DROP TABLE events;
      ALTER TABLE events_v5 RENAME TO events;
      DROP TABLE generations;
      ALTER TABLE generations_v5 RENAME TO generations;
      -- Partial on finished_at IS NULL: recovery and the in-flight count read only unfinished rows, however many
      -- finished ones pile up.
      CREATE INDEX generations_unfinished       ON generations (created_at) WHERE finished_at IS NULL;
      CREATE INDEX generations_owner_unfinished ON generations (owner_id)   WHERE finished_at IS NULL;
      CREATE INDEX generations_finished         ON generations (finished_at) WHERE finished_at IS NOT NULL;
      CREATE INDEX generations_owner_list       ON generations (owner_id, created_at DESC, id DESC);
      CREATE INDEX generations_owner_status     ON generations (owner_id, status, created_at, id);
      CREATE INDEX generations_owner_model      ON generations (owner_id, model_id, created_at, id);

      -- Cursors are opaque text (a feed position here, written as its decimal digits): TEXT affinity keeps '010'
      -- and '10' apart, where INTEGER affinity would have compared them equal.
      CREATE TABLE cursors_v5 (name TEXT NOT NULL PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO cursors_v5 (name, value) SELECT name, CAST(value AS TEXT) FROM cursors;
      DROP TABLE cursors;
      ALTER TABLE cursors_v5 RENAME TO cursors;
    `,
  },
  // Version 5 is the generation store's rewrite (issue 22); this one touches only keys and the ledger.
  {
    version: 6,
    name: 'keys as objects, key budgets, usage rollup, audit log',
    sql: `
      ALTER TABLE api_keys ADD COLUMN key_id        TEXT;
      ALTER TABLE api_keys ADD COLUMN name          TEXT NOT NULL DEFAULT 'default';
      -- JSON arrays. Keys of earlier versions may do everything, as they could before.
      ALTER TABLE api_keys ADD COLUMN scopes        TEXT NOT NULL DEFAULT '["generate","read"]';
      ALTER TABLE api_keys ADD COLUMN models        TEXT;
      ALTER TABLE api_keys ADD COLUMN budget_amount REAL;
      ALTER TABLE api_keys ADD COLUMN budget_period TEXT CHECK (budget_period IN ('day', 'month'));
      ALTER TABLE api_keys ADD COLUMN expires_at    INTEGER;
      ALTER TABLE api_keys ADD COLUMN last_used_at  INTEGER;
      UPDATE api_keys SET key_id = 'key_' || lower(hex(randomblob(16))) WHERE key_id IS NULL;
      CREATE UNIQUE INDEX api_keys_key_id ON api_keys (key_id);
      CREATE INDEX api_keys_user ON api_keys (user_id, created_at);

      -- What a reserve was for (usage) and the key window it holds spend in (given back at settle).
      ALTER TABLE reserves ADD COLUMN model_id     TEXT;
      ALTER TABLE reserves ADD COLUMN key_id       TEXT;
      ALTER TABLE reserves ADD COLUMN window_start INTEGER;

      -- Held plus charged per key and budget window; the reserve's UPDATE ... WHERE spent + amount <= limit is the check.
      CREATE TABLE key_spend (
        key_id       TEXT    NOT NULL,
        window_start INTEGER NOT NULL,
        spent        REAL    NOT NULL,
        PRIMARY KEY (key_id, window_start)
      ) WITHOUT ROWID;

      -- Settled spend per user, UTC day (days since the epoch), model and key ('' for none), written by settle:
      -- usage reads at most days x models x keys rows, however many generations there were.
      CREATE TABLE usage_daily (
        user_id  TEXT    NOT NULL,
        day      INTEGER NOT NULL,
        model_id TEXT    NOT NULL,
        key_id   TEXT    NOT NULL,
        count    INTEGER NOT NULL,
        tokens   REAL    NOT NULL,
        PRIMARY KEY (user_id, day, model_id, key_id)
      ) WITHOUT ROWID;
      -- Usage of earlier versions' settled reserves, so the report starts complete.
      INSERT INTO usage_daily (user_id, day, model_id, key_id, count, tokens)
        SELECT user_id, CAST(settled_at / 86400000 AS INTEGER), '', '', count(*), total(charged)
          FROM reserves WHERE state = 'settled' AND settled_at IS NOT NULL
         GROUP BY user_id, CAST(settled_at / 86400000 AS INTEGER);

      -- Every admin action, newest first by seq (AUTOINCREMENT: a seq is never handed out twice).
      CREATE TABLE audit_log (
        seq     INTEGER PRIMARY KEY AUTOINCREMENT,
        at      INTEGER NOT NULL,
        actor   TEXT    NOT NULL,
        action  TEXT    NOT NULL,
        user_id TEXT,
        key_id  TEXT,
        details TEXT -- JSON
      );
    `,
  },
  {
    version: 7,
    name: 'a shorter life asked for at create (expiresAfterSeconds) and when it ends',
    sql: `
      -- Both nullable: rows of earlier versions asked for no life of their own (the service's retention decides).
      ALTER TABLE generations ADD COLUMN expires_after_seconds INTEGER; -- as asked at create, never changed
      ALTER TABLE generations ADD COLUMN life_ends_at          INTEGER; -- epoch ms, written when it finishes
      -- Partial: the sweep walks only rows with a life of their own, the soonest ended first.
      CREATE INDEX generations_life_ends ON generations (life_ends_at) WHERE life_ends_at IS NOT NULL;
    `,
  },
  {
    version: 8,
    name: 'the create trace context of a generation',
    sql: `ALTER TABLE generations ADD COLUMN traceparent TEXT;  -- W3C traceparent, so the run continues the trace`,
  },
  {
    version: 9,
    name: 'batches, the model that served a generation',
    sql: `
      -- A batch: the generations one POST /v1/batches created. Its counts and price are read from its generations.
      CREATE TABLE batches (
        id             TEXT    NOT NULL PRIMARY KEY,
        owner_id       TEXT    NOT NULL,
        generation_ids TEXT    NOT NULL, -- JSON array, in the request's order
        webhook_url    TEXT,
        created_at     INTEGER NOT NULL,
        completed_at   INTEGER
      );
      ALTER TABLE generations ADD COLUMN batch_id        TEXT;
      -- Set only when a fallback model produced the result.
      ALTER TABLE generations ADD COLUMN served_model_id TEXT;
      -- A batch's counts and its paged list; only batch generations are in it.
      CREATE INDEX generations_batch ON generations (batch_id, created_at, id) WHERE batch_id IS NOT NULL;
    `,
  },
  {
    version: 10,
    name: 'the trace context of a webhook delivery',
    // Its generation's create traceparent, so the delivery continues that trace; NULL for rows of earlier versions.
    sql: `ALTER TABLE webhook_deliveries ADD COLUMN traceparent TEXT;`,
  },
  {
    version: 11,
    name: 'open batches, for the sweep that completes them after a crash',
    // Partial: only batches not completed yet are in it, oldest first, so the sweep never reads a completed one.
    sql: `CREATE INDEX batches_open ON batches (created_at, id) WHERE completed_at IS NULL;`,
  },
  {
    version: 12,
    name: 'revoked keys are kept, so that no later add brings one back',
    // A revoke sets revoked_at instead of deleting the row: the digest stays known, and adding the key again (a host
    // seeding its users file at every start) finds it and changes nothing. Keys revoked before this version were
    // deleted, and are unknown.
    sql: `ALTER TABLE api_keys ADD COLUMN revoked_at INTEGER;`,
  },
  {
    version: 13,
    name: 'usage over spans of days and by day; webhooks in use',
    // Issue 36: the usage rollup over aligned spans of 8 and 64 days (core's USAGE_SPANS), beside usage_daily, filled
    // from it: a report by model or key over a long range reads a few spans and the days at its ends; and each day's
    // totals (usage_days), for the report by day. And the outbox
    // is written from the log only once webhooks are in use (core's WebhookUse, a named cursor): a database that
    // already holds a generation with a webhook, or a delivery, is in use.
    sql: `CREATE TABLE usage_spans (
        user_id  TEXT    NOT NULL,
        span     INTEGER NOT NULL,
        start    INTEGER NOT NULL,
        model_id TEXT    NOT NULL,
        key_id   TEXT    NOT NULL,
        count    INTEGER NOT NULL,
        tokens   REAL    NOT NULL,
        PRIMARY KEY (user_id, span, start, model_id, key_id)
      ) WITHOUT ROWID;
      INSERT INTO usage_spans (user_id, span, start, model_id, key_id, count, tokens)
        SELECT d.user_id, sp.span, d.day - d.day % sp.span, d.model_id, d.key_id, sum(d.count), total(d.tokens)
          FROM usage_daily d, (SELECT 8 AS span UNION ALL SELECT 64) sp
         GROUP BY 1, 2, 3, 4, 5;
      -- Each day's totals, for the report by day (one row per day, however many models and keys).
      CREATE TABLE usage_days (
        user_id TEXT    NOT NULL,
        day     INTEGER NOT NULL,
        count   INTEGER NOT NULL,
        tokens  REAL    NOT NULL,
        PRIMARY KEY (user_id, day)
      ) WITHOUT ROWID;
      INSERT INTO usage_days (user_id, day, count, tokens)
        SELECT user_id, day, sum(count), total(tokens) FROM usage_daily GROUP BY 1, 2;
      INSERT INTO cursors (name, value)
      SELECT 'webhooks.in-use', '1'
      WHERE EXISTS (SELECT 1 FROM webhook_deliveries) OR EXISTS (SELECT 1 FROM generations WHERE webhook IS NOT NULL)
      ON CONFLICT (name) DO NOTHING;`,
  },
  {
    version: 14,
    name: 'organisations: members, limits, what their reserves hold, usage by member; in-flight caps of keys',
    // in_flight counts the members' open reserves (held at reserve, given back at settle); budget_period is 'day',
    // 'month' or 'total'. One organisation per user: the user id is the members' key. organization_spend is held
    // plus charged per window (0 for a total budget), as key_spend is per key; organization_usage_daily is the
    // settled spend of the reserves held under an organisation, per UTC day and member. A reserve keeps the
    // organisation it was held under and its window: its settle gives back there. A key may cap its generations in
    // flight (api_keys.max_in_flight): key_in_flight counts them, and a reserve counted there says so
    // (reserves.key_in_flight), so its settle gives the slot back.
    sql: `
      CREATE TABLE organizations (
        id TEXT PRIMARY KEY,
        budget_amount REAL CHECK (budget_amount > 0),
        budget_period TEXT CHECK (budget_period IN ('day', 'month', 'total')),
        max_in_flight INTEGER CHECK (max_in_flight > 0),
        weight INTEGER NOT NULL DEFAULT 1 CHECK (weight > 0),
        in_flight INTEGER NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
        created_at INTEGER NOT NULL
      );
      CREATE TABLE organization_members (
        user_id TEXT PRIMARY KEY,
        organization_id TEXT NOT NULL REFERENCES organizations (id),
        role TEXT NOT NULL CHECK (role IN ('member', 'admin')),
        joined_at INTEGER NOT NULL
      );
      CREATE INDEX organization_members_org ON organization_members (organization_id, joined_at, user_id);
      CREATE TABLE organization_spend (
        organization_id TEXT NOT NULL,
        window_start INTEGER NOT NULL,
        spent REAL NOT NULL,
        PRIMARY KEY (organization_id, window_start)
      ) WITHOUT ROWID;
      CREATE TABLE organization_usage_daily (
        organization_id TEXT NOT NULL,
        day INTEGER NOT NULL,
        user_id TEXT NOT NULL,
        count INTEGER NOT NULL,
        tokens REAL NOT NULL,
        PRIMARY KEY (organization_id, day, user_id)
      ) WITHOUT ROWID;
      ALTER TABLE reserves ADD COLUMN organization_id TEXT;
      ALTER TABLE reserves ADD COLUMN organization_window INTEGER;
      ALTER TABLE api_keys ADD COLUMN max_in_flight INTEGER;
      CREATE TABLE key_in_flight (
        key_id TEXT PRIMARY KEY,
        in_flight INTEGER NOT NULL CHECK (in_flight >= 0)
      ) WITHOUT ROWID;
      ALTER TABLE reserves ADD COLUMN key_in_flight INTEGER NOT NULL DEFAULT 0;
    `,
  },
  {
    version: 15,
    name: 'webhook endpoints as objects, and the endpoint of a delivery',
    // events is a JSON array in text. failing_since is the first failed attempt since the last success (NULL while
    // healthy); disabled_at is set when it failed for too long or its owner disabled it. A delivery's endpoint_id is
    // NULL for every receiver that is not a registered endpoint (a create's webhook, a host's default endpoint).
    sql: `
      CREATE TABLE webhook_endpoints (
        id                  TEXT    NOT NULL PRIMARY KEY,
        owner_id            TEXT    NOT NULL,
        url                 TEXT    NOT NULL,
        events              TEXT    NOT NULL,
        description         TEXT,
        secret              TEXT    NOT NULL,
        previous_secret     TEXT,
        previous_expires_at INTEGER,
        created_at          INTEGER NOT NULL,
        updated_at          INTEGER NOT NULL,
        disabled_at         INTEGER,
        failing_since       INTEGER
      );
      CREATE INDEX webhook_endpoints_owner ON webhook_endpoints (owner_id, created_at);
      ALTER TABLE webhook_deliveries ADD COLUMN endpoint_id TEXT;
      CREATE INDEX webhook_deliveries_registered ON webhook_deliveries (endpoint_id, created_at) WHERE endpoint_id IS NOT NULL;
    `,
  },
  {
    version: 16,
    name: "provider lanes' shared counters (slots in flight, requests of the last minute, pauses); a create's priority and deadline",
    sql: `
      CREATE TABLE capacity_lanes (
        lane         TEXT    NOT NULL PRIMARY KEY,
        paused_until INTEGER NOT NULL DEFAULT 0
      );
      CREATE TABLE capacity_permits (
        lane       TEXT    NOT NULL,
        permit_id  TEXT    NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (lane, permit_id)
      );
      CREATE TABLE capacity_requests (
        lane      TEXT    NOT NULL,
        at        INTEGER NOT NULL,
        units     REAL    NOT NULL,
        permit_id TEXT    NOT NULL
      );
      CREATE INDEX capacity_requests_lane_at ON capacity_requests (lane, at);
      -- A create's priority and a low one's deadline; NULL for rows of earlier versions (normal, no deadline).
      ALTER TABLE generations ADD COLUMN priority    TEXT;
      ALTER TABLE generations ADD COLUMN deadline_at INTEGER;
    `,
  },
  {
    version: 17,
    name: 'uploads and their expiry, for the clean-up that deletes their files',
    sql: `
      CREATE TABLE uploads (
        key        TEXT    NOT NULL PRIMARY KEY,
        owner_id   TEXT    NOT NULL,
        mime_type  TEXT    NOT NULL,
        size       INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
      );
      CREATE INDEX uploads_expiry ON uploads (expires_at, key);
    `,
  },
  {
    version: 18,
    name: "users' own limits: a budget and an in-flight cap held by the reserve, like an organisation's",
    // A user with limits has a row (kept when they are cleared, so its open reserves still settle back); in_flight
    // counts its reserves made since, user_spend is held plus charged per window (0 for a total budget). A reserve
    // held on them says so (reserves.user_limited) with its window: its settle gives back there.
    sql: `
      CREATE TABLE user_limits (
        user_id TEXT PRIMARY KEY,
        budget_amount REAL CHECK (budget_amount > 0),
        budget_period TEXT CHECK (budget_period IN ('day', 'month', 'total')),
        max_in_flight INTEGER CHECK (max_in_flight > 0),
        in_flight INTEGER NOT NULL DEFAULT 0 CHECK (in_flight >= 0)
      ) WITHOUT ROWID;
      CREATE TABLE user_spend (
        user_id TEXT NOT NULL,
        window_start INTEGER NOT NULL,
        spent REAL NOT NULL,
        PRIMARY KEY (user_id, window_start)
      ) WITHOUT ROWID;
      ALTER TABLE reserves ADD COLUMN user_limited INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE reserves ADD COLUMN user_window INTEGER;
    `,
  },
  {
    version: 19,
    name: "provider lanes' turns: tenants' virtual times and live waiters, so a lane's free slots follow the weights across instances",
    // domain/lane-turns.ts: a tenant's virtual time and its count of live waiters (capacity_tenants), each waiter and
    // until when it is live (capacity_waiters), the lane's floor; a fair grant's request says whose turn it paid, so a
    // refund gives it back. NULL tenant: a request granted without fairness (and every row of earlier versions).
    sql: `
      CREATE TABLE capacity_tenants (
        lane    TEXT    NOT NULL,
        tenant  TEXT    NOT NULL,
        vt      INTEGER NOT NULL,
        waiting INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (lane, tenant)
      ) WITHOUT ROWID;
      CREATE INDEX capacity_tenants_live ON capacity_tenants (lane, vt) WHERE waiting > 0;
      CREATE TABLE capacity_waiters (
        lane   TEXT    NOT NULL,
        waiter TEXT    NOT NULL,
        tenant TEXT    NOT NULL,
        until  INTEGER NOT NULL,
        PRIMARY KEY (lane, waiter)
      ) WITHOUT ROWID;
      CREATE INDEX capacity_waiters_until ON capacity_waiters (lane, until);
      ALTER TABLE capacity_lanes ADD COLUMN fair_floor INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE capacity_requests ADD COLUMN tenant TEXT;
      ALTER TABLE capacity_requests ADD COLUMN cost INTEGER;
    `,
  },
  {
    version: 20,
    name: 'open reserves in the order recovery pages them: by time, then generation id',
    // Recovery walks every open reserve a page at a time after the last one read ((created_at, generation_id) as a row
    // value): the partial index now holds both, so each page is one seek and read in order, with no sort.
    sql: `
      DROP INDEX reserves_open;
      CREATE INDEX reserves_open ON reserves (created_at, generation_id) WHERE state = 'open';
    `,
  },
];

const SYNCHRONOUS_MODES = new Set(['NORMAL', 'FULL']);

/** Opens (creating when missing) a database file, sets WAL and the durability pragmas, and migrates it. */
export function openSqliteDatabase(options: SqliteOptions): SqliteDatabase {
  const busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_LOCK_WAIT_MS;
  const synchronous = options.synchronous ?? 'NORMAL';
  if (!Number.isInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
    throw new RangeError(`busyTimeoutMs must be an integer >= 0, got ${busyTimeoutMs}`);
  }
  // Pragmas take no bound parameters, so the value is interpolated: only whitelisted words may get there.
  if (!SYNCHRONOUS_MODES.has(synchronous)) {
    throw new RangeError(`synchronous must be 'NORMAL' or 'FULL', got ${String(synchronous)}`);
  }
  const cacheSizeMiB = options.cacheSizeMiB ?? 64;
  const mmapSizeMiB = options.mmapSizeMiB ?? 256;
  for (const [name, value] of [['cacheSizeMiB', cacheSizeMiB], ['mmapSizeMiB', mmapSizeMiB]] as const) {
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      throw new RangeError(`${name} must be a number >= 0, got ${String(value)}`);
    }
  }
  const db = new Database(options.filename, { timeout: busyTimeoutMs });
  try {
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    enableWal(db, busyTimeoutMs);
    db.pragma(`synchronous = ${synchronous}`);
    db.pragma('foreign_keys = ON');
    // Negative cache_size is in KiB. Numbers only reach the pragma (checked above), never text.
    db.pragma(`cache_size = ${-Math.round(cacheSizeMiB * 1024)}`);
    db.pragma(`mmap_size = ${Math.round(mmapSizeMiB * 1024 * 1024)}`);
    runMigrations(db);
    // From now on SQLite never waits for a lock itself (its busy handler would block the event loop): the stores
    // retry on timers instead, up to busyTimeoutMs.
    db.pragma('busy_timeout = 0');
    setLockWait(db, busyTimeoutMs);
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}

/**
 * Switching a file to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at once, without its busy
 * handler, when another process opening the same fresh file holds a lock. So retry here, up to the busy timeout.
 * The mode is stored in the file: once any process has switched it, later opens find it already set.
 */
function enableWal(db: SqliteDatabase, timeoutMs: number): void {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      // An in-memory database answers 'memory' and stays so; only files can be WAL.
      db.pragma('journal_mode = WAL');
      return;
    } catch (error) {
      if (!isBusy(error) || Date.now() >= deadline) throw error;
      // Blocking is fine: opening happens once, on start, and better-sqlite3 blocks the same way on busy locks.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5 + Math.random() * 20);
    }
  }
}


/**
 * Applies the migrations this database has not run yet, all in one IMMEDIATE transaction.
 *
 * IMMEDIATE takes the write lock before reading the current version, so when two processes start at once the
 * second waits (busy_timeout), then reads the version the first committed and applies nothing. A failing
 * migration rolls back entirely: the database stays at its previous version, never half-migrated.
 * Returns the versions applied by this call.
 */
export function runMigrations(db: SqliteDatabase, migrations: readonly Migration[] = MIGRATIONS): number[] {
  const apply = db.transaction((): number[] => {
    db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version    INTEGER NOT NULL PRIMARY KEY,
      name       TEXT    NOT NULL,
      applied_at INTEGER NOT NULL
    )`);
    const row = db.prepare('SELECT coalesce(max(version), 0) AS version FROM schema_migrations').get() as {
      version: number;
    };
    const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
    const applied: number[] = [];
    for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
      if (migration.version <= row.version) continue;
      db.exec(migration.sql);
      record.run(migration.version, migration.name, Date.now());
      applied.push(migration.version);
    }
    return applied;
  });
  return apply.immediate();
}

/** Versions recorded in `schema_migrations`, ascending. */
export function appliedMigrations(db: SqliteDatabase): number[] {
  return (db.prepare('SELECT version FROM schema_migrations ORDER BY version').all() as Array<{ version: number }>).map(
    (r) => r.version,
  );
}
