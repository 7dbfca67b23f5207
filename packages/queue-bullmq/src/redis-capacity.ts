import { Redis, type RedisOptions } from 'ioredis';
import { CAPACITY_WINDOW_MS, LANE_WAITER_TTL_MS, laneTurnCost, UnavailableError, type CapacityAsk, type CapacityGrant, type CapacityLimits, type CapacityStore } from '@genservice/core/ports';

export interface RedisCapacityStoreOptions {
  /** A `redis://` URL or ioredis options (one connection of its own), or an ioredis client the host already has. */
  connection: string | RedisOptions | Redis;
  /** Prefix of its keys. Default `genservice:capacity`. */
  keyPrefix?: string;
}

// KEYS: permits (zset permit -> expiry), requests (zset "at|permit|seq|units" -> at, or "at|permit|seq|cost:tenant|units"
// for a fair grant), paused (string), seq (counter), and the lane's turns (domain/lane-turns.ts): live (zset tenant ->
// virtual time, tenants with live waiters), idle (zset tenant -> virtual time, the others), count (hash tenant -> live
// waiters), waiters (zset waiter -> until), who (hash waiter -> tenant), floor (string).
// ARGV: concurrency, requests/min, units/min (-1: none), permit, units, now, holdMs, windowMs, tenant ('': no
// fairness), cost, waiter, waiter TTL.
const ACQUIRE = `
local conc, rpm, upm = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local permit, units, now, hold, window = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local tenant, cost, waiter, ttl = ARGV[9], tonumber(ARGV[10]), ARGV[11], tonumber(ARGV[12])
local refused, retry = false, -1
local p = tonumber(redis.call('GET', KEYS[3]) or '0')
if p > now then
  refused, retry = true, p - now
else
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  if conc >= 0 then
    local held = redis.call('ZCARD', KEYS[1])
    if redis.call('ZSCORE', KEYS[1], permit) then held = held - 1 end
    if held >= conc then refused = true end
  end
  if not refused then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
    local n = redis.call('ZCARD', KEYS[2])
    local wait = 0
    if n > 0 then wait = tonumber(redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]) + window - now end
    if rpm >= 0 and n >= rpm then
      refused, retry = true, wait
    elseif upm >= 0 then
      local used = 0
      for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do used = used + tonumber(string.match(m, '([^|]*)$')) end
      if used > 0 and used + units > upm then refused, retry = true, wait end
    end
  end
end
local paid = ''
if tenant == '' then
  if refused then return {0, retry} end
else
  -- laneTurn of domain/lane-turns.ts, mirrored.
  local function unwait(w)
    local t = redis.call('HGET', KEYS[9], w)
    redis.call('HDEL', KEYS[9], w)
    redis.call('ZREM', KEYS[8], w)
    if not t then return end
    if redis.call('HINCRBY', KEYS[7], t, -1) <= 0 then
      redis.call('HDEL', KEYS[7], t)
      local v = redis.call('ZSCORE', KEYS[5], t)
      if v then
        redis.call('ZREM', KEYS[5], t)
        redis.call('ZADD', KEYS[6], v, t)
      end
    end
  end
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[8], '-inf', now)) do unwait(w) end
  local floor = tonumber(redis.call('GET', KEYS[10]) or '0')
  local vt = redis.call('ZSCORE', KEYS[5], tenant)
  if vt then
    vt = tonumber(vt)
  else
    local idle = redis.call('ZSCORE', KEYS[6], tenant)
    vt = floor
    if idle and tonumber(idle) > floor then vt = tonumber(idle) end
  end
  local lowest = nil
  local head = redis.call('ZRANGE', KEYS[5], 0, 1, 'WITHSCORES')
  if head[1] and head[1] ~= tenant then lowest = tonumber(head[2]) elseif head[3] then lowest = tonumber(head[4]) end
  local lo = vt
  if lowest and lowest < lo then lo = lowest end
  if lo > floor then
    redis.call('SET', KEYS[10], lo)
    redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', lo)
  end
  refused = refused or (lowest ~= nil and vt > lowest)
  local back = 0
  if retry >= 0 then back = retry end
  local was = redis.call('HGET', KEYS[9], waiter)
  if refused and was == tenant then
    -- A waiter asking again: its tenant is live (its time unchanged), only its time to live moves.
    redis.call('ZADD', KEYS[8], now + back + ttl, waiter)
    return {0, retry}
  end
  if was then unwait(waiter) end
  if refused then
    redis.call('HINCRBY', KEYS[7], tenant, 1)
    redis.call('ZREM', KEYS[6], tenant)
    redis.call('ZADD', KEYS[5], vt, tenant)
    redis.call('ZADD', KEYS[8], now + back + ttl, waiter)
    redis.call('HSET', KEYS[9], waiter, tenant)
    return {0, retry}
  end
  if redis.call('ZSCORE', KEYS[5], tenant) then
    redis.call('ZADD', KEYS[5], vt + cost, tenant)
  else
    redis.call('ZADD', KEYS[6], vt + cost, tenant)
  end
  paid = ARGV[10] .. ':' .. tenant .. '|'
end
redis.call('ZADD', KEYS[1], now + hold, permit)
local seq = redis.call('INCR', KEYS[4])
redis.call('ZADD', KEYS[2], now, now .. '|' .. permit .. '|' .. seq .. '|' .. paid .. ARGV[5])
return {1, -1}
`;

// KEYS: permits, requests, live, idle. ARGV: permit, the refunded request's time ('' for none).
const RELEASE = `
redis.call('ZREM', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then
  local prefix = ARGV[2] .. '|' .. ARGV[1] .. '|'
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], ARGV[2], ARGV[2])) do
    if string.sub(m, 1, #prefix) == prefix then
      redis.call('ZREM', KEYS[2], m)
      -- A fair grant's turn goes back with it.
      local paid = string.match(string.sub(m, #prefix + 1), '^[^|]*|(.*)|[^|]*$')
      if paid then
        local cost, t = string.match(paid, '^(%d+):(.*)$')
        if redis.call('ZSCORE', KEYS[3], t) then redis.call('ZINCRBY', KEYS[3], -tonumber(cost), t)
        elseif redis.call('ZSCORE', KEYS[4], t) then redis.call('ZINCRBY', KEYS[4], -tonumber(cost), t) end
      end
      return 1
    end
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
 * one Lua script, so racing asks are decided one after the other (an ask with `fair` takes the lane's turns in the
 * same script, which mirrors `laneTurn` of @genservice/core). Keys of a lane share a hash tag (Redis Cluster).
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
    redis.defineCommand('gsCapacityAcquire', { numberOfKeys: 10, lua: ACQUIRE });
    redis.defineCommand('gsCapacityRelease', { numberOfKeys: 4, lua: RELEASE });
    redis.defineCommand('gsCapacityPause', { numberOfKeys: 1, lua: PAUSE });
    this.redis = redis as Scripted;
  }

  private keys(lane: string): Record<'permits' | 'requests' | 'paused' | 'seq' | 'live' | 'idle' | 'count' | 'waiters' | 'who' | 'floor', string> {
    const base = `${this.prefix}:{${lane}}`;
    return {
      permits: `${base}:permits`,
      requests: `${base}:requests`,
      paused: `${base}:paused`,
      seq: `${base}:seq`,
      live: `${base}:turns:live`,
      idle: `${base}:turns:idle`,
      count: `${base}:turns:count`,
      waiters: `${base}:turns:waiters`,
      who: `${base}:turns:who`,
      floor: `${base}:turns:floor`,
    };
  }

  async acquire(lane: string, limits: CapacityLimits, ask: CapacityAsk): Promise<CapacityGrant> {
    const k = this.keys(lane);
    const [granted, retry] = await this.call(() =>
      this.redis.gsCapacityAcquire(
        k.permits,
        k.requests,
        k.paused,
        k.seq,
        k.live,
        k.idle,
        k.count,
        k.waiters,
        k.who,
        k.floor,
        limits.concurrency ?? -1,
        limits.requestsPerMinute ?? -1,
        limits.unitsPerMinute ?? -1,
        ask.permitId,
        ask.units,
        Math.trunc(ask.now),
        Math.trunc(ask.holdMs),
        CAPACITY_WINDOW_MS,
        ask.fair?.tenant ?? '',
        ask.fair ? laneTurnCost(ask.fair.weight) : 0,
        ask.fair?.waiter ?? '',
        LANE_WAITER_TTL_MS,
      ),
    );
    if (granted === 1) return { granted: true };
    return retry < 0 ? { granted: false } : { granted: false, retryAfterMs: retry };
  }

  async release(lane: string, permitId: string, refund?: { at: number }): Promise<void> {
    const k = this.keys(lane);
    await this.call(() => this.redis.gsCapacityRelease(k.permits, k.requests, k.live, k.idle, permitId, refund ? Math.trunc(refund.at) : ''));
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
