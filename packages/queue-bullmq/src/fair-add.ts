/**
 * One round trip for a fair enqueue.
 *
 * The queue is fair across owners by priority: an owner's k-th waiting job gets BullMQ priority k (BullMQ runs lower
 * priorities first, FIFO within one), and a Redis hash keeps each owner's waiting count. Read with HINCRBY and then
 * added, that is two round trips per enqueue. Instead, the producer's connection runs BullMQ's own `addPrioritizedJob`
 * script with a few lines put in front of its `storeJob` call: they take the job's owner from its data, HINCRBY the
 * owner's count, and use the result as the job's priority. Everything else is BullMQ's script as the installed BullMQ
 * ships it (`bullmq/dist/cjs/scripts/addPrioritizedJob-9.js`), run under BullMQ's own command name on this one
 * connection, with the arguments `Queue.add` builds: the job is stored, prioritized, announced and deduplicated by id
 * exactly as BullMQ does it, and a duplicate id (which BullMQ answers before storing anything) counts nothing.
 *
 * Tied to BullMQ's internals on purpose, and checked: the script text must contain the anchors below and the
 * command must be the one BullMQ defined on the connection, or the queue keeps the two-round-trip path (and the test
 * `one-round-trip.test.ts` fails, so a BullMQ upgrade that changes them is seen before release, not in production).
 */
import type { Queue } from 'bullmq';

/** Where the owner's count is kept: `<prefix>:<queue>:gs-waiting-by-owner` (BullMQ's key prefix + our suffix). */
export const OWNERS_SUFFIX = 'gs-waiting-by-owner';
/** BullMQ's lowest priority (2^21 - 1); lower numbers run first. */
export const MAX_PRIORITY = 2_097_151;

/** BullMQ's own script, as the installed version ships it (CommonJS, so both builds of this package can load it). */
const BULLMQ_SCRIPT = 'bullmq/dist/cjs/scripts/addPrioritizedJob-9.js';
const STORE_ANCHOR = 'local delay, priority = storeJob(';
const REQUIRED = ['local rcall = redis.call', 'local args = cmsgpack.unpack(ARGV[1])', 'local opts = cmsgpack.unpack(ARGV[3])', STORE_ANCHOR];

/**
 * Lines run just before BullMQ stores the job (after its duplicate-id check): the owner's place in line becomes the
 * job's priority. `args[1]` is the queue's key prefix (`<prefix>:<queue>:`), `ARGV[2]` the job's data as JSON.
 */
const FAIR_LINES = `-- genservice: the job's priority is its owner's place in line, counted only for a job that is really added.
local gsData = cjson.decode(ARGV[2])
local gsOwner = ''
if type(gsData) == 'table' and type(gsData['ownerId']) == 'string' then gsOwner = gsData['ownerId'] end
local gsPlace = rcall("HINCRBY", args[1] .. "${OWNERS_SUFFIX}", gsOwner, 1)
if gsPlace < 1 then gsPlace = 1 elseif gsPlace > ${MAX_PRIORITY} then gsPlace = ${MAX_PRIORITY} end
opts['priority'] = gsPlace
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
