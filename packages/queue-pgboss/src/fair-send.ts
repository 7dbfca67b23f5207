/**
 * One round trip for a fair enqueue.
 *
 * The queue is fair across owners by priority, as the BullMQ queue is: an owner's k-th waiting job gets pg-boss
 * priority -k (pg-boss hands out higher priorities first, oldest first within one), and a table of this package keeps
 * each owner's waiting count. Read, then sent, then counted, that is three round trips per enqueue. Instead, `send` is
 * given a connection (pg-boss's own `db` option of `send`) that runs pg-boss's insert statement inside one statement
 * with the count: the owner's place is read in front of the insert and becomes the job's priority, and the owner's
 * count goes up by one for a job that was really inserted (a duplicate, which pg-boss's `ON CONFLICT DO NOTHING`
 * answers with no row, counts nothing). Everything else is pg-boss's statement as the installed pg-boss builds it,
 * with the values `send` computed: the job is stored, deduplicated and defaulted exactly as pg-boss does it.
 *
 * Tied to pg-boss's internals on purpose, and checked: the statement must contain the anchors below, or the queue
 * takes the three-round-trip path (and the test `one-round-trip.test.ts` fails, so a pg-boss upgrade that changes
 * them is seen before release, not in production).
 */

/** Where the owners' counts are kept: a table of this package in the queue's schema. */
export const OWNERS_TABLE = 'genservice_waiting';
/** Postgres `integer` bounds pg-boss's priority column; an owner's place is capped here. */
export const MAX_PLACE = 2_147_483_647;

/** pg-boss's insert of one job (plans.insertJob): its priority is parameter 4, its queue name parameter 2. */
const PRIORITY_ANCHOR = 'COALESCE($4::int, 0) as priority';
const REQUIRED = ['INSERT INTO', '.job (', '$2 as name', 'ON CONFLICT DO NOTHING', 'RETURNING id', PRIORITY_ANCHOR];
/** pg-boss's insert takes 19 parameters; the owner is appended as the 20th. */
export const INSERT_PARAMETERS = 19;

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
  SELECT LEAST(COALESCE((SELECT waiting FROM ${owners} WHERE queue = $2::text AND owner = $20::text), 0) + 1, ${MAX_PLACE}) AS place
), gs_job AS (${insert}), gs_count AS (
  INSERT INTO ${owners} (queue, owner, waiting) SELECT $2::text, $20::text, 1 FROM gs_job
  ON CONFLICT (queue, owner) DO UPDATE SET waiting = ${owners}.waiting + 1
)
SELECT id FROM gs_job`;
}

/** The table of owners' waiting counts (created once per schema, under an advisory lock so instances may race). */
export function ownersTableSql(schema: string): string {
  return `BEGIN;
SELECT pg_advisory_xact_lock(hashtext('genservice-queue-pgboss:${schema}'));
CREATE TABLE IF NOT EXISTS ${schema}.${OWNERS_TABLE} (
  queue text NOT NULL,
  owner text NOT NULL,
  waiting integer NOT NULL,
  PRIMARY KEY (queue, owner)
);
COMMIT;`;
}

/** Counts started jobs out of their owners' lines ($1 queue, $2 owners, $3 how many each), never below zero. */
export function releaseSql(schema: string): string {
  const owners = `${schema}.${OWNERS_TABLE}`;
  return `UPDATE ${owners} o SET waiting = GREATEST(o.waiting - d.n, 0)
  FROM unnest($2::text[], $3::int[]) AS d(owner, n)
  WHERE o.queue = $1 AND o.owner = d.owner`;
}

/** Drops owners with nothing waiting (now and then; a row of zero is harmless in between). */
export function sweepSql(schema: string): string {
  return `DELETE FROM ${schema}.${OWNERS_TABLE} WHERE queue = $1 AND waiting <= 0`;
}

/** The three-round-trip path's first step: count the job in, and read its place. */
export function countInSql(schema: string): string {
  const owners = `${schema}.${OWNERS_TABLE}`;
  return `INSERT INTO ${owners} (queue, owner, waiting) VALUES ($1, $2, 1)
  ON CONFLICT (queue, owner) DO UPDATE SET waiting = ${owners}.waiting + 1
  RETURNING waiting`;
}
