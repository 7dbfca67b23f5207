/**
 * One round trip for a fair enqueue.
 *
 * The queue is fair across owners by priority, as the BullMQ queue is: an owner's k-th waiting job gets pg-boss
 * priority -k (pg-boss hands out higher priorities first, oldest first within one), and a table of this package counts,
 * per owner, the jobs added and the jobs taken (two rows, so that an enqueue and a fetch never wait for each other's
 * lock): their difference is the owner's waiting count. Read, then sent, then counted, that is three round trips per enqueue. Instead, `send` is
 * given a connection (pg-boss's own `db` option of `send`) that runs pg-boss's insert statement inside one statement
 * with the count: the owner's place is read in front of the insert and becomes the job's priority, and the owner's
 * count goes up by one for a job that was really inserted (a duplicate, which pg-boss's `ON CONFLICT DO NOTHING`
 * answers with no row, counts nothing). Everything else is pg-boss's statement as the installed pg-boss builds it,
 * with the values `send` computed: the job is stored, deduplicated and defaulted exactly as pg-boss does it.
 *
 * The same way, a job leaves its owner's line in the statement that fetches it (pg-boss's fetch, given the same kind
 * of connection), so a started job is counted out with no round trip of its own.
 *
 * Tied to pg-boss's internals on purpose, and checked: the statements must contain the anchors below, or the queue
 * takes the slower path (an enqueue in two or three round trips, started jobs counted out in a statement of their
 * own every few milliseconds), with the same fairness; and the test `one-round-trip.test.ts` fails, so a pg-boss
 * upgrade that changes them is seen before release, not in production.
 */

/** Where the owners' counts are kept: a table of this package in the queue's schema. */
export const OWNERS_TABLE = 'genservice_owner_counts';
/** Postgres `integer` bounds pg-boss's priority column; an owner's place is capped here. */
export const MAX_PLACE = 2_147_483_647;

/** pg-boss's insert of one job (plans.insertJob): its priority is parameter 4, its queue name parameter 2. */
const PRIORITY_ANCHOR = 'COALESCE($4::int, 0) as priority';
const REQUIRED = ['INSERT INTO', '.job (', '$2 as name', 'ON CONFLICT DO NOTHING', 'RETURNING id', PRIORITY_ANCHOR];
/** pg-boss's insert takes 19 parameters; the owner is appended as the 20th. */
export const INSERT_PARAMETERS = 19;

/** The owner's count of one kind ($q: the queue's parameter, $o: the owner's). */
function count(owners: string, kind: 'added' | 'taken', q: string, o: string): string {
  return `COALESCE((SELECT n FROM ${owners} WHERE queue = ${q}::text AND owner = ${o}::text AND kind = '${kind}'), 0)`;
}

/**
 * pg-boss's insert statement with the owner's place as its priority and the owner's count in the same statement;
 * null when the statement does not have the shape this version knows.
 */
export function fairInsert(text: string, schema: string): string | null {
  if (!REQUIRED.every((anchor) => text.includes(anchor))) return null;
  if (text.indexOf(PRIORITY_ANCHOR) !== text.lastIndexOf(PRIORITY_ANCHOR)) return null;
  if (/\$2[0-9]/.test(text)) return null; // a 20th parameter of its own: ours would collide
  const owners = `${schema}.${OWNERS_TABLE}`;
  // A priority given to `send` (never, by this queue) would still win; otherwise the owner's place is it.
  const insert = text.replace(PRIORITY_ANCHOR, 'COALESCE(NULLIF($4::int, 0), -(SELECT place FROM gs_place))::int as priority');
  return `WITH gs_place AS (
  SELECT LEAST(GREATEST(${count(owners, 'added', '$2', '$20')} - ${count(owners, 'taken', '$2', '$20')}, 0) + 1, ${MAX_PLACE}) AS place
), gs_job AS (${insert}), gs_count AS (
  INSERT INTO ${owners} (queue, owner, kind, n) SELECT $2::text, $20::text, 'added', 1 FROM gs_job
  ON CONFLICT (queue, owner, kind) DO UPDATE SET n = ${owners}.n + 1
)
SELECT id FROM gs_job`;
}

/** pg-boss's fetch (plans.fetchNextJob, by priority, without metadata): its queue name is parameter 1. */
const FETCH_REQUIRED = ['WITH next as (', 'WHERE name = $1', 'FOR UPDATE SKIP LOCKED', 'RETURNING j.'];

/**
 * pg-boss's fetch statement with the fetched jobs counted out of their owners' lines in the same statement; null when
 * the statement does not have the shape this version knows. Only a first delivery counts: the join reads the jobs as
 * they were before this statement (every part of one statement sees the same snapshot), so a job never started before
 * has no `started_on` there, while one handed out again (handed back, or expired) was counted out already. The counts
 * are then exact: no window in which a started job still counts as waiting.
 */
export function fairFetch(text: string, schema: string): string | null {
  if (!FETCH_REQUIRED.every((anchor) => text.includes(anchor))) return null;
  if (/\$[3-9]/.test(text)) return null;
  const owners = `${schema}.${OWNERS_TABLE}`;
  return `WITH gs_fetched AS (${text}), gs_taken AS (
  INSERT INTO ${owners} (queue, owner, kind, n)
  SELECT $1::text, COALESCE(f.data->>'ownerId', ''), 'taken', count(*)
  FROM gs_fetched f JOIN ${schema}.job j ON j.name = $1::text AND j.id = f.id
  WHERE j.started_on IS NULL
  GROUP BY 2
  ON CONFLICT (queue, owner, kind) DO UPDATE SET n = ${owners}.n + EXCLUDED.n
)
SELECT * FROM gs_fetched`;
}

/** The table of owners' counts (created once per schema, under an advisory lock so instances may race). */
export function ownersTableSql(schema: string): string {
  return `BEGIN;
SELECT pg_advisory_xact_lock(hashtext('genservice-queue-pgboss:${schema}'));
CREATE TABLE IF NOT EXISTS ${schema}.${OWNERS_TABLE} (
  queue text NOT NULL,
  owner text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('added', 'taken')),
  n bigint NOT NULL,
  PRIMARY KEY (queue, owner, kind)
);
COMMIT;`;
}

/** Counts jobs as taken ($1 queue, $2 owners, $3 how many each): the slower path's count-out, and a duplicate's undo. */
export function takenSql(schema: string): string {
  const owners = `${schema}.${OWNERS_TABLE}`;
  return `INSERT INTO ${owners} (queue, owner, kind, n)
  SELECT $1::text, d.owner, 'taken', d.n FROM unnest($2::text[], $3::int[]) AS d(owner, n)
  ON CONFLICT (queue, owner, kind) DO UPDATE SET n = ${owners}.n + EXCLUDED.n`;
}

/**
 * Drops the counts of owners with nothing waiting (now and then; such rows are harmless in between). Both rows are
 * locked first, so an enqueue or a fetch of that owner at the same moment waits and then starts from nothing, or
 * wins and keeps them.
 */
export function sweepSql(schema: string): string {
  const owners = `${schema}.${OWNERS_TABLE}`;
  return `WITH idle AS (
  SELECT a.owner FROM ${owners} a JOIN ${owners} t ON t.queue = a.queue AND t.owner = a.owner AND t.kind = 'taken'
  WHERE a.queue = $1 AND a.kind = 'added' AND t.n >= a.n
  FOR UPDATE OF a, t
)
DELETE FROM ${owners} o USING idle WHERE o.queue = $1 AND o.owner = idle.owner`;
}

/** The slower path's first step: count the job in, and read its place. */
export function countInSql(schema: string): string {
  const owners = `${schema}.${OWNERS_TABLE}`;
  return `WITH added AS (
  INSERT INTO ${owners} (queue, owner, kind, n) VALUES ($1, $2, 'added', 1)
  ON CONFLICT (queue, owner, kind) DO UPDATE SET n = ${owners}.n + 1
  RETURNING n
)
SELECT (SELECT n FROM added) - ${count(owners, 'taken', '$1', '$2')} AS waiting`;
}
