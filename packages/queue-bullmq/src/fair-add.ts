/**
 * One round trip for a fair enqueue.
 *
 * The queue is fair by priority: a job's BullMQ priority is its tag in the fair order of `@genservice/core/ports`
 * (weighted across organisations, round-robin across users, `high` / `normal` / `low`; BullMQ runs lower priorities
 * first, FIFO within one), and a Redis hash keeps the waiting counts the tag is made of. Counted and then added, that
 * is two round trips per enqueue. Instead, the producer's connection runs BullMQ's own `addPrioritizedJob`
 * script with a few lines put in front of its `storeJob` call: they read the job's owner, organisation, weight and
 * priority from its data, count it into its line, and use its tag as the job's priority. Everything else is BullMQ's script as the installed BullMQ
 * ships it (`bullmq/dist/cjs/scripts/addPrioritizedJob-9.js`), run under BullMQ's own command name on this one
 * connection, with the arguments `Queue.add` builds: the job is stored, prioritized, announced and deduplicated by id
 * exactly as BullMQ does it, and a duplicate id (which BullMQ answers before storing anything) counts nothing.
 *
 * Tied to BullMQ's internals on purpose, and checked: the script text must contain the anchors below and the
 * command must be the one BullMQ defined on the connection, or the queue keeps the two-round-trip path (and the test
 * `one-round-trip.test.ts` fails, so a BullMQ upgrade that changes them is seen before release, not in production).
 */
import type { Queue } from 'bullmq';
import { FAIR_SCALE, MAX_WEIGHT } from '@genservice/core/ports';

/**
 * Where the fair order's counts are kept: `<prefix>:<queue>:gs-fair` (BullMQ's key prefix + our suffix), a hash of
 * waiting counts by line (`tenant<US>user<US>priority`), by member (`tenant<US>user`), and of users with work waiting
 * by tenant. See `fairLineOf` in `@genservice/core/ports`.
 */
export const FAIR_SUFFIX = 'gs-fair';
/** Priorities of `low` jobs start here (the upper half of BullMQ's range, which ends at 2^21 - 1); the others' lie below. */
export const LOW_BAND = 1_048_576;
/** Where the waiting jobs of a band are moved back towards 0 (half the band's range of sort keys). */
export const REBASE_AT = LOW_BAND / 2;
/** BullMQ's score of a prioritized job is `priority * 2^32 + counter`: where the `low` band's scores begin. */
const LOW_SCORE = (LOW_BAND + 1) * 2 ** 32;

/**
 * A Lua function `gsFairPriority(hashKey, prioritizedKey, data)`: counts the job into its line and answers its BullMQ
 * priority, the fair order's tag (`fairTagUnits` / `fairOrder` of `@genservice/core/ports`, computed the same way)
 * plus one, with `low` jobs in the upper band. The virtual time is the tag of the band's first waiting job in
 * BullMQ's prioritized set. When it passes REBASE_AT (a backlog that never emptied for tens of thousands of rounds),
 * the band's waiting jobs are moved back by it first, in order; a tag beyond the band's range is capped (those jobs
 * then go first come, first served among themselves).
 */
export const FAIR_PRIORITY_LUA = `local function gsFairPriority(hashKey, prioritizedKey, data)
  local owner = ''
  if type(data) == 'table' and type(data['ownerId']) == 'string' then owner = data['ownerId'] end
  local tenant = 'u:' .. owner
  local weight = 1
  if type(data) == 'table' and type(data['organizationId']) == 'string' and data['organizationId'] ~= '' then
    tenant = 'o:' .. data['organizationId']
    local w = tonumber(data['weight'])
    if w ~= nil and w == w and w > 0 and w < math.huge then weight = w end
    if weight > ${MAX_WEIGHT} then weight = ${MAX_WEIGHT} end
  end
  local prio = 'normal'
  if type(data) == 'table' and (data['priority'] == 'high' or data['priority'] == 'low') then prio = data['priority'] end
  local band = 0
  if prio == 'low' then band = 1 end
  local rank = 1
  if prio == 'high' then rank = 0 end
  local member = tenant .. '\\031' .. owner
  local line = member .. '\\031' .. prio
  local place = redis.call('HINCRBY', hashKey, line, 1)
  if redis.call('HINCRBY', hashKey, member, 1) == 1 then redis.call('HINCRBY', hashKey, tenant, 1) end
  local members = tonumber(redis.call('HGET', hashKey, tenant)) or 1
  local first
  if band == 0 then first = redis.call('ZRANGEBYSCORE', prioritizedKey, '-inf', '(${LOW_SCORE}', 'WITHSCORES', 'LIMIT', 0, 1)
  else first = redis.call('ZRANGEBYSCORE', prioritizedKey, '${LOW_SCORE}', '+inf', 'WITHSCORES', 'LIMIT', 0, 1) end
  local v = 0
  if first[2] then v = math.floor((math.floor(tonumber(first[2]) / 4294967296) - 1 - band * ${LOW_BAND}) / 2) end
  if v * 2 > ${REBASE_AT} then
    -- The band's tags have come far from 0 (a backlog that never emptied): every waiting job of the band moves down by
    -- the first one's tag, keeping their order, so new tags stay far from the cap. O(waiting), once in a long while.
    local jobPrefix = string.sub(prioritizedKey, 1, #prioritizedKey - 11)
    local lo, hi = '-inf', '(${LOW_SCORE}'
    if band == 1 then lo, hi = '${LOW_SCORE}', '+inf' end
    local waiting = redis.call('ZRANGEBYSCORE', prioritizedKey, lo, hi, 'WITHSCORES')
    for i = 1, #waiting, 2 do
      redis.call('ZADD', prioritizedKey, tonumber(waiting[i + 1]) - v * 2 * 4294967296, waiting[i])
      redis.call('HINCRBY', jobPrefix .. waiting[i], 'priority', -v * 2)
    end
    v = 0
  end
  local order = (v + math.floor((place - 1) * members * ${FAIR_SCALE} / weight)) * 2 + rank
  if order > ${LOW_BAND - 2} then order = ${LOW_BAND - 2} end
  return band * ${LOW_BAND} + order + 1
end
`;

/** Counts started jobs out of their lines (ARGV: line, member, tenant; three per job). A count never goes below zero. */
export const FAIR_RELEASE_LUA = `local key = KEYS[1]
for i = 1, #ARGV, 3 do
  local n = redis.call('HINCRBY', key, ARGV[i], -1)
  if n <= 0 then redis.call('HDEL', key, ARGV[i]) end
  local before = tonumber(redis.call('HGET', key, ARGV[i + 1])) or 0
  if before > 1 then redis.call('HINCRBY', key, ARGV[i + 1], -1)
  elseif before == 1 then
    redis.call('HDEL', key, ARGV[i + 1])
    if redis.call('HINCRBY', key, ARGV[i + 2], -1) <= 0 then redis.call('HDEL', key, ARGV[i + 2]) end
  end
end
return 0`;

/**
 * The slower path's count-in (KEYS: the hash, BullMQ's prioritized set; ARGV[1]: the job's data as JSON): answers
 * the job's priority.
 */
export const FAIR_PLACE_LUA = `${FAIR_PRIORITY_LUA}return gsFairPriority(KEYS[1], KEYS[2], cjson.decode(ARGV[1]))`;

/** Where a waiting job stands (KEYS[1]: BullMQ's prioritized set, ARGV[1]: the job id): jobs before it, or -1. */
export const POSITION_LUA = `local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return -1 end
return redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. score)`;

/** BullMQ's own script, as the installed version ships it (CommonJS, so both builds of this package can load it). */
const BULLMQ_SCRIPT = 'bullmq/dist/cjs/scripts/addPrioritizedJob-9.js';
const STORE_ANCHOR = 'local delay, priority = storeJob(';
const REQUIRED = ['local rcall = redis.call', 'local args = cmsgpack.unpack(ARGV[1])', 'local opts = cmsgpack.unpack(ARGV[3])', STORE_ANCHOR];

/**
 * Lines run just before BullMQ stores the job (after its duplicate-id check): the job's place in the fair order
 * becomes its priority. `args[1]` is the queue's key prefix (`<prefix>:<queue>:`), `ARGV[2]` the job's data as JSON.
 */
const FAIR_LINES = `-- genservice: the job's priority is its place in the fair order, counted only for a job that is really added.
${FAIR_PRIORITY_LUA}opts['priority'] = gsFairPriority(args[1] .. "${FAIR_SUFFIX}", args[1] .. "prioritized", cjson.decode(ARGV[2]))
`;

/** BullMQ's addPrioritizedJob script with the fair lines in front of its storeJob call; null if its shape changed. */
export function fairAddScript(content: string): string | null {
  if (!REQUIRED.every((anchor) => content.includes(anchor))) return null;
  const at = content.indexOf(STORE_ANCHOR);
  if (at !== content.lastIndexOf(STORE_ANCHOR)) return null;
  return `${content.slice(0, at)}${FAIR_LINES}${content.slice(at)}`;
}

interface ScriptModule {
  addPrioritizedJob?: { name?: unknown; content?: unknown; keys?: unknown };
}

interface DefinableClient {
  defineCommand(name: string, definition: { numberOfKeys: number; lua: string }): void;
}

/**
 * Makes `queue`'s connection add prioritized jobs the fair way, in one round trip. Resolves true when it did, false
 * when the installed BullMQ does not have the script or command this relies on (then nothing was changed); rejects
 * when the connection could not be opened.
 */
export async function installFairAdd(queue: Queue): Promise<boolean> {
  let mod: ScriptModule;
  try {
    // A file of BullMQ's package (it has no exports map, so its files are reachable), not one of its typed entry points.
    mod = (await import(BULLMQ_SCRIPT)) as ScriptModule;
  } catch {
    return false;
  }
  const script = mod.addPrioritizedJob ?? (mod as { default?: ScriptModule }).default?.addPrioritizedJob;
  if (!script || typeof script.content !== 'string' || script.keys !== 9) return false;
  const lua = fairAddScript(script.content);
  if (lua === null) return false;
  // Rejects while Redis cannot be reached: the caller asks again later (false is only for a BullMQ that differs).
  const client = (await queue.client) as unknown as DefinableClient & Record<string, unknown>;
  // BullMQ names its commands `<script>:<its version>` and defines them when the connection opens.
  // (ioredis also defines a `<name>Buffer` variant of each.)
  const names = Object.keys(client).filter((k) => k.startsWith('addPrioritizedJob:') && !k.endsWith('Buffer') && typeof client[k] === 'function');
  if (names.length !== 1) return false;
  client.defineCommand(names[0]!, { numberOfKeys: 9, lua });
  return true;
}
