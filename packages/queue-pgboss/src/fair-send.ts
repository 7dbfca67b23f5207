/**
 * One round trip for a fair enqueue.
 *
 * The queue is fair by priority, as the BullMQ queue is: a job's pg-boss priority is minus its tag in the fair order
 * of `@genservice/core/ports` (weighted across organisations, round-robin across users, `high` / `normal` / `low`;
 * pg-boss hands out higher priorities first, oldest first within one), and a table of this package counts, per line
 * (`tenant<US>user<US>priority`), the jobs added and the jobs taken (two rows, so that an enqueue and a fetch never wait
 * for each other's lock): their difference is the line's waiting count. Read, then sent, then counted, that is three round trips per enqueue. Instead, `send` is
 * given a connection (pg-boss's own `db` option of `send`) that runs pg-boss's insert statement inside one statement
 * with the count: the job's tag is computed in front of the insert (its line's place, its tenant's users with work
 * waiting, the band's first waiting job) and becomes the job's priority, and the line's count goes up by one for a job that was really inserted (a duplicate, which pg-boss's `ON CONFLICT DO NOTHING`
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
import { FAIR_SCALE, fairLineOf, type FairFields } from '@genservice/core/ports';

/** Where the lines' counts are kept: a table of this package in the queue's schema (its `owner` column holds lines). */
export const OWNERS_TABLE = 'genservice_owner_counts';
/** The index of waiting jobs in the fair order that this package adds to pg-boss's job table. */
export const FAIR_INDEX = 'genservice_job_fair';
/** `low` jobs' priorities lie at and below minus this; the others' above (a tag beyond the band's range is capped). */
export const LOW_BAND = 1_073_741_824;

/** pg-boss's insert of one job (plans.insertJob): its priority is parameter 4, its queue name parameter 2. */
const PRIORITY_ANCHOR = 'COALESCE($4::int, 0) as priority';
const REQUIRED = ['INSERT INTO', '.job (', '$2 as name', 'ON CONFLICT DO NOTHING', 'RETURNING id', PRIORITY_ANCHOR];
/** pg-boss's insert takes 19 parameters; the fair order's are appended as the 20th to 25th. */
export const INSERT_PARAMETERS = 19;

/** The fair order's parameters of a job, in the order the statements below number them: line, user, tenant, weight, band, rank. */
export function fairParams(job: FairFields): [string, string, string, number, number, number] {
  const l = fairLineOf(job);
  return [l.line, job.ownerId ?? '', l.tenant, l.weight, l.band, l.rank];
}

/**
 * The job's pg-boss priority, as a scalar subquery: minus (band * LOW_BAND + its order + 1), the order being
 * `fairOrder(fairTagUnits(V, place, members, weight), rank)` of `@genservice/core/ports` computed the same way. `$q`
 * is the queue's parameter, `p` the first of the six fair parameters.
 */
function prioritySql(schema: string, q: string, p: number): string {
  const owners = `${schema}.${OWNERS_TABLE}`;
  const [line, user, tenant, weight, band, rank] = [0, 1, 2, 3, 4, 5].map((i) => `$${p + i}`);
  const sep = `E'\\x1f'`;
  const top = (cmp: string): string =>
    `(SELECT max(j.priority) FROM ${schema}.job j WHERE j.name = ${q}::text AND j.state < 'active' AND j.start_after < now() AND j.priority ${cmp} -${LOW_BAND})`;
  return `(SELECT -(${band}::int * ${LOW_BAND} + LEAST((v.v + floor(GREATEST(w.waiting, 0) * m.members * ${FAIR_SCALE} / ${weight}::float8))::bigint * 2 + ${rank}::int, ${LOW_BAND - 2}) + 1)::int
  FROM (SELECT ${count(owners, 'added', q, line)} - ${count(owners, 'taken', q, line)} AS waiting) w,
  (SELECT 1 + count(DISTINCT split_part(a.owner, ${sep}, 2)) AS members FROM ${owners} a
    LEFT JOIN ${owners} t ON t.queue = a.queue AND t.owner = a.owner AND t.kind = 'taken'
    WHERE a.queue = ${q}::text AND a.kind = 'added' AND split_part(a.owner, ${sep}, 1) = ${tenant}::text
      AND split_part(a.owner, ${sep}, 3) <> '' AND split_part(a.owner, ${sep}, 2) <> ${user}::text AND a.n > COALESCE(t.n, 0)) m,
  (SELECT COALESCE(floor((-(CASE WHEN ${band}::int = 0 THEN ${top('>')} ELSE ${top('<')} END) - 1 - ${band}::int * ${LOW_BAND}) / 2.0), 0) AS v) v)`;
}

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
  // A priority given to `send` (never, by this queue) would still win; otherwise the job's tag is it.
  const insert = text.replace(PRIORITY_ANCHOR, 'COALESCE(NULLIF($4::int, 0), (SELECT priority FROM gs_place))::int as priority');
  return `WITH gs_place AS (
  SELECT ${prioritySql(schema, '$2', 20)} AS priority
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
 * are then exact: no window in which a started job still counts as waiting. The jobs come back in the order they were
 * taken in (an UPDATE's RETURNING has none of its own), so a batch starts in the fair order too.
 */
export function fairFetch(text: string, schema: string): string | null {
  if (!FETCH_REQUIRED.every((anchor) => text.includes(anchor))) return null;
  if (/\$[3-9]/.test(text)) return null;
  const owners = `${schema}.${OWNERS_TABLE}`;
  return `WITH gs_fetched AS (${text}), gs_taken AS (
  INSERT INTO ${owners} (queue, owner, kind, n)
  SELECT $1::text, COALESCE(f.data->>'gsLine', f.data->>'ownerId', ''), 'taken', count(*)
  FROM gs_fetched f JOIN ${schema}.job j ON j.name = $1::text AND j.id = f.id
  WHERE j.started_on IS NULL
  GROUP BY 2
  ON CONFLICT (queue, owner, kind) DO UPDATE SET n = ${owners}.n + EXCLUDED.n
)
SELECT f.* FROM gs_fetched f JOIN ${schema}.job j ON j.name = $1::text AND j.id = f.id
ORDER BY j.priority DESC, j.created_on, j.id`;
}

/**
 * The table of owners' counts, and an index of pg-boss's job table in the fair order (created once per schema, under an
 * advisory lock so instances may race). The index lets an enqueue read the first waiting job's tag, and a position be
 * counted, without a pass over every waiting job (pg-boss's own fetch index leads with `start_after`).
 */
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
CREATE INDEX IF NOT EXISTS ${FAIR_INDEX} ON ${schema}.job (name, priority DESC, created_on, id) WHERE state < 'active';
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

/** The slower path's first step ($1 queue, then the six fair parameters): count the job in, and read its priority. */
export function countInSql(schema: string): string {
  const owners = `${schema}.${OWNERS_TABLE}`;
  return `WITH gs_place AS (SELECT ${prioritySql(schema, '$1', 2)} AS priority), added AS (
  INSERT INTO ${owners} (queue, owner, kind, n) VALUES ($1, $2, 'added', 1)
  ON CONFLICT (queue, owner, kind) DO UPDATE SET n = ${owners}.n + 1
)
SELECT priority FROM gs_place`;
}

/**
 * Where a waiting job stands ($1 queue, $2 generation id): the waiting jobs pg-boss's fetch takes before it (priority
 * first, then age); no row when the generation has no waiting job.
 */
export function positionSql(schema: string): string {
  return `SELECT (SELECT count(*) FROM ${schema}.job j WHERE j.name = $1 AND j.state < 'active' AND j.start_after < now()
    AND (j.priority > me.priority OR (j.priority = me.priority AND (j.created_on, j.id) < (me.created_on, me.id))))::int AS ahead
  FROM ${schema}.job me WHERE me.name = $1 AND me.singleton_key = $2 AND me.state < 'active' AND me.start_after < now()
  LIMIT 1`;
}
