import { Redis, type RedisOptions } from 'ioredis';
import { CAPACITY_WINDOW_MS, UnavailableError, type CapacityAsk, type CapacityGrant, type CapacityLimits, type CapacityStore } from '@genservice/core/ports';

export interface RedisCapacityStoreOptions {
  /** A `redis://` URL or ioredis options (one connection of its own), or an ioredis client the host already has. */
  connection: string | RedisOptions | Redis;
  /** Prefix of its keys. Default `genservice:capacity`. */
  keyPrefix?: string;
}

// KEYS: permits (zset permit -> expiry), requests (zset "at|permit|seq|units" -> at), paused (string), seq (counter).
// ARGV: concurrency, requests/min, units/min (-1: none), permit, units, now, holdMs, windowMs.
const ACQUIRE = `
local conc, rpm, upm = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local permit, units, now, hold, window = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local p = tonumber(redis.call('GET', KEYS[3]) or '0')
if p > now then return {0, p - now} end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if conc >= 0 then
  local held = redis.call('ZCARD', KEYS[1])
  if redis.call('ZSCORE', KEYS[1], permit) then held = held - 1 end
  if held >= conc then return {0, -1} end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[2])
local wait = 0
if n > 0 then wait = tonumber(redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]) + window - now end
if rpm >= 0 and n >= rpm then return {0, wait} end
if upm >= 0 then
  local used = 0
  for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do used = used + tonumber(string.match(m, '([^|]*)$')) end
  if used > 0 and used + units > upm then return {0, wait} end
end
redis.call('ZADD', KEYS[1], now + hold, permit)
local seq = redis.call('INCR', KEYS[4])
redis.call('ZADD', KEYS[2], now, now .. '|' .. permit .. '|' .. seq .. '|' .. ARGV[5])
return {1, -1}
`;

// KEYS: permits, requests. ARGV: permit, the refunded request's time ('' for none).
const RELEASE = `
redis.call('ZREM', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then
  local prefix = ARGV[2] .. '|' .. ARGV[1] .. '|'
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], ARGV[2], ARGV[2])) do
    if string.sub(m, 1, #prefix) == prefix then redis.call('ZREM', KEYS[2], m) return 1 end
  end
end
return 0
`;

// KEYS: paused. ARGV: until.
const PAUSE = `
local p = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > p then redis.call('SET', KEYS[1], ARGV[1]) end
return 1
`;

type Scripted = Redis & {
  gsCapacityAcquire(...args: Array<string | number>): Promise<[number, number]>;
  gsCapacityRelease(...args: Array<string | number>): Promise<number>;
  gsCapacityPause(...args: Array<string | number>): Promise<number>;
};

/**
 * Provider lanes' counters in Redis (the `capacity` service option), shared by every instance on it: each ask is
 * one Lua script, so racing asks are decided one after the other. Keys of a lane share a hash tag (Redis Cluster).
 *
 * @example
 * createGenerationService({ ..., capacity: new RedisCapacityStore({ connection: process.env.REDIS_URL! }) });
 */
export class RedisCapacityStore implements CapacityStore {
  private readonly redis: Scripted;
  private readonly owned: boolean;
  private readonly prefix: string;

  constructor(options: RedisCapacityStoreOptions) {
    if (!options || options.connection === undefined || options.connection === null) {
      throw new TypeError('RedisCapacityStore: options.connection (a Redis URL, ioredis options or client) is required');
    }
    this.prefix = options.keyPrefix ?? 'genservice:capacity';
    const c = options.connection;
    this.owned = !(c instanceof Redis);
    const redis = c instanceof Redis ? c : typeof c === 'string' ? new Redis(c, { maxRetriesPerRequest: 1 }) : new Redis({ maxRetriesPerRequest: 1, ...c });
    if (this.owned) redis.on('error', () => undefined);
    redis.defineCommand('gsCapacityAcquire', { numberOfKeys: 4, lua: ACQUIRE });
    redis.defineCommand('gsCapacityRelease', { numberOfKeys: 2, lua: RELEASE });
    redis.defineCommand('gsCapacityPause', { numberOfKeys: 1, lua: PAUSE });
    this.redis = redis as Scripted;
  }

  private keys(lane: string): { permits: string; requests: string; paused: string; seq: string } {
    const base = `${this.prefix}:{${lane}}`;
    return { permits: `${base}:permits`, requests: `${base}:requests`, paused: `${base}:paused`, seq: `${base}:seq` };
  }

  async acquire(lane: string, limits: CapacityLimits, ask: CapacityAsk): Promise<CapacityGrant> {
    const k = this.keys(lane);
    const [granted, retry] = await this.call(() =>
      this.redis.gsCapacityAcquire(
        k.permits,
        k.requests,
        k.paused,
        k.seq,
        limits.concurrency ?? -1,
        limits.requestsPerMinute ?? -1,
        limits.unitsPerMinute ?? -1,
        ask.permitId,
        ask.units,
        Math.trunc(ask.now),
        Math.trunc(ask.holdMs),
        CAPACITY_WINDOW_MS,
      ),
    );
    if (granted === 1) return { granted: true };
    return retry < 0 ? { granted: false } : { granted: false, retryAfterMs: retry };
  }

  async release(lane: string, permitId: string, refund?: { at: number }): Promise<void> {
    const k = this.keys(lane);
    await this.call(() => this.redis.gsCapacityRelease(k.permits, k.requests, permitId, refund ? Math.trunc(refund.at) : ''));
  }

  async pause(lane: string, until: number): Promise<void> {
    await this.call(() => this.redis.gsCapacityPause(this.keys(lane).paused, Math.trunc(until)));
  }

  /** Closes the connection it opened (a client the host gave stays open). */
  async close(): Promise<void> {
    if (this.owned) await this.redis.quit().catch(() => this.redis.disconnect());
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw new UnavailableError('Redis (provider capacity) could not be reached', { cause: err });
    }
  }
}
