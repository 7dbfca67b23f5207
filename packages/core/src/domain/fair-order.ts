/**
 * The order in which every queue hands out waiting work: weighted fair across tenants (organisations), round-robin
 * across the users of a tenant, and by priority within a user's share. Written once here; the BullMQ queue's Lua and
 * the pg-boss queue's SQL compute the same numbers (their tests compare them with these functions).
 *
 * The rule is start-time fair queueing with static tags, so a durable queue can store the tag as the job's priority:
 *
 * - A job's tenant is its `organizationId`; a job without one is a tenant of its own owner (`ownerId`), of weight 1,
 *   exactly as before organisations existed. A tenant's weight is the job's `weight` (default 1).
 * - Each (tenant, user, priority) has a line. A job's place `k` is its line's waiting count including itself, and
 *   `m` is how many users of its tenant have work waiting (its own user included).
 * - Its tag is `V + (k - 1) * m / weight`, where `V` (the queue's virtual time) is the smallest tag among the waiting
 *   jobs of its band (0 when none waits), read when the job is enqueued. Smaller tags go first; equal tags first come,
 *   first served. So with every tenant busy, a tenant of weight 5 gets five jobs for every one of a tenant of weight 1, and a
 *   tenant that has nothing waiting gets its next job at `V`: behind at most one job of each other tenant.
 * - `high` and `normal` count places in lines of their own, and at an equal tag `high` goes first: a tenant's `high`
 *   job goes out at its tenant's next turn. `low` jobs are a band of their own behind all others: they run only when
 *   nothing `normal` or `high` waits.
 *
 * Tags are static, so a user who joins a tenant already busy has its jobs interleaved with the jobs already waiting:
 * for that while the tenant gets a little more than its share, and a little less after (over a busy period it evens
 * out). The same holds for a tenant's `high` jobs beside its `normal` ones.
 */

export const JOB_PRIORITIES = ['low', 'normal', 'high'] as const;
export type JobPriority = (typeof JOB_PRIORITIES)[number];

/** Integer units of virtual time per job of a tenant of weight 1 (the durable queues store integer tags). */
export const FAIR_SCALE = 10;
/** The largest weight the order distinguishes; larger weights count as this. */
export const MAX_WEIGHT = 1000;
/** Separates the parts of a line's key (tenant, user, priority). */
export const LINE_SEPARATOR = '\u001f';

export interface FairLine {
  /** `o:<organizationId>`, or `u:<ownerId>` for a job without an organisation. */
  tenant: string;
  /** `<tenant><sep><ownerId>`: the user within the tenant. */
  member: string;
  /** `<member><sep><priority>`: the line the job waits in. */
  line: string;
  priority: JobPriority;
  /** The tenant's weight as the order uses it: a finite number in (0, MAX_WEIGHT]; 1 without an organisation. */
  weight: number;
  /** 1 for `low` (behind everything else), 0 otherwise. */
  band: 0 | 1;
  /** Breaks an equal tag: 0 for `high`, 1 otherwise. */
  rank: 0 | 1;
}

/** The job's fields the order reads (a subset of the queue port's `Job`). */
export interface FairFields {
  ownerId?: string;
  organizationId?: string;
  weight?: number;
  priority?: JobPriority;
}

/** The weight the order uses for a given weight: 1 when absent or not a positive finite number. */
export function fairWeight(weight: unknown): number {
  return typeof weight === 'number' && Number.isFinite(weight) && weight > 0 ? Math.min(weight, MAX_WEIGHT) : 1;
}

export function fairLineOf(job: FairFields): FairLine {
  const org = typeof job.organizationId === 'string' && job.organizationId !== '' ? job.organizationId : undefined;
  const tenant = org !== undefined ? `o:${org}` : `u:${job.ownerId ?? ''}`;
  const priority: JobPriority = job.priority === 'high' || job.priority === 'low' ? job.priority : 'normal';
  const member = `${tenant}${LINE_SEPARATOR}${job.ownerId ?? ''}`;
  return {
    tenant,
    member,
    line: `${member}${LINE_SEPARATOR}${priority}`,
    priority,
    weight: org !== undefined ? fairWeight(job.weight) : 1,
    band: priority === 'low' ? 1 : 0,
    rank: priority === 'high' ? 0 : 1,
  };
}

/**
 * A job's tag in integer units: `v + floor((place - 1) * members * FAIR_SCALE / weight)`, with `v` the band's
 * virtual time in the same units.
 */
export function fairTagUnits(v: number, place: number, members: number, weight: number): number {
  return v + Math.floor(((Math.max(place, 1) - 1) * Math.max(members, 1) * FAIR_SCALE) / fairWeight(weight));
}

/** The sort key within a band: twice the tag, plus the rank (so `high` goes first at an equal tag). */
export function fairOrder(tagUnits: number, rank: 0 | 1): number {
  return tagUnits * 2 + rank;
}

/** The tag of a sort key (inverse of `fairOrder`). */
export function tagOfOrder(order: number): number {
  return Math.floor(order / 2);
}

/**
 * The queue job of a stored generation (recovery's re-enqueue, a remote job's next check): its owner, and the fair
 * order's fields when the record carries them, so a job enqueued again keeps its organisation, weight and priority.
 */
export function jobOfRecord(rec: { id: string; modelId: string; ownerId: string } & FairFields): {
  generationId: string;
  modelId: string;
} & FairFields {
  // Fields set one by one, not spread: every create makes one (issue 36).
  const job: { generationId: string; modelId: string } & FairFields = { generationId: rec.id, modelId: rec.modelId, ownerId: rec.ownerId };
  if (rec.organizationId !== undefined) job.organizationId = rec.organizationId;
  if (rec.weight !== undefined) job.weight = rec.weight;
  if (rec.priority !== undefined) job.priority = rec.priority;
  return job;
}
